"""Raft failover on the broker side, in one process over real loopback sockets.

broker-a's master and slave run as two ``BrokerController`` objects registered
with a recording NameServer. The NameServers' election reaches the slave as a
real NOTIFY_MIN_BROKER_ID_CHANGE frame; a returning old master is told to follow.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker_app.broker import BrokerController
from broker_app.config import BrokerConfig, BrokerRole
from broker_app.ha.config import HAConfig
from broker_app.metadata import MemoryRepository
from broker_app.registration import first_assignment, parse_register_response
from broker_app.store.message_store import MessageInput
from localcluster.run_secrets import ha_secret
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.broker_app.support import FakeNameServer
from tests.waiting import eventually

FAST_HA = HAConfig(heartbeat_interval_ms=100, housekeeping_interval_ms=2000, reconnect_delay_ms=100)
TOPIC = "TopicTest"
MESSAGES = 20


def broker_config(root: Path, namesrv: str, *, broker_id: int) -> BrokerConfig:
    """A fast, failover-enabled member of broker-a."""
    return BrokerConfig(
        store_dir=root / f"store-{broker_id}",
        broker_id=broker_id,
        role=BrokerRole.SLAVE if broker_id else BrokerRole.ASYNC_MASTER,
        namesrv_addrs=(namesrv,),
        register_initial_delay_ms=60_000,
        slave_sync_initial_delay_ms=100,
        slave_sync_interval_ms=200,
        segment_bytes=64 * 1024,
        record_bytes_max=16 * 1024,
        flush_interval_ms=100,
        ha=FAST_HA,
        ha_secret_file=ha_secret(root),
        raft_failover=True,
        failover_master_role=BrokerRole.SYNC_MASTER,
    )


WAIT_S = 10.0
"""How long a test waits for the brokers to get somewhere."""


@pytest.fixture
async def pair(
    tmp_path: Path,
) -> AsyncIterator[tuple[BrokerController, BrokerController, FakeNameServer]]:
    namesrv = FakeNameServer().start()
    master = BrokerController(
        broker_config(tmp_path, namesrv.addr, broker_id=0), MemoryRepository()
    )
    await master.start()
    slave = BrokerController(broker_config(tmp_path, namesrv.addr, broker_id=1), MemoryRepository())
    await slave.start()
    try:
        yield master, slave, namesrv
    finally:
        for broker in (slave, master):
            await broker.stop(unregister=False)
        namesrv.stop()


async def fill(master: BrokerController, slave: BrokerController) -> None:
    """Store messages on the master and wait until the slave holds all of them."""
    for _ in range(MESSAGES):
        await master.put_message(MessageInput(TOPIC, 0, b"x" * 200))
    assert master.store is not None and slave.store is not None
    await eventually(
        lambda: (
            slave.store is not None
            and master.store is not None
            and slave.store.max_offset == master.store.max_offset
        ),
        what="the slave caught up",
        timeout_s=WAIT_S,
    )


async def notify_elected(slave: BrokerController, old_master: BrokerController) -> None:
    """The NameServer leader's NOTIFY_MIN_BROKER_ID_CHANGE naming the slave as id 0."""
    request = RemotingCommand.request(
        RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE,
        {
            "minBrokerId": "0",
            "minBrokerAddr": slave.broker_addr,
            "offlineBrokerAddr": old_master.broker_addr,
            "haBrokerAddr": slave.replication.ha_addr,
        },
    )
    client = RemotingClient()
    try:
        await client.invoke_oneway(slave.broker_addr, request)
    finally:
        await client.close()


async def test_the_elected_slave_becomes_master_and_registers_as_id_0(
    pair: tuple[BrokerController, BrokerController, FakeNameServer],
) -> None:
    master, slave, namesrv = pair
    await fill(master, slave)
    await notify_elected(slave, master)
    await eventually(
        lambda: slave.role is BrokerRole.SYNC_MASTER,
        what="the slave switched to SYNC_MASTER",
        timeout_s=WAIT_S,
    )
    replication = slave.replication
    assert replication.broker_id == 0
    assert replication.ha_client is None and replication.ha_service is not None

    def registered_as_master() -> bool:
        return any(
            r.ext["brokerAddr"] == slave.broker_addr and r.ext["brokerId"] == "0"
            for r in namesrv.of(RequestCode.REGISTER_BROKER)
        )

    await eventually(registered_as_master, what="a registration as master", timeout_s=WAIT_S)
    last = [
        r
        for r in namesrv.of(RequestCode.REGISTER_BROKER)
        if r.ext["brokerAddr"] == slave.broker_addr
    ][-1]
    assert last.ext["enableRaftFailover"] == "true"
    assert master.store is not None
    assert int(last.ext["maxOffset"]) == master.store.max_offset


async def test_the_promoted_sync_master_stores_writes_and_says_no_slave_is_in_sync(
    pair: tuple[BrokerController, BrokerController, FakeNameServer],
) -> None:
    master, slave, _ = pair
    await fill(master, slave)
    assert slave.topics.check_writable(TOPIC, None) is not None
    assert await slave.replication.promote_to_master()
    assert slave.topics.check_writable(TOPIC, None) is None
    assert slave.store is not None
    before = slave.store.max_offset
    outcome = await slave.put_message(MessageInput(TOPIC, 0, b"after failover"))
    # SYNC_MASTER without a connected slave: stored, answered SLAVE_NOT_AVAILABLE (4.x).
    assert outcome.code == ResponseCode.SLAVE_NOT_AVAILABLE
    assert slave.store.max_offset > before
    assert not await slave.replication.promote_to_master()


async def test_the_returning_old_master_follows_the_new_one(
    pair: tuple[BrokerController, BrokerController, FakeNameServer],
) -> None:
    master, slave, _ = pair
    await fill(master, slave)
    await slave.replication.promote_to_master()
    assert await master.replication.follow_master(1, slave.broker_addr, slave.replication.ha_addr)
    assert master.role is BrokerRole.SLAVE and master.replication.broker_id == 1
    assert master.topics.check_writable(TOPIC, None) is not None
    replication = slave.replication
    await eventually(
        lambda: replication.ha_service is not None and bool(replication.ha_service.slaves()),
        what="a slave connected to the new master",
        timeout_s=WAIT_S,
    )
    for _ in range(5):
        await slave.put_message(MessageInput(TOPIC, 0, b"y" * 100))
    assert master.store is not None and slave.store is not None
    await eventually(
        lambda: (
            master.store is not None
            and slave.store is not None
            and master.store.max_offset == slave.store.max_offset
        ),
        what="the new slave caught up",
        timeout_s=WAIT_S,
    )


def test_a_register_answer_carries_the_assigned_broker_id() -> None:
    answer = RemotingCommand.request(RequestCode.REGISTER_BROKER).make_response(
        ResponseCode.SUCCESS,
        ext_fields={
            "masterAddr": "127.0.0.1:10921",
            "haServerAddr": "127.0.0.1:10922",
            "assignedBrokerId": "2",
        },
    )
    found = first_assignment([parse_register_response("127.0.0.1:9876", answer)])
    assert found is not None and found.assigned_broker_id == 2
