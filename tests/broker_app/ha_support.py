"""Stores, keys and hand-driven HA peers shared by the in-process HA tests.

The peers speak the wire with the project's sans-IO codecs over real loopback
sockets: :func:`open_authenticated` is a slave that proves the secret and then
sends whatever a test wants; :func:`serve_fake_master` is a master that proves
a secret (the right one or not) and then streams whatever a test wants.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

from broker_app.ha.auth import (
    ANSWER_BYTES,
    HELLO_BYTES,
    MASTER_LABEL,
    NONCE_BYTES,
    PROOF_BYTES,
    TAG_BYTES,
    HAAuth,
    HAKey,
    MasterHandshake,
    SlaveHandshake,
)
from broker_app.ha.client import HAClient
from broker_app.ha.config import HAConfig
from broker_app.ha.service import HAService
from broker_app.store.message_store import MessageInput, MessageStore, StoreConfig

SEGMENT_BYTES = 64 * 1024
FAST = HAConfig(
    heartbeat_interval_ms=100,
    housekeeping_interval_ms=1000,
    reconnect_delay_ms=100,
    handshake_timeout_ms=1000,
)
KEY = HAKey(secrets.token_bytes(32))
AUTH = HAAuth(KEY)
OTHER_KEY = HAKey(secrets.token_bytes(32))

HA_WAIT_S = 10.0
"""How long an HA test waits for the pair to get somewhere."""


def make_store(root: Path) -> MessageStore:
    return MessageStore(StoreConfig(root, segment_bytes=SEGMENT_BYTES, record_bytes_max=16 * 1024))


def put(store: MessageStore, count: int, size: int = 300) -> None:
    for index in range(count):
        store.put_message(MessageInput("TopicA", index % 4, os.urandom(size)), index)


def files(store: MessageStore) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in store.commit_log.segment_paths()}


@contextlib.asynccontextmanager
async def ha_pair(
    master: MessageStore,
    slave: MessageStore,
    *,
    master_auth: HAAuth = AUTH,
    slave_auth: HAAuth = AUTH,
) -> AsyncIterator[tuple[HAService, HAClient]]:
    """A master's HA service on a free loopback port and a slave following it, both
    running (with :data:`FAST` intervals); both closed on the way out."""
    service = HAService(master, FAST, auth=master_auth)
    await service.start()
    client = HAClient(slave, FAST, auth=slave_auth)
    client.set_master_address(f"127.0.0.1:{service.port}")
    client.start()
    try:
        yield service, client
    finally:
        await client.close()
        await service.close()


async def open_authenticated(
    port: int, key: HAKey = KEY
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the HA port at ``port`` that has proven ``key`` (the master's proof
    checked), ready for the classic stream."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    handshake = SlaveHandshake(key)
    writer.write(handshake.answer(await reader.readexactly(HELLO_BYTES)))
    handshake.check_proof(await asyncio.wait_for(reader.readexactly(PROOF_BYTES), 5.0))
    return reader, writer


async def serve_fake_master(
    stream: bytes, *, key: HAKey | None = KEY, greeting: bytes | None = None
) -> asyncio.Server:
    """A master that runs the handshake with ``key`` (or sends ``greeting`` instead, or
    nothing when both are None), then sends ``stream`` whatever the slave answered."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if key is not None:
                handshake = MasterHandshake(key)
                writer.write(handshake.hello())
                answer = await reader.readexactly(ANSWER_BYTES)
                # Whether or not the slave's proof matched its key, this master proves its
                # own key and streams: a master with another secret, or an impostor.
                slave_nonce = answer[TAG_BYTES : TAG_BYTES + NONCE_BYTES]
                writer.write(key.proof(MASTER_LABEL, handshake.master_nonce, slave_nonce))
            elif greeting is not None:
                writer.write(greeting)
            else:
                await reader.readexactly(8)
            writer.write(stream)
            await writer.drain()
            await asyncio.sleep(2)
        except (asyncio.IncompleteReadError, ConnectionError):
            # The slave under test hung up first: that is what the tests expect of it.
            return
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)
