"""The link between a read front (gateway/front.py) and its gateway: one connection to
the gateway's Unix socket per client, whose first frame (``FRONT_PEER_CODE``,
:mod:`gateway.private_codes`) names the client, and which renumbers the client's
opaques on the way in.

Its own module because both sides speak it: the front opens links (:class:`Link`,
:func:`peer_request`) and the gateway reads who is behind each one (:func:`parse_peer`,
:data:`FRONT_PEER` for the front's own link).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging

from gateway.private_codes import FRONT_PEER_CODE, PEER_FIELD, PEER_SUBJECT_FIELD
from remoting.codes import FLAG_ONEWAY
from remoting.command import RemotingCommand
from remoting.connection import Connection
from remoting.errors import ProtocolError
from remoting.frame import FRAME_BYTES_MAX, FrameDecoder, encode_frame

# The front's logger: its log lines kept the name they had before the link had a module.
log = logging.getLogger("gateway.front")

FRONT_PEER = ("read-front", 0)
"""The peer the front's own link (its reports) announces; no socket address is this."""


def peer_request(host: str, port: int, subject: str | None = None) -> RemotingCommand:
    """The link's first frame: who the client is (and its certificate's subject)."""
    fields = {PEER_FIELD: f"{host}:{port}"}
    if subject is not None:
        fields[PEER_SUBJECT_FIELD] = subject
    return RemotingCommand(code=FRONT_PEER_CODE, flag=FLAG_ONEWAY, ext_fields=fields)


def parse_peer(request: RemotingCommand) -> tuple[str, int, str | None] | None:
    """The (host, port, certificate subject) a :func:`peer_request` announces, None
    when malformed."""
    fields = request.ext_fields or {}
    host, sep, port = fields.get(PEER_FIELD, "").rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host, int(port), fields.get(PEER_SUBJECT_FIELD)


class LinkClosedError(ConnectionError):
    """The gateway closed the link (it is restarting or stopping)."""


class Link(asyncio.Protocol):
    """One client's connection to the gateway's Unix socket."""

    def __init__(self, client: Connection | None) -> None:
        self.client = client  # None: the front's own link (its reports)
        self._transport: asyncio.Transport | None = None
        self._decoder = FrameDecoder(FRAME_BYTES_MAX, header_bytes_max=FRAME_BYTES_MAX)
        self._waiting: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._next_opaque = 0
        self._pushes: set[asyncio.Future[None]] = set()
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        client = self.client
        host, port = FRONT_PEER if client is None else (client.peer_host, client.peer_port)
        subject = None if client is None else client.peer_subject
        transport.write(encode_frame(peer_request(host, port, subject)))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(LinkClosedError("the gateway closed the connection"))

    def data_received(self, data: bytes) -> None:
        try:
            commands = self._decoder.feed(data)
        except ProtocolError as exc:
            log.error("bad frame from the gateway: %s", exc)
            self.close()
            return
        for cmd in commands:
            if cmd.is_response:
                future = self._waiting.pop(cmd.opaque, None)
                if future is not None and not future.done():
                    future.set_result(cmd)
            else:
                # A request the gateway pushes to the client: pass it on.
                task = asyncio.ensure_future(self._push(cmd))
                self._pushes.add(task)
                task.add_done_callback(self._pushes.discard)

    async def _push(self, cmd: RemotingCommand) -> None:
        if self.client is None:
            return
        with contextlib.suppress(ConnectionError):
            await self.client.send(cmd)

    def forward(self, request: RemotingCommand) -> asyncio.Future[RemotingCommand] | None:
        """Send ``request`` (renumbered); the future of its answer, None for a one-way."""
        transport = self._transport
        if self.closed or transport is None:
            raise LinkClosedError("the gateway closed the connection")
        self._next_opaque = opaque = (self._next_opaque + 1) & 0x7FFFFFFF
        transport.write(encode_frame(dataclasses.replace(request, opaque=opaque)))
        if request.flag & FLAG_ONEWAY:
            return None
        future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._waiting[opaque] = future
        return future

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
