"""HA between a master store and a slave store over real loopback sockets, in one process.

Every link here has proven the shared secret (tests/broker_app/test_ha_auth.py is about
the peers that have not); the raw peers speak the classic stream after the handshake.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from broker_app.ha.client import HAClient
from broker_app.ha.protocol import TRANSFER_HEADER_BYTES, encode_report, encode_transfer
from broker_app.ha.service import HAService
from tests.broker_app.ha_support import (
    AUTH,
    FAST,
    HA_WAIT_S,
    files,
    ha_pair,
    make_store,
    open_authenticated,
    put,
    serve_fake_master,
)
from tests.waiting import eventually


async def test_a_slave_copies_the_master_log_byte_for_byte(tmp_path: Path) -> None:
    master, slave = make_store(tmp_path / "m"), make_store(tmp_path / "s")
    async with ha_pair(master, slave) as (service, _):
        await eventually(
            lambda: bool(service.slaves()), what="a slave connected", timeout_s=HA_WAIT_S
        )
        for _ in range(5):
            put(master, 100)
            service.notify_new_data()
        await eventually(
            lambda: slave.max_offset == master.max_offset,
            what="the slave caught up",
            timeout_s=HA_WAIT_S,
        )
        assert files(slave) == files(master)
        assert len(files(master)) > 2
        message = slave.get_message("TopicA", 3, 99)
        assert message == master.get_message("TopicA", 3, 99)
        await eventually(
            lambda: service.push_to_slave_max_offset == master.max_offset,
            what="the slave's report of the master's offset",
            timeout_s=HA_WAIT_S,
        )


async def test_an_empty_slave_starts_at_the_masters_last_segment(tmp_path: Path) -> None:
    master, slave = make_store(tmp_path / "m"), make_store(tmp_path / "s")
    put(master, 600)
    async with ha_pair(master, slave):
        await eventually(
            lambda: slave.max_offset == master.max_offset,
            what="the slave caught up",
            timeout_s=HA_WAIT_S,
        )
        assert slave.min_offset == master.commit_log.last_segment_start() > 0
        last = master.commit_log.segment_paths()[-1]
        assert files(slave) == {last.name: last.read_bytes()}


async def test_the_sync_wait_ends_when_the_slave_acks_and_times_out_without_it(
    tmp_path: Path,
) -> None:
    master = make_store(tmp_path / "m")
    service = HAService(master, FAST, auth=AUTH)
    await service.start()
    put(master, 3)
    assert not service.is_slave_ok(master.max_offset)
    _reader, writer = await open_authenticated(service.port)
    try:
        writer.write(encode_report(0))
        await eventually(
            lambda: bool(service.slaves()), what="a slave connected", timeout_s=HA_WAIT_S
        )
        assert service.is_slave_ok(master.max_offset)
        assert not await service.wait_for_ack(master.max_offset, 0.2)
        waiting = asyncio.create_task(service.wait_for_ack(master.max_offset, 5.0))
        await asyncio.sleep(0.05)
        writer.write(encode_report(master.max_offset))
        assert await waiting
    finally:
        writer.close()
        await service.close()


async def test_garbage_on_the_master_ha_port_closes_the_link_and_never_touches_the_log(
    tmp_path: Path,
) -> None:
    master = make_store(tmp_path / "m")
    put(master, 50)
    before = files(master)
    service = HAService(master, FAST, auth=AUTH)
    await service.start()
    try:
        for garbage in (
            encode_report(master.max_offset + 1),  # an ack beyond the end
            encode_report(17),  # not a record boundary
            b"\xff" * 8,  # negative
        ):
            reader, writer = await open_authenticated(service.port)
            writer.write(garbage + os.urandom(64))
            assert await asyncio.wait_for(reader.read(), 5.0) == b""
            writer.close()
        assert service.push_to_slave_max_offset == 0
        assert not await service.wait_for_ack(1, 0.05)
        assert files(master) == before
    finally:
        await service.close()
    master.close()
    assert make_store(tmp_path / "m").recovery.truncated_bytes == 0


async def test_a_slave_fed_garbage_by_its_master_keeps_its_log_intact(tmp_path: Path) -> None:
    honest = make_store(tmp_path / "honest")
    put(honest, 20)
    good = honest.read_raw(0, 4000)
    good = good[: len(good) // 2]  # ends inside a record
    corrupted = bytearray(honest.read_raw(0, 8000))
    corrupted[5000] ^= 0x55
    scenarios = [
        encode_transfer(0, good) + encode_transfer(len(good), os.urandom(3000)),
        encode_transfer(0, bytes(corrupted)),
        encode_transfer(123, good),  # unaligned start
        encode_transfer(0, os.urandom(500)),
        os.urandom(TRANSFER_HEADER_BYTES + 40),
    ]
    for index, stream in enumerate(scenarios):
        slave = make_store(tmp_path / f"slave{index}")
        server = await serve_fake_master(stream)
        client = HAClient(slave, FAST, auth=AUTH)
        client.set_master_address(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
        client.start()
        try:
            await eventually(
                lambda c=client: c.disconnects >= 1, what="a disconnect", timeout_s=HA_WAIT_S
            )
        finally:
            await client.close()
            server.close()
        for name, data in files(slave).items():
            assert honest.commit_log.directory.joinpath(name).read_bytes().startswith(data)
        slave.close()
        reopened = make_store(tmp_path / f"slave{index}")
        assert reopened.recovery.truncated_bytes == 0
