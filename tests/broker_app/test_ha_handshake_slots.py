"""The HA port's handshake slots are bounded per remote address as well as in total.

A peer that connects and says nothing holds a slot for the whole handshake timeout.
Before the per-address bound, one address opening 64 silent connections took every
slot, and the real slave was refused until they timed out. Real ``HAService`` and
``HAClient`` objects over loopback sockets; the rogue connects from 127.0.0.2 (on
Linux all of 127/8 is loopback), the slave from 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from broker_app.ha.auth import HELLO_BYTES
from broker_app.ha.client import HAClient
from broker_app.ha.config import HAConfig
from broker_app.ha.service import HANDSHAKES_PENDING_MAX, HANDSHAKES_PER_ADDRESS_MAX, HAService
from tests.broker_app.ha_support import AUTH, HA_WAIT_S, files, make_store, put
from tests.waiting import eventually

ROGUE_ADDRESS = "127.0.0.2"
# Silent peers keep their slots for the whole test unless the bound closes them.
PATIENT = HAConfig(
    heartbeat_interval_ms=100,
    housekeeping_interval_ms=1000,
    reconnect_delay_ms=100,
    handshake_timeout_ms=60_000,
)
GREETING_WAIT_S = 2.0
CATCH_UP_S = 5.0


async def greeting(reader: asyncio.StreamReader) -> bytes:
    """What the master sends a silent peer: its 40-byte greeting, or nothing (closed)."""
    with contextlib.suppress(asyncio.IncompleteReadError, ConnectionResetError):
        return await asyncio.wait_for(reader.readexactly(HELLO_BYTES), GREETING_WAIT_S)
    return b""


async def test_one_address_cannot_take_the_handshake_slots_from_the_real_slave(
    tmp_path: Path,
) -> None:
    master, slave = make_store(tmp_path / "m"), make_store(tmp_path / "s")
    put(master, 100)  # one segment: a new slave starts at the master's last one
    service = HAService(master, PATIENT, auth=AUTH)
    await service.start()
    client = HAClient(slave, PATIENT, auth=AUTH)
    rogues: list[asyncio.StreamWriter] = []
    try:
        greetings = []
        for _ in range(HANDSHAKES_PENDING_MAX + 8):
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", service.port, local_addr=(ROGUE_ADDRESS, 0)
            )
            rogues.append(writer)
            greetings.append(await greeting(reader))
        admitted = [g for g in greetings if g]
        assert len(admitted) == HANDSHAKES_PER_ADDRESS_MAX
        assert service.refused_connections == len(greetings) - HANDSHAKES_PER_ADDRESS_MAX

        client.set_master_address(f"127.0.0.1:{service.port}")
        client.start()
        # While the rogue's slots are still held, the slave gets one and catches up.
        await eventually(
            lambda: slave.max_offset == master.max_offset,
            what="the slave caught up",
            timeout_s=CATCH_UP_S,
        )
        assert files(slave) == files(master)
        assert len(service.slaves()) == 1
    finally:
        for writer in rogues:
            writer.close()
        await client.close()
        await service.close()


async def test_a_slot_comes_back_to_an_address_when_its_handshake_ends(tmp_path: Path) -> None:
    service = HAService(make_store(tmp_path / "m"), PATIENT, auth=AUTH)
    await service.start()
    held: list[asyncio.StreamWriter] = []
    try:
        for _ in range(HANDSHAKES_PER_ADDRESS_MAX):
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", service.port, local_addr=(ROGUE_ADDRESS, 0)
            )
            assert await greeting(reader)
            held.append(writer)
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", service.port, local_addr=(ROGUE_ADDRESS, 0)
        )
        assert await greeting(reader) == b""
        writer.close()
        held.pop().close()  # the master sees the close and frees the slot
        await eventually(
            lambda: service.refused_connections == 2,
            what="two refused connections",
            timeout_s=HA_WAIT_S,
        )
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", service.port, local_addr=(ROGUE_ADDRESS, 0)
        )
        assert await greeting(reader)
        held.append(writer)
    finally:
        for writer in held:
            writer.close()
        await service.close()
