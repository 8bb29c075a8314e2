"""Slave side of HA: follow a master's commit log (RocketMQ's ``HAClient``).

The client connects to the master's HA address, reports its max offset (on
connect, after every append that advanced it, and every heartbeat interval),
and appends what the master streams through a :class:`ReplicaAppender`, which
only ever commits whole, checked records at the exact offset they belong to.
Any protocol violation, offset mismatch or silence longer than the
housekeeping interval closes the connection; the client then waits
``reconnect_delay_ms`` and starts over from its committed end.

Before its first report the client runs the HA handshake
(:mod:`broker_app.ha.auth`) within ``handshake_timeout_ms``: a peer that does
not prove the secret is closed before one byte of its stream is read, so a
stranger at the master's address cannot feed the store. Without a secret (and
without ``haAuthEnable=false``) the client does not connect at all and says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from broker_app.ha.auth import HELLO_BYTES, PROOF_BYTES, TAG, HAAuth, HAAuthError, SlaveHandshake
from broker_app.ha.config import READ_CHUNK_BYTES, HAConfig
from broker_app.ha.protocol import HAProtocolError, TransferDecoder, encode_report
from broker_app.store.commitlog import CommitLogError
from broker_app.store.message_store import MessageStore, ReplicaAppender, ReplicaError

log = logging.getLogger(__name__)

ProgressCallback = Callable[[int], None]


def split_host_port(address: str) -> tuple[str, int]:
    """``"host:port"`` to its parts; ValueError for anything else."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"not a host:port address: {address!r}")
    return host, int(port)


class HAClient:
    """Keeps a slave's store in step with the master at :attr:`master_address`."""

    def __init__(
        self,
        store: MessageStore,
        config: HAConfig,
        *,
        auth: HAAuth,
        on_progress: ProgressCallback | None = None,
    ) -> None:
        config.validate()
        self.store = store
        self.config = config
        self.auth = auth
        self.master_address: str | None = None
        self.connected = False
        self.local_address: str | None = None
        """This end of the HA connection (host:port) while it is up: what the master
        sees as its peer, reported to the NameServers (:mod:`remoting.ha_report`)."""
        self.disconnects = 0
        self._on_progress = on_progress
        self._appender = ReplicaAppender(store, batch_bytes_max=config.transfer_batch_bytes)
        self._address_changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._last_report_s = 0.0
        self._reported_offset = -1

    def set_master_address(self, address: str | None) -> None:
        """Follow ``address`` (the haServerAddr the NameServer returned); None stops following."""
        if address == self.master_address:
            return
        log.info("HA client: master address %s -> %s", self.master_address, address)
        self.master_address = address
        self._address_changed.set()

    def start(self) -> None:
        """Start the background follow loop."""
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def close(self) -> None:
        """Stop following and close the connection."""
        # The flag ends the loop even when the cancellation lands in _follow's
        # clean-up, which must swallow its children's CancelledError.
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while not self._closed:
            self._address_changed.clear()
            address = self.master_address
            if address is None:
                await self._address_changed.wait()
                continue
            if self.auth.refuses:
                log.warning(
                    "HA client: no haSecretFile: not following the master at %s (give "
                    "master and slaves the same haSecretFile, or set haAuthEnable=false "
                    "on all of them for the classic unauthenticated stream)",
                    address,
                )
                await self._address_changed.wait()
                continue
            try:
                await self._follow(address)
            except (OSError, TimeoutError, HAProtocolError, ReplicaError, CommitLogError) as exc:
                log.warning("HA client: connection to %s ended: %s", address, exc)
            finally:
                self.connected = False
                self.local_address = None
                self._appender.reset()
            if self._address_changed.is_set():
                continue
            self.disconnects += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._address_changed.wait(), self.config.reconnect_delay_ms / 1000
                )

    async def _follow(self, address: str) -> None:
        host, port = split_host_port(address)
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port), self.config.connect_timeout_ms / 1000
        )
        try:
            await self._authenticate(reader, writer)
        except BaseException:
            writer.close()
            raise
        self.connected = True
        local = writer.get_extra_info("sockname")
        self.local_address = f"{local[0]}:{local[1]}" if local else None
        heartbeat = asyncio.create_task(self._heartbeat_loop(writer))
        changed = asyncio.create_task(self._address_changed.wait())
        receive = asyncio.create_task(self._receive_loop(reader, writer))
        try:
            await self._report(writer, force=True)
            done, _ = await asyncio.wait(
                {heartbeat, changed, receive}, return_when=asyncio.FIRST_COMPLETED
            )
            for task in done:
                if task is not changed:
                    task.result()
        finally:
            for task in (heartbeat, changed, receive):
                task.cancel()
            for task in (heartbeat, changed, receive):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _authenticate(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """The slave's side of the handshake; HAAuthError unless the master proved the secret."""
        key = self.auth.key
        if not self.auth.enabled or key is None:
            return
        timeout_s = self.config.handshake_timeout_ms / 1000
        handshake = SlaveHandshake(key)

        async def run() -> None:
            writer.write(handshake.answer(await reader.readexactly(HELLO_BYTES)))
            await writer.drain()
            handshake.check_proof(await reader.readexactly(PROOF_BYTES))

        try:
            await asyncio.wait_for(run(), timeout_s)
        except TimeoutError as exc:
            raise HAAuthError(
                f"no HA handshake from the master within {timeout_s:.1f} s (does it run with "
                "haAuthEnable=false?)"
            ) from exc
        except asyncio.IncompleteReadError as exc:
            raise HAAuthError(
                f"the master closed the connection in the handshake ({len(exc.partial)} of "
                f"{exc.expected} bytes of a step; see the master's log: another haSecretFile, "
                "or none?)"
            ) from exc

    async def _receive_loop(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        decoder = TransferDecoder(self.config.transfer_batch_bytes)
        housekeeping_s = self.config.housekeeping_interval_ms / 1000
        first = True
        while True:
            try:
                data = await asyncio.wait_for(reader.read(READ_CHUNK_BYTES), housekeeping_s)
            except TimeoutError as exc:
                raise TimeoutError(f"master silent for {housekeeping_s:.1f} s") from exc
            if not data:
                raise ConnectionResetError("master closed the HA connection")
            if first and not self.auth.enabled and data.startswith(TAG):
                raise HAAuthError(
                    "the master asks for the HA handshake: give this slave the master's "
                    "haSecretFile (haAuthEnable is false here)"
                )
            first = False
            for transfer in decoder.feed(data):
                self._appender.check_offset(transfer.offset)
                if transfer.body:
                    self._appender.feed(transfer.offset, transfer.body)
            await self._report(writer, force=False)

    async def _heartbeat_loop(self, writer: asyncio.StreamWriter) -> None:
        interval_s = self.config.heartbeat_interval_ms / 1000
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval_s / 2)
            if loop.time() - self._last_report_s >= interval_s:
                await self._report(writer, force=True)

    async def _report(self, writer: asyncio.StreamWriter, *, force: bool) -> None:
        offset = self.store.max_offset
        if not force and offset == self._reported_offset:
            return
        writer.write(encode_report(offset))
        await writer.drain()
        self._reported_offset = offset
        self._last_report_s = asyncio.get_running_loop().time()
        if self._on_progress is not None:
            self._on_progress(offset)
