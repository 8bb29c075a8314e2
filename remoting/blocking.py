"""A small synchronous remoting client for CLIs, Celery tasks and Django views.

It uses a plain blocking socket and the same sans-IO codec as the asyncio
adapters, so code that has no event loop can still talk to a gateway. One
request is in flight at a time; a lock makes one instance safe to share
between threads (calls are serialised).
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import ssl
import threading
import time
from types import TracebackType

from remoting.acl import Credentials, sign
from remoting.client import (
    INVOKE_TIMEOUT_S,
    OPAQUE_MODULUS,
    RemotingConnectError,
    RemotingConnectionClosed,
    RemotingTimeoutError,
    split_addr,
)
from remoting.codes import FLAG_ONEWAY
from remoting.command import RemotingCommand
from remoting.errors import ProtocolError
from remoting.frame import FRAME_BYTES_MAX, FrameDecoder, encode_frame
from remoting.tls import ClientTls, ClientTlsChoice, resolve_client_tls

log = logging.getLogger(__name__)

RECV_CHUNK_BYTES = 64 * 1024
MIN_SOCKET_TIMEOUT_S = 0.001


class BlockingClient:
    """Blocking request/response over one lazily opened TCP connection.

    The connection opens on first use and again after it was dropped. A
    timeout closes it, so a half-sent frame or a late answer can never be
    mistaken for the next call's answer. ``tls`` as for
    :class:`~remoting.client.RemotingClient`.
    """

    def __init__(
        self,
        addr: str,
        *,
        timeout_s: float = INVOKE_TIMEOUT_S,
        frame_bytes_max: int = FRAME_BYTES_MAX,
        credentials: Credentials | None = None,
        tls: ClientTlsChoice = ClientTls.PROCESS,
    ) -> None:
        self.addr = addr
        self.ssl_context = resolve_client_tls(tls)
        self.credentials = credentials
        self.timeout_s = timeout_s
        self._host, self._port = split_addr(addr)
        self._frame_bytes_max = frame_bytes_max
        self._sock: socket.socket | None = None
        self._decoder = FrameDecoder(frame_bytes_max, header_bytes_max=frame_bytes_max)
        self._next_opaque = 0
        self._lock = threading.Lock()

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def invoke(self, request: RemotingCommand) -> RemotingCommand:
        """Send ``request`` and return the answer with the same opaque.

        Raises RemotingConnectError, RemotingTimeoutError (after ``timeout_s``
        in total) or RemotingConnectionClosed.
        """
        with self._lock:
            deadline_s = time.monotonic() + self.timeout_s
            opaque = self._take_opaque()
            sock = self._send(self._outgoing(request, opaque), deadline_s)
            return self._receive(sock, opaque, deadline_s)

    def invoke_oneway(self, request: RemotingCommand) -> None:
        """Send ``request`` with the one-way flag and return at once."""
        with self._lock:
            deadline_s = time.monotonic() + self.timeout_s
            oneway = dataclasses.replace(
                self._outgoing(request, self._take_opaque()), flag=request.flag | FLAG_ONEWAY
            )
            self._send(oneway, deadline_s)

    def _outgoing(self, request: RemotingCommand, opaque: int) -> RemotingCommand:
        """``request`` as it leaves: with this call's opaque, signed if we hold an account."""
        if self.credentials is not None:
            request = sign(request, self.credentials)
        return dataclasses.replace(request, opaque=opaque)

    def close(self) -> None:
        """Close the connection (a later call opens a new one)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._decoder = FrameDecoder(self._frame_bytes_max, header_bytes_max=self._frame_bytes_max)

    def _take_opaque(self) -> int:
        opaque = self._next_opaque
        self._next_opaque = (opaque + 1) % OPAQUE_MODULUS
        return opaque

    def _connect(self, deadline_s: float) -> socket.socket:
        if self._sock is not None and not _peer_closed(self._sock):
            return self._sock
        # Never opened, or the server dropped it while we were idle (its idle
        # timeout is 120 s): open a fresh one instead of failing this call.
        self.close()
        try:
            sock = socket.create_connection(
                (self._host, self._port), timeout=_remaining_s(deadline_s)
            )
        except OSError as exc:
            raise RemotingConnectError(f"cannot connect to {self.addr}: {exc!r}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.ssl_context is not None:
            try:
                sock.settimeout(_remaining_s(deadline_s))
                sock = self.ssl_context.wrap_socket(sock, server_hostname=self._host)
            except OSError as exc:  # ssl.SSLError and timeouts included
                sock.close()
                raise RemotingConnectError(f"TLS with {self.addr} failed: {exc!r}") from exc
        self._sock = sock
        return sock

    def _send(self, cmd: RemotingCommand, deadline_s: float) -> socket.socket:
        frame = encode_frame(cmd)
        sock = self._connect(deadline_s)
        try:
            sock.settimeout(_remaining_s(deadline_s))
            sock.sendall(frame)
        except TimeoutError as exc:
            self.close()
            raise RemotingTimeoutError(f"sending to {self.addr} timed out") from exc
        except OSError as exc:
            self.close()
            raise RemotingConnectionClosed(f"connection to {self.addr} failed: {exc!r}") from exc
        return sock

    def _receive(self, sock: socket.socket, opaque: int, deadline_s: float) -> RemotingCommand:
        while True:
            try:
                sock.settimeout(_remaining_s(deadline_s))
                data = sock.recv(RECV_CHUNK_BYTES)
            except TimeoutError as exc:
                self.close()
                raise RemotingTimeoutError(
                    f"no answer from {self.addr} to opaque {opaque} in {self.timeout_s} s"
                ) from exc
            except OSError as exc:
                self.close()
                raise RemotingConnectionClosed(f"{self.addr} failed: {exc!r}") from exc
            if not data:
                self.close()
                raise RemotingConnectionClosed(f"{self.addr} closed the connection")
            try:
                commands = self._decoder.feed(data)
            except ProtocolError as exc:
                self.close()
                raise RemotingConnectionClosed(f"bad frame from {self.addr}: {exc}") from exc
            for cmd in commands:
                if cmd.is_response and cmd.opaque == opaque:
                    return cmd
                # A pushed request or a stale answer: a blocking client serves neither.
                log.debug("%s: skipping frame code=%d opaque=%d", self.addr, cmd.code, cmd.opaque)


def _remaining_s(deadline_s: float) -> float:
    # Never zero: a zero socket timeout means non-blocking mode, which would
    # raise BlockingIOError instead of the timeout the caller handles.
    return max(deadline_s - time.monotonic(), MIN_SOCKET_TIMEOUT_S)


def _peer_closed(sock: socket.socket) -> bool:
    """True when the peer has closed ``sock`` (a zero-byte peek means EOF)."""
    # Non-blocking for the peek: with a timeout set, Python would first wait
    # for the socket to become readable. The next send sets a timeout again.
    sock.settimeout(0.0)
    try:
        if isinstance(sock, ssl.SSLSocket):
            # TLS records cannot be peeked. All a server sends an idle client is a
            # close_notify (read as b"") or a session ticket (consumed, no data).
            return sock.recv(RECV_CHUNK_BYTES) == b""
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return False
    except OSError:
        return True
