"""The HA handshake: bytes first (sans-IO), then real HAService / HAClient objects and
real broker controllers over loopback sockets, facing peers that do not hold the secret.

What must hold: a peer that has not proven the secret reads no byte of the master's
commit log and confirms no SYNC_MASTER write; a slave appends nothing from a master
that has not proven it; legitimate slaves are served all along; a broker without a
secret replicates nothing and says why; ``haAuthEnable=false`` is the classic stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import os
import time
from pathlib import Path

import pytest

from broker_app.broker import BrokerController
from broker_app.config import BrokerConfig, BrokerRole
from broker_app.ha.auth import (
    ANSWER_BYTES,
    HELLO_BYTES,
    MASTER_LABEL,
    NONCE_BYTES,
    PROOF_BYTES,
    SLAVE_LABEL,
    TAG,
    TAG_BYTES,
    HAAuth,
    HAAuthError,
    HAKey,
    MasterHandshake,
    SlaveHandshake,
    load_key,
)
from broker_app.ha.client import HAClient
from broker_app.ha.config import HAConfig
from broker_app.ha.protocol import HAProtocolError, TransferDecoder, encode_report, encode_transfer
from broker_app.ha.service import HANDSHAKES_PENDING_MAX, HANDSHAKES_PER_ADDRESS_MAX, HAService
from broker_app.metadata import MemoryRepository
from broker_app.store.message_store import MessageInput
from localcluster.run_secrets import ha_secret
from remoting.codes import ResponseCode
from tests.broker_app.ha_support import (
    AUTH,
    FAST,
    HA_WAIT_S,
    KEY,
    OTHER_KEY,
    files,
    ha_pair,
    make_store,
    put,
    serve_fake_master,
)
from tests.broker_app.support import FakeNameServer
from tests.waiting import eventually

SERVICE_LOG = "broker_app.ha.service"
CLIENT_LOG = "broker_app.ha.client"


def handshake(master_key: HAKey, slave_key: HAKey) -> tuple[bytes, bytes, bytes]:
    """One handshake in memory: (hello, answer, proof); raises where a side refuses."""
    master, slave = MasterHandshake(master_key), SlaveHandshake(slave_key)
    hello = master.hello()
    answer = slave.answer(hello)
    proof = master.answer(answer)
    slave.check_proof(proof)
    return hello, answer, proof


# ------------------------------------------------------------------ bytes only


def test_the_same_secret_passes_with_fixed_sizes_and_fresh_nonces() -> None:
    hello, answer, proof = handshake(KEY, KEY)
    assert (len(hello), len(answer), len(proof)) == (HELLO_BYTES, ANSWER_BYTES, PROOF_BYTES)
    assert (HELLO_BYTES, ANSWER_BYTES, PROOF_BYTES) == (40, 72, 32)
    assert hello[:TAG_BYTES] == answer[:TAG_BYTES] == TAG == b"\xffRMQHA\x00\x01"
    again = handshake(KEY, KEY)
    assert again[0][TAG_BYTES:] != hello[TAG_BYTES:]  # a new master nonce per connection
    assert again[1][TAG_BYTES:] != answer[TAG_BYTES:]
    assert again[2] != proof


def test_the_proofs_are_hmac_sha256_over_label_tag_and_both_nonces() -> None:
    secret = b"0123456789abcdef0123456789abcdef"
    key = hmac.new(b"rocketmq-ha key v1", secret, hashlib.sha256).digest()
    nonce_m, nonce_s = b"m" * NONCE_BYTES, b"s" * NONCE_BYTES
    master = MasterHandshake(HAKey(secret), nonce=nonce_m)
    answer = SlaveHandshake(HAKey(secret), nonce=nonce_s).answer(master.hello())
    slave_proof = hmac.new(
        key, b"rocketmq-ha slave proof" + TAG + nonce_m + nonce_s, hashlib.sha256
    ).digest()
    assert answer == TAG + nonce_s + slave_proof
    master_proof = hmac.new(
        key, b"rocketmq-ha master proof" + TAG + nonce_m + nonce_s, hashlib.sha256
    ).digest()
    assert master.answer(answer) == master_proof
    assert (SLAVE_LABEL, MASTER_LABEL) == (b"rocketmq-ha slave proof", b"rocketmq-ha master proof")


def test_a_wrong_secret_is_refused_by_either_side() -> None:
    with pytest.raises(HAAuthError, match="slave proof does not match"):
        handshake(KEY, OTHER_KEY)
    # A master holding another key that proves it anyway: the slave refuses the proof.
    master, slave = MasterHandshake(OTHER_KEY), SlaveHandshake(KEY)
    answer = slave.answer(master.hello())
    slave_nonce = answer[TAG_BYTES : TAG_BYTES + NONCE_BYTES]
    with pytest.raises(HAAuthError, match="master proof does not match"):
        slave.check_proof(OTHER_KEY.proof(MASTER_LABEL, master.master_nonce, slave_nonce))


def test_a_recorded_answer_or_proof_opens_no_other_connection() -> None:
    _hello, answer, proof = handshake(KEY, KEY)
    with pytest.raises(HAAuthError):
        MasterHandshake(KEY).answer(answer)  # replayed to a new connection (new nonce)
    slave = SlaveHandshake(KEY)
    slave.answer(MasterHandshake(KEY).hello())
    with pytest.raises(HAAuthError):
        slave.check_proof(proof)


def test_one_sides_proof_never_passes_as_the_others() -> None:
    master, slave = MasterHandshake(KEY), SlaveHandshake(KEY)
    answer = slave.answer(master.hello())
    with pytest.raises(HAAuthError):
        slave.check_proof(answer[-PROOF_BYTES:])  # the slave's own proof reflected
    echo = b"n" * NONCE_BYTES
    with pytest.raises(HAAuthError, match="echoed"):
        MasterHandshake(KEY, nonce=echo).answer(TAG + echo + answer[-PROOF_BYTES:])
    with pytest.raises(HAAuthError, match="echoed"):
        SlaveHandshake(KEY, nonce=b"n" * NONCE_BYTES).answer(TAG + b"n" * NONCE_BYTES)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (b"", "0 bytes"),
        (TAG + os.urandom(40), "48 bytes"),  # truncated
        (b"\x42" + os.urandom(ANSWER_BYTES - 1), "no HA handshake tag"),
        (b"\x00" * ANSWER_BYTES, "classic report"),
        (TAG[:-1] + b"\x02" + os.urandom(ANSWER_BYTES - TAG_BYTES), "version 2"),
        (TAG + os.urandom(ANSWER_BYTES - TAG_BYTES), "does not match"),
        (TAG + os.urandom(ANSWER_BYTES), f"{TAG_BYTES + ANSWER_BYTES} bytes"),
    ],
    ids=["empty", "truncated", "garbage", "classic", "version", "wrong proof", "too long"],
)
def test_a_master_refuses_every_answer_but_the_right_one(answer: bytes, reason: str) -> None:
    master = MasterHandshake(KEY)
    master.hello()
    with pytest.raises(HAAuthError, match=reason):
        master.answer(answer)


@pytest.mark.parametrize(
    ("hello", "reason"),
    [
        (TAG + os.urandom(10), "18 bytes"),
        (encode_transfer(0, os.urandom(28)), "no HA handshake tag"),
        (TAG[:-1] + b"\x07" + os.urandom(NONCE_BYTES), "version 7"),
    ],
    ids=["truncated", "classic stream", "version"],
)
def test_a_slave_refuses_a_greeting_that_is_not_the_handshake(hello: bytes, reason: str) -> None:
    with pytest.raises(HAAuthError, match=reason):
        SlaveHandshake(KEY).answer(hello)
    slave = SlaveHandshake(KEY)
    with pytest.raises(HAAuthError, match="before its greeting"):
        slave.check_proof(os.urandom(PROOF_BYTES))


def test_a_classic_slave_takes_the_greeting_for_a_bad_transfer_at_once() -> None:
    # The tag's first byte makes it a negative offset: no classic decoder waits for more.
    with pytest.raises(HAProtocolError, match="bad transfer header"):
        TransferDecoder(32 * 1024).feed(MasterHandshake(KEY).hello())


def test_the_key_comes_from_a_private_file_less_its_trailing_newline(tmp_path: Path) -> None:
    secret = b"a-long-enough-shared-secret"
    plain, with_newline = tmp_path / "plain", tmp_path / "newline"
    for path, data in ((plain, secret), (with_newline, secret + b"\r\n")):
        path.write_bytes(data)
        path.chmod(0o600)
    handshake(load_key(plain), load_key(with_newline))
    with pytest.raises(HAAuthError):
        handshake(load_key(plain), HAKey(secret + b" "))
    assert "a-long" not in repr(HAAuth(load_key(plain)))
    assert "HAKey(***)" in repr(HAAuth(load_key(plain)))

    shared = tmp_path / "shared"
    shared.write_bytes(secret)
    shared.chmod(0o640)
    empty, short = tmp_path / "empty", tmp_path / "short"
    empty.write_bytes(b"\n")
    short.write_bytes(b"tooshort\n")
    for path in (empty, short):
        path.chmod(0o600)
    with pytest.raises(ValueError, match="readable by others"):
        load_key(shared)
    with pytest.raises(ValueError, match="is empty"):
        load_key(empty)
    with pytest.raises(ValueError, match="8 bytes; use at least 16"):
        load_key(short)
    with pytest.raises(ValueError, match="cannot read"):
        load_key(tmp_path / "missing")


def test_an_auth_mode_is_a_key_no_key_or_explicitly_classic() -> None:
    assert HAAuth().refuses and not HAAuth(KEY).refuses and not HAAuth.classic().refuses
    assert not HAAuth.classic().enabled
    with pytest.raises(ValueError):
        HAAuth(KEY, enabled=False)


# ------------------------------------------------------- the master's HA port


async def read_all(reader: asyncio.StreamReader, timeout_s: float = 5.0) -> bytes:
    """Everything the master sends until it closes the connection (fails if it does not).

    A master that closes with bytes of ours unread makes the kernel reset the
    connection; that ends the reading as a close does.
    """
    received = bytearray()

    async def run() -> None:
        while chunk := await reader.read(65536):
            received.extend(chunk)

    with contextlib.suppress(ConnectionResetError):
        await asyncio.wait_for(run(), timeout_s)
    return bytes(received)


async def test_a_peer_with_the_wrong_secret_reads_no_log_byte_and_confirms_no_write(
    tmp_path: Path,
) -> None:
    master = make_store(tmp_path / "m")
    put(master, 50)
    before = files(master)
    service = HAService(master, FAST, auth=AUTH)
    await service.start()
    try:
        waiting = asyncio.create_task(service.wait_for_ack(master.max_offset, 2.0))
        # Exactly an answer: the master reads all of it, so its close is a clean end of
        # stream, and what came before it is everything it sent.
        reader, writer = await asyncio.open_connection("127.0.0.1", service.port)
        hello = await reader.readexactly(HELLO_BYTES)
        writer.write(SlaveHandshake(OTHER_KEY).answer(hello))
        assert await read_all(reader) == b""  # no proof, no transfer header, no log byte
        assert reader.at_eof()
        writer.close()
        # Then an answer followed by reports of the master's end, as if it held every byte.
        reader, writer = await asyncio.open_connection("127.0.0.1", service.port)
        hello = await reader.readexactly(HELLO_BYTES)
        writer.write(SlaveHandshake(OTHER_KEY).answer(hello))
        writer.write(encode_report(0) + encode_report(master.max_offset) * 50)
        assert await read_all(reader) == b""
        writer.close()
        assert not await waiting
        assert service.push_to_slave_max_offset == 0
        assert not service.slaves() and not service.is_slave_ok(master.max_offset)
        assert service.refused_connections == 2
        assert files(master) == before
    finally:
        await service.close()


@pytest.mark.parametrize(
    "scenario", ["garbage", "truncated", "wrong tag", "classic report", "silence", "slow"]
)
async def test_a_peer_that_does_not_finish_the_handshake_is_closed_before_the_stream(
    tmp_path: Path, scenario: str, caplog: pytest.LogCaptureFixture
) -> None:
    master = make_store(tmp_path / "m")
    put(master, 20)
    before = files(master)
    service = HAService(master, FAST, auth=AUTH)
    await service.start()
    caplog.set_level(logging.WARNING, SERVICE_LOG)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", service.port)
        hello = await reader.readexactly(HELLO_BYTES)
        assert hello.startswith(TAG)
        started = time.monotonic()
        if scenario == "garbage":
            writer.write(b"\x42" + os.urandom(4095))
        elif scenario == "truncated":
            writer.write(SlaveHandshake(KEY).answer(hello)[:50])
            writer.write_eof()
        elif scenario == "wrong tag":
            writer.write(TAG[:-1] + b"\x09" + SlaveHandshake(KEY).answer(hello)[TAG_BYTES:])
        elif scenario == "classic report":
            writer.write(encode_report(0))
        elif scenario == "slow":
            answer = SlaveHandshake(KEY).answer(hello)
            for byte in answer[:30]:  # the right answer, a byte every 100 ms: too slow
                if reader.at_eof():
                    break
                writer.write(bytes([byte]))
                await asyncio.sleep(0.1)
        rest = await read_all(reader)
        elapsed = time.monotonic() - started
        writer.close()
        assert rest == b""
        if scenario in ("silence", "slow"):
            assert 0.9 <= elapsed < 3.0  # the handshake timeout (1 s), not housekeeping
        assert service.refused_connections == 1 and not service.slaves()
        assert service.push_to_slave_max_offset == 0
        assert files(master) == before
        [line] = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
        expected = {
            "garbage": "no HA handshake tag",
            "truncated": "closed in the handshake (42 of 64 bytes",
            "wrong tag": "version 9",
            "classic report": "classic report of offset 0",
            "silence": "no handshake within 1.0 s",
            "slow": "no handshake within 1.0 s",
        }[scenario]
        assert expected in line
    finally:
        await service.close()


async def test_the_slave_keeps_replicating_while_rogues_knock_and_the_log_stays_quiet(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, SERVICE_LOG)
    master, slave = make_store(tmp_path / "m"), make_store(tmp_path / "s")
    async with ha_pair(master, slave) as (service, client):

        async def rogue(index: int) -> bytes:
            # Each from an address of its own: the per-address bound is another test's.
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", service.port, local_addr=(f"127.0.2.{index + 1}", 0)
            )
            hello = await reader.readexactly(HELLO_BYTES)
            if index % 2:
                writer.write(SlaveHandshake(OTHER_KEY).answer(hello) + encode_report(0))
            else:
                writer.write(os.urandom(ANSWER_BYTES))
            rest = await read_all(reader)
            writer.close()
            return rest

        await eventually(
            lambda: bool(service.slaves()), what="a slave connected", timeout_s=HA_WAIT_S
        )
        rogues = 40
        for round_no in range(4):
            knocks = asyncio.gather(*(rogue(i) for i in range(round_no * 10, round_no * 10 + 10)))
            put(master, 100)
            service.notify_new_data()
            assert await knocks == [b""] * 10
        await eventually(
            lambda: slave.max_offset == master.max_offset,
            what="the slave caught up",
            timeout_s=HA_WAIT_S,
        )
        assert files(slave) == files(master)
        await eventually(
            lambda: service.push_to_slave_max_offset == master.max_offset,
            what="the slave's report of the master's offset",
            timeout_s=HA_WAIT_S,
        )
        assert client.connected and client.disconnects == 0
        assert len(service.slaves()) == 1
        assert service.refused_connections == rogues
        refusals = [r for r in caplog.records if "refused" in r.getMessage()]
        assert len(refusals) == 1  # one line per 10 s, the rest counted


async def test_peers_beyond_the_pending_handshake_bound_are_closed_at_once(
    tmp_path: Path,
) -> None:
    slow = HAConfig(
        heartbeat_interval_ms=100, housekeeping_interval_ms=1000, handshake_timeout_ms=30_000
    )
    service = HAService(make_store(tmp_path / "m"), slow, auth=AUTH)
    await service.start()
    silent = []
    try:
        # From as many addresses as it takes, each within its own per-address bound.
        for index in range(HANDSHAKES_PENDING_MAX):
            source = f"127.0.1.{index // HANDSHAKES_PER_ADDRESS_MAX + 1}"
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", service.port, local_addr=(source, 0)
            )
            await reader.readexactly(HELLO_BYTES)
            silent.append(writer)
        reader, writer = await asyncio.open_connection("127.0.0.1", service.port)
        assert await read_all(reader, 2.0) == b""  # not even a greeting
        writer.close()
        assert service.refused_connections == 1
        # Closing the service ends the pending handshakes too, without their timeout.
        started = time.monotonic()
        await service.close()
        assert time.monotonic() - started < 5.0
    finally:
        for writer in silent:
            writer.close()
        await service.close()


async def test_a_master_without_a_secret_refuses_every_slave_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    master, slave = make_store(tmp_path / "m"), make_store(tmp_path / "s")
    put(master, 20)
    async with ha_pair(master, slave, master_auth=HAAuth()) as (service, client):
        reader, writer = await asyncio.open_connection("127.0.0.1", service.port)
        writer.write(encode_report(0))
        assert await read_all(reader) == b""
        writer.close()
        await eventually(
            lambda: client.disconnects >= 2, what="two disconnects", timeout_s=HA_WAIT_S
        )
        assert not client.connected and slave.max_offset == 0
        assert not service.slaves() and service.push_to_slave_max_offset == 0
        assert service.refused_connections >= 3
        messages = [r.getMessage() for r in caplog.records]
        assert any("no haSecretFile: HA connections refused" in m for m in messages)
        assert any("the master closed the connection in the handshake" in m for m in messages)


async def test_a_slave_without_a_secret_does_not_connect_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, CLIENT_LOG)
    accepted = 0

    async def count(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        writer.close()

    server = await asyncio.start_server(count, "127.0.0.1", 0)
    slave = make_store(tmp_path / "s")
    client = HAClient(slave, FAST, auth=HAAuth())
    client.set_master_address(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
    client.start()
    try:
        await eventually(
            lambda: any("no haSecretFile" in r.getMessage() for r in caplog.records),
            what="the no-haSecretFile log line",
            timeout_s=HA_WAIT_S,
        )
        await asyncio.sleep(0.5)  # five reconnect delays: it still does not dial
        assert accepted == 0 and not client.connected and slave.max_offset == 0
        [line] = [r.getMessage() for r in caplog.records if r.name == CLIENT_LOG]
        assert "not following the master at 127.0.0.1:" in line
    finally:
        await client.close()
        server.close()


# ------------------------------------------------------- a slave facing impostors


@pytest.mark.parametrize("impostor", ["another secret", "classic stream", "silence"])
async def test_a_slave_appends_nothing_from_a_master_that_did_not_prove_the_secret(
    tmp_path: Path, impostor: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, CLIENT_LOG)
    honest = make_store(tmp_path / "honest")
    put(honest, 20)
    # A well-formed stream of real records: a slave that believed it would append them.
    stream = encode_transfer(0, honest.read_raw(0, 8000))
    if impostor == "another secret":
        server = await serve_fake_master(stream, key=OTHER_KEY)
    elif impostor == "classic stream":
        server = await serve_fake_master(b"", key=None, greeting=stream)
    else:
        server = await serve_fake_master(stream, key=None)  # waits for a report first
    slave = make_store(tmp_path / "s")
    client = HAClient(slave, FAST, auth=AUTH)
    client.set_master_address(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
    client.start()
    try:
        await eventually(lambda: client.disconnects >= 1, what="a disconnect", timeout_s=HA_WAIT_S)
    finally:
        await client.close()
        server.close()
    assert slave.max_offset == 0
    assert not any(any(data) for data in files(slave).values())
    expected = {
        "another secret": "master proof does not match",
        "classic stream": "master sent no HA handshake tag",
        "silence": "no HA handshake from the master within 1.0 s",
    }[impostor]
    assert any(expected in r.getMessage() for r in caplog.records)


async def test_the_same_stream_behind_the_right_secret_is_appended(tmp_path: Path) -> None:
    # The control of the test above: what the impostors sent was a stream worth appending.
    honest = make_store(tmp_path / "honest")
    put(honest, 20)
    body = honest.read_raw(0, 8000)
    server = await serve_fake_master(encode_transfer(0, body), key=KEY)
    slave = make_store(tmp_path / "s")
    client = HAClient(slave, FAST, auth=AUTH)
    client.set_master_address(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
    client.start()
    try:
        await eventually(
            lambda: slave.max_offset == len(body),
            what="the body on the slave",
            timeout_s=HA_WAIT_S,
        )
    finally:
        await client.close()
        server.close()
    assert slave.read_raw(0, len(body)) == body


# ------------------------------------------------------- haAuthEnable=false


async def test_auth_off_is_the_classic_stream_a_raw_peer_speaks(tmp_path: Path) -> None:
    master = make_store(tmp_path / "m")
    put(master, 20)
    service = HAService(master, FAST, auth=HAAuth.classic())
    await service.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", service.port)
        writer.write(encode_report(0))  # RocketMQ's slave: report first, nothing else
        decoder = TransferDecoder(FAST.transfer_batch_bytes)
        received: list[bytes] = []
        while sum(map(len, received)) < master.max_offset:
            for transfer in decoder.feed(await asyncio.wait_for(reader.read(65536), 5.0)):
                received.append(transfer.body)
        assert b"".join(received) == master.read_raw(0, master.max_offset)
        writer.write(encode_report(master.max_offset))
        await eventually(
            lambda: service.push_to_slave_max_offset == master.max_offset,
            what="the slave's report of the master's offset",
            timeout_s=HA_WAIT_S,
        )
        writer.close()
    finally:
        await service.close()


async def test_classic_slaves_and_masters_replicate_with_each_other(tmp_path: Path) -> None:
    master, slave = make_store(tmp_path / "m"), make_store(tmp_path / "s")
    put(master, 30)
    classic = HAAuth.classic()
    async with ha_pair(master, slave, master_auth=classic, slave_auth=classic):
        await eventually(
            lambda: slave.max_offset == master.max_offset,
            what="the slave caught up",
            timeout_s=HA_WAIT_S,
        )
        assert files(slave) == files(master)


async def test_a_classic_slave_and_an_authenticating_master_part_with_clear_reasons(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    master, slave = make_store(tmp_path / "m"), make_store(tmp_path / "s")
    put(master, 30)
    async with ha_pair(master, slave, slave_auth=HAAuth.classic()) as (service, _):

        def said(text: str) -> bool:
            return any(text in r.getMessage() for r in caplog.records)

        await eventually(
            lambda: said("the master asks for the HA handshake"),
            what="the handshake request in the log",
            timeout_s=HA_WAIT_S,
        )
        assert said("classic report of offset 0")
        assert slave.max_offset == 0 and service.push_to_slave_max_offset == 0


# ------------------------------------------------------- real broker controllers


def broker_config(root: Path, namesrv: str, broker_id: int, secret: Path) -> BrokerConfig:
    return BrokerConfig(
        store_dir=root / f"store-{broker_id}",
        broker_id=broker_id,
        role=BrokerRole.SLAVE if broker_id else BrokerRole.SYNC_MASTER,
        namesrv_addrs=(namesrv,),
        register_initial_delay_ms=60_000,
        slave_sync_initial_delay_ms=60_000,
        segment_bytes=64 * 1024,
        record_bytes_max=16 * 1024,
        flush_interval_ms=100,
        slave_timeout_ms=2_000,
        ha=FAST,
        ha_secret_file=secret,
    )


async def test_brokers_sharing_the_secret_replicate_and_one_with_another_gets_nothing(
    tmp_path: Path,
) -> None:
    namesrv = FakeNameServer().start()
    shared = ha_secret(tmp_path / "shared")
    stranger = ha_secret(tmp_path / "stranger")
    master = BrokerController(broker_config(tmp_path, namesrv.addr, 0, shared), MemoryRepository())
    await master.start()
    rogue = BrokerController(broker_config(tmp_path, namesrv.addr, 2, stranger), MemoryRepository())
    await rogue.start()
    try:
        service = master.replication.ha_service
        assert rogue.replication.ha_client is not None and service is not None
        await eventually(
            lambda: service.refused_connections >= 2,
            what="two refused connections",
            timeout_s=HA_WAIT_S,
        )
        # Only the rogue: no slave, so SYNC_MASTER answers SLAVE_NOT_AVAILABLE (4.x).
        lonely = await master.put_message(MessageInput("TopicA", 0, b"before"))
        assert lonely.code == ResponseCode.SLAVE_NOT_AVAILABLE
        slave = BrokerController(
            broker_config(tmp_path, namesrv.addr, 1, shared), MemoryRepository()
        )
        await slave.start()
        try:
            await eventually(
                lambda: bool(service.slaves()), what="a slave connected", timeout_s=HA_WAIT_S
            )
            outcome = await master.put_message(MessageInput("TopicA", 0, b"x" * 300))
            assert outcome.code == ResponseCode.SUCCESS
            slave_store, master_store = slave.require_store(), master.require_store()
            await eventually(
                lambda: slave_store.max_offset == master_store.max_offset,
                what="the slave caught up",
                timeout_s=HA_WAIT_S,
            )
            info = master.runtime_info()
            assert info["haConnections"] == "1" and info["haAuth"] == "authenticated"
            assert int(info["haRefusedConnections"]) >= 2
            assert slave.runtime_info()["haConnected"] == "true"
        finally:
            await slave.stop(unregister=False)
        assert rogue.store is not None and rogue.store.max_offset == 0
        assert rogue.runtime_info()["haConnected"] == "false"
    finally:
        await rogue.stop(unregister=False)
        await master.stop(unregister=False)
        namesrv.stop()
