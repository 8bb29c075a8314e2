"""Master side of HA: accept slaves, stream the commit log, track their acks.

Plays RocketMQ 4.x ``HAService`` + ``HAConnection`` (read and write services)
+ ``GroupTransferService`` on one asyncio loop:

* each slave connection has a reader (acks, housekeeping timeout) and a writer
  (transfers from the slave's requested offset, heartbeats when idle);
* :meth:`HAService.wait_for_ack` is what a SYNC_MASTER awaits before answering;
* the highest ack of any slave is ``push_to_slave_max_offset``.

Before any of that, a peer must prove the HA secret (:mod:`broker_app.ha.auth`)
within ``handshake_timeout_ms``: until it has, it is not a slave (it reads no
byte of the commit log, its reports are not read, it is not counted), and a
failure closes its connection with a warning logged at most once every
:data:`REFUSAL_LOG_PERIOD_S` (the rest are counted). Without a secret (and
without ``haAuthEnable=false``) the port is bound as usual but every peer is
refused that way. At most :data:`HANDSHAKES_PENDING_MAX` peers may be in the
handshake at once, and at most :data:`HANDSHAKES_PER_ADDRESS_MAX` of them from one
remote address (for IPv6, one /64); more are closed at once, so silent peers cannot pile up, and one
address cannot take every slot from the real slaves.

A slave's reports are checked before they are believed: an ack beyond the
master's own end, or a first request that is not a record boundary, closes
the connection, so a garbage peer can neither confirm a SYNC write nor make
the master stream from the middle of a record.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import ipaddress
import itertools
import logging
import time
from collections import Counter
from dataclasses import dataclass

from broker_app.ha.auth import (
    ANSWER_BYTES,
    TAG_BYTES,
    HAAuth,
    HAAuthError,
    HAKey,
    MasterHandshake,
    check_tag,
)
from broker_app.ha.config import READ_CHUNK_BYTES, HAConfig
from broker_app.ha.protocol import HAProtocolError, ReportDecoder, encode_transfer
from broker_app.store.message_store import MessageStore
from remoting.limits import RefusalLog

log = logging.getLogger(__name__)

# Each waiter belongs to one in-flight SEND_MESSAGE, which the remoting server
# already bounds per connection; this caps the sum across connections.
ACK_WAITERS_MAX = 65536
HANDSHAKES_PENDING_MAX = 64
"""Peers that may be in the handshake at once (each for at most the handshake timeout)."""
HANDSHAKES_PER_ADDRESS_MAX = 4
"""Of those, from one remote address: a slave holds one connection and reconnects once a
second, so a few cover a host running several slaves, and it takes 16 addresses to fill
every slot."""
IPV6_PREFIX_BITS = 64
"""IPv6 peers count per /64: a single host is commonly given a whole one."""
REFUSAL_LOG_PERIOD_S = 10.0
NO_SECRET = "no haSecretFile: HA connections refused"


@dataclass(frozen=True, slots=True)
class SlaveInfo:
    """What the master knows of one connected slave."""

    address: str
    ack_offset: int
    request_offset: int


class _AckWaiters:
    """Futures waiting for the slave ack to reach an offset (a min-heap by offset)."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, offset: int) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (offset, next(self._seq), future))
        return future

    def release_up_to(self, ack_offset: int) -> None:
        while self._heap and (self._heap[0][0] <= ack_offset or self._heap[0][2].done()):
            _, _, future = heapq.heappop(self._heap)
            if not future.done():
                future.set_result(None)

    def cancel_all(self) -> None:
        for _, _, future in self._heap:
            future.cancel()
        self._heap.clear()


