"""A copy of a broker's earlier registration, applied after its later one, changes
nothing but liveness (``raftstore.registration.superseded_by``).

Raft mode logs copies of one broker's registrations from several members; a
follower's own copy can commit after the broker's next registration. Found by the
nemesis at scale: routes that held a broker's older share after a newer one had been
acknowledged.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from raftstore.commands import RegisterBroker
from raftstore.registration import superseded_by
from raftstore.results import RegisterBrokerOutcome
from raftstore.route_table import RouteTable
from remoting.model import DataVersion
from tests.raftstore import cast
from tests.raftstore.raft_node import InProcessCluster

EARLY = DataVersion(timestamp=cast.NOW_MS, counter=7)
LATE = DataVersion(timestamp=cast.NOW_MS + 5, counter=8)


def _master(dv: DataVersion, queues: int, now_ms: int) -> RegisterBroker:
    """broker-a's master registering topic-t and topic-u with ``queues`` queues each."""
    return RegisterBroker(
        cluster_name=cast.DEFAULT_CLUSTER,
        broker_addr=cast.ADDR_A0,
        broker_name=cast.BROKER_A,
        broker_id=0,
        ha_server_addr=cast.HA_A0,
        now_ms=now_ms,
        topic_config_wrapper=cast.wrapper(cast.topics("topic-t", "topic-u", queues=queues), dv),
        filter_server_list=(),
        zone_name="",
        enable_acting_master=False,
    )


def _queues(table: RouteTable) -> int:
    route = table.pickup_topic_route("topic-t")
    assert route is not None
    (queue,) = route.queue_datas
    return queue.write_queue_nums


def test_the_order_of_one_brokers_history() -> None:
    assert superseded_by(LATE, EARLY)
    assert not superseded_by(EARLY, LATE)
    assert not superseded_by(LATE, LATE)
    # Two changes within one millisecond: the counter still orders them.
    assert superseded_by(dataclasses.replace(EARLY, counter=8), EARLY)
    # A broker restarted without its store counts from 1 again, later by its clock.
    assert not superseded_by(LATE, DataVersion(timestamp=LATE.timestamp + 1, counter=1))
    # A controller-mode state version moving on is never older.
    assert not superseded_by(LATE, dataclasses.replace(EARLY, state_version=1))


def test_an_earlier_copy_refreshes_liveness_and_keeps_the_later_table() -> None:
    table = RouteTable()
    table.apply(_master(EARLY, 4, now_ms=cast.NOW_MS))
    table.apply(_master(LATE, 8, now_ms=cast.NOW_MS + 10))
    before = table.state_document()
    late_copy = _master(EARLY, 4, now_ms=cast.NOW_MS + 20)
    # Answered like the broker's next periodic registration: from state, no change.
    assert table.liveness_only_answer(late_copy) is not None
    result = table.apply(late_copy)
    assert isinstance(result.outcome, RegisterBrokerOutcome)
    assert not result.outcome.failed
    assert _queues(table) == 8
    live = table.live_broker(cast.DEFAULT_CLUSTER, cast.ADDR_A0)
    assert live is not None
    assert live.data_version == LATE
    assert live.last_update_ms == cast.NOW_MS + 20
    after = table.state_document()
    assert {k: v for k, v in after.items() if k != "live"} == {
        k: v for k, v in before.items() if k != "live"
    }


def test_a_broker_restarted_without_its_store_is_registered() -> None:
    table = RouteTable()
    table.apply(_master(LATE, 8, now_ms=cast.NOW_MS))
    fresh = DataVersion(timestamp=LATE.timestamp + 60_000, counter=1)
    table.apply(_master(fresh, 4, now_ms=cast.NOW_MS + 60_000))
    assert _queues(table) == 4


async def test_a_followers_late_copy_committed_after_the_next_registration(
    tmp_path: Path,
) -> None:
    """On real PySyncObj nodes: the broker's later registration is committed through the
    leader, then a follower's copy of its earlier one is committed through the follower
    (what a follower does when the leader's copy did not come within its wait). Every
    node keeps the later table."""
    nodes = InProcessCluster(tmp_path)
    await nodes.start()
    try:
        leader = await nodes.leader()
        follower = next(n for n in nodes.nodes if n is not leader)
        await leader.propose(_master(EARLY, 4, now_ms=cast.NOW_MS))
        await leader.propose(_master(LATE, 8, now_ms=cast.NOW_MS + 10))
        await follower.propose(_master(EARLY, 4, now_ms=cast.NOW_MS + 20))
        await nodes.converged()
        for node in nodes.nodes:
            assert node.read(_queues) == 8
            live = node.read(lambda t: t.live_broker(cast.DEFAULT_CLUSTER, cast.ADDR_A0))
            assert live is not None and live.data_version == LATE
    finally:
        await nodes.close()
