"""The three exception types of the remoting codec, and the refusals of bodies.

The adapters rely on the split: a :class:`ProtocolError` means the byte stream is
unusable and the connection must be closed (upstream ``NettyDecoder`` closes the
channel), while the two ``ValueError`` subclasses describe one bad request that is
answered with an error response and leaves the connection open. A body past a limit of
its kind (:mod:`remoting.body_limits`) is a :class:`BodyRefused`, a
:class:`BodyDecodeError` like any other bad body.
"""

from __future__ import annotations

from typing import Any


class ProtocolError(Exception):
    """A framing or header failure; the only thing to do is close the connection.

    Raised for a too-long or negative length, a header longer than its frame or past
    the header limits of :mod:`remoting.frame`, an unknown serialize type, an
    undecodable header, and for a command that cannot be represented on the wire when
    encoding.

    ``decoded`` holds the commands that were complete before the fault in the
    same read: like Netty, which passes good frames down the pipeline before its
    decoder fails, an adapter may still process them before it closes.
    """

    def __init__(self, *args: object, decoded: list[Any] | None = None) -> None:
        super().__init__(*args)
        self.decoded: list[Any] = decoded if decoded is not None else []


class BodyDecodeError(ValueError):
    """A request or response body that cannot be decoded into its wire type."""


class HeaderFieldError(ValueError):
    """A request header field that is missing or ill-typed where the caller needs it."""


class BodyRefused(BodyDecodeError):
    """A body refused for passing a limit of its kind (:mod:`remoting.body_limits`),
    before or while it is decoded; the message names the kind, the body's length and
    the limit."""


class RegisterBodyRefused(BodyRefused):
    """A REGISTER_BROKER body refused for passing a limit no broker's body reaches; the
    gateway logs these (rate-limited) besides answering them."""