class HAService:
    """Listens on the HA port of a master and serves every slave that connects."""

    def __init__(
        self,
        store: MessageStore,
        config: HAConfig,
        *,
        auth: HAAuth,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        config.validate()
        self.store = store
        self.config = config
        self.auth = auth
        self.host = host
        self._requested_port = port
        self._server: asyncio.Server | None = None
        self._connections: set[_HAConnection] = set()
        self._handshaking: set[asyncio.StreamWriter] = set()
        # Pending handshakes by remote host; an address is dropped when it reaches 0,
        # so the map holds at most HANDSHAKES_PENDING_MAX keys.
        self._handshaking_by_host: Counter[str] = Counter()
        # A peer reconnecting in a loop cannot flood the log: one line per period, the
        # rest counted (and said in the next line).
        self._refusal_log = RefusalLog(1, REFUSAL_LOG_PERIOD_S, log)
        self.refused_connections = 0
        """Peers closed before the stream: no secret, a failed handshake, too many pending."""
        self._waiters = _AckWaiters()
        self.push_to_slave_max_offset = 0

    @property
    def port(self) -> int:
        """The bound HA port."""
        if self._server is None or not self._server.sockets:
            return self._requested_port
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        """Bind the HA port and accept slaves."""
        self._server = await asyncio.start_server(self._accept, self.host, self._requested_port)
        log.info(
            "HA service listening on %s:%d, slaves %s", self.host, self.port, self.auth.describe()
        )
        if self.auth.refuses:
            log.warning(
                "HA service on %s:%d: %s (give master and slaves the same "
                "haSecretFile, or set haAuthEnable=false on all of them for the "
                "classic unauthenticated stream)",
                self.host,
                self.port,
                NO_SECRET,
            )
        elif not self.auth.enabled:
            log.warning(
                "HA service on %s:%d: haAuthEnable=false: any peer that reaches "
                "this port reads the commit log",
                self.host,
                self.port,
            )

    async def close(self) -> None:
        """Stop accepting, close every slave connection and fail the waiters."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._handshaking):
            writer.close()
        for conn in list(self._connections):
            await conn.close()
        self._waiters.cancel_all()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    def slaves(self) -> list[SlaveInfo]:
        """The connected slaves that have reported at least once."""
        return [conn.info() for conn in self._connections if conn.ack_offset >= 0]

    def notify_new_data(self) -> None:
        """Wake every connection's writer: the commit log grew."""
        for conn in self._connections:
            conn.wakeup.set()

    def is_slave_ok(self, master_put_where: int) -> bool:
        """4.x ``HAService.isSlaveOK``: a slave is connected and not too far behind."""
        if not self.slaves():
            return False
        behind = master_put_where - self.push_to_slave_max_offset
        return behind < self.config.slave_fallbehind_max_bytes

    async def wait_for_ack(self, offset: int, timeout_s: float) -> bool:
        """Wait until some slave acked ``offset``; False after ``timeout_s``."""
        if self.push_to_slave_max_offset >= offset:
            return True
        if len(self._waiters) >= ACK_WAITERS_MAX:
            return False
        future = self._waiters.add(offset)
        try:
            await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            return False
        return True

    def _on_ack(self, offset: int) -> None:
        if offset > self.push_to_slave_max_offset:
            self.push_to_slave_max_offset = offset
        self._waiters.release_up_to(self.push_to_slave_max_offset)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not await self._admit(reader, writer):
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            return
        conn = _HAConnection(self, reader, writer)
        self._connections.add(conn)
        log.info("HA slave connected from %s", conn.address)
        try:
            await conn.serve()
        finally:
            self._connections.discard(conn)
            log.info("HA slave %s disconnected", conn.address)

    async def _admit(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """True once the peer proved the secret (or authentication is off)."""
        address = _address(writer)
        if not self.auth.enabled:
            return True
        if self.auth.key is None:
            self._refuse(address, NO_SECRET)
            return False
        host = _host(writer)
        busy = self._busy_reason(host)
        if busy is not None:
            self._refuse(address, busy)
            return False
        timeout_s = self.config.handshake_timeout_ms / 1000
        self._handshaking.add(writer)
        self._handshaking_by_host[host] += 1
        try:
            await asyncio.wait_for(_master_handshake(self.auth.key, reader, writer), timeout_s)
        except TimeoutError:
            reason = f"no handshake within {timeout_s:.1f} s"
        except asyncio.IncompleteReadError as exc:
            reason = (
                f"closed in the handshake ({len(exc.partial)} of {exc.expected} bytes of a step)"
            )
        except HAAuthError as exc:
            reason = f"handshake failed: {exc}"
        except OSError as exc:
            reason = f"handshake failed: {exc}"
        else:
            return True
        finally:
            self._handshaking.discard(writer)
            self._handshaking_by_host[host] -= 1
            if self._handshaking_by_host[host] <= 0:
                del self._handshaking_by_host[host]
        self._refuse(address, reason)
        return False

    def _busy_reason(self, host: str) -> str | None:
        """Why a new peer from ``host`` gets no handshake slot, or None when it gets one."""
        if len(self._handshaking) >= HANDSHAKES_PENDING_MAX:
            return f"{HANDSHAKES_PENDING_MAX} peers already in the handshake"
        if self._handshaking_by_host[host] >= HANDSHAKES_PER_ADDRESS_MAX:
            return f"{HANDSHAKES_PER_ADDRESS_MAX} peers of {host} already in the handshake"
        return None

    def _refuse(self, address: str, reason: str) -> None:
        self.refused_connections += 1
        self._refusal_log.warning(
            time.monotonic(), "HA peer %s refused: %s; closing", address, reason
        )


async def _master_handshake(
    key: HAKey, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Greet, read the slave's answer (its tag first, to fail fast on a classic slave),
    check it and send the master's proof. Raises on anything else."""
    handshake = MasterHandshake(key)
    writer.write(handshake.hello())
    await writer.drain()
    head = await reader.readexactly(TAG_BYTES)
    check_tag(head, peer="slave")
    rest = await reader.readexactly(ANSWER_BYTES - TAG_BYTES)
    writer.write(handshake.answer(head + rest))
    await writer.drain()


def _host(writer: asyncio.StreamWriter) -> str:
    """The remote address a handshake slot counts against: the host without its port,
    which changes with every connection, and for IPv6 its /64, which one machine
    usually holds whole."""
    peer = writer.get_extra_info("peername")
    if not peer:
        return "?"
    try:
        address = ipaddress.ip_address(peer[0])
    except ValueError:
        return str(peer[0])
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, IPV6_PREFIX_BITS), strict=False))
    return str(address)


def _address(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if peer else "?"


class _HAConnection:
    """One slave: a reader of its acks and a writer of the commit log."""

    def __init__(
        self, service: HAService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        self.address = _address(writer)
        self.wakeup = asyncio.Event()
        self.first_report = asyncio.Event()
        self.request_offset = -1
        self.ack_offset = -1
        self._decoder = ReportDecoder()
        self._tasks: list[asyncio.Task[None]] = []

    def info(self) -> SlaveInfo:
        """A snapshot for status pages."""
        return SlaveInfo(self.address, self.ack_offset, self.request_offset)

    async def serve(self) -> None:
        """Run reader and writer until either stops, then close the socket."""
        self._tasks = [
            asyncio.create_task(self._read_loop()),
            asyncio.create_task(self._write_loop()),
        ]
        try:
            await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await self.close()

    async def close(self) -> None:
        """Stop both loops and close the socket."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()

    async def _read_loop(self) -> None:
        housekeeping_s = self.service.config.housekeeping_interval_ms / 1000
        try:
            while True:
                data = await asyncio.wait_for(self.reader.read(READ_CHUNK_BYTES), housekeeping_s)
                if not data:
                    return
                offset = self._decoder.feed(data)
                if offset is not None:
                    self._accept_report(offset)
        except TimeoutError:
            log.warning("HA slave %s silent for %.1f s; closing", self.address, housekeeping_s)
        except (HAProtocolError, ConnectionError) as exc:
            log.warning("HA slave %s: %s; closing", self.address, exc)

    def _accept_report(self, offset: int) -> None:
        store = self.service.store
        if offset > store.max_offset:
            raise HAProtocolError(f"ack {offset} beyond the master's end {store.max_offset}")
        if self.request_offset < 0:
            if offset != 0 and not store.is_record_boundary(offset):
                raise HAProtocolError(f"slave requests offset {offset}, not a record boundary")
            self.request_offset = offset
            self.first_report.set()
        self.ack_offset = offset
        self.service._on_ack(offset)

    async def _write_loop(self) -> None:
        await self.first_report.wait()
        store = self.service.store
        config = self.service.config
        heartbeat_s = config.heartbeat_interval_ms / 1000
        next_offset = self.request_offset or store.commit_log.last_segment_start()
        loop = asyncio.get_running_loop()
        last_write_s = loop.time()
        try:
            while True:
                self.wakeup.clear()
                body = store.read_raw(next_offset, config.transfer_batch_bytes)
                if body:
                    self.writer.write(encode_transfer(next_offset, body))
                    await self.writer.drain()
                    next_offset += len(body)
                    last_write_s = loop.time()
                    continue
                if loop.time() - last_write_s >= heartbeat_s:
                    self.writer.write(encode_transfer(next_offset, b""))
                    await self.writer.drain()
                    last_write_s = loop.time()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wakeup.wait(), heartbeat_s)
        except ConnectionError as exc:
            log.warning("HA slave %s: write failed: %s", self.address, exc)
