"""The projection writer keeps the node's Django tables equal to its route table."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest
from django.db import OperationalError

from gateway.clock import ManualClock
from gateway.services import NameServerService
from namesrv_app import models
from namesrv_app.projection.pacing import DUTY_FREE_S, DUTY_MAX
from namesrv_app.projection.writer import ProjectionWriter
from raftstore.commands import BrokerHeartbeat
from raftstore.replicator import LocalReplicator
from raftstore.route_table import RouteTable
from remoting.model import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from remoting.register_request import BrokerRegistration
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

FLUSH_TIMEOUT_S = 10.0
T = TypeVar("T")


def run(work: Coroutine[Any, Any, T]) -> T:
    """Run one service coroutine to completion (the tests touch the DB, so they stay sync)."""
    return asyncio.run(work)


def wrapper(*topics: str, counter: int = 1) -> TopicConfigSerializeWrapper:
    """A topic table with 8 queues per topic."""
    return TopicConfigSerializeWrapper(
        data_version=DataVersion(timestamp=1, counter=counter),
        topic_config_table={t: TopicConfig(t, 8, 8) for t in topics},
    )


def register(
    service: NameServerService,
    name: str,
    addr: str,
    broker_id: int,
    *topics: str,
    filters: tuple[str, ...] = (),
) -> None:
    """Register ``name`` in DefaultCluster with ``topics`` (and filter servers)."""
    run(
        service.register_broker(
            BrokerRegistration(
                cluster_name="DefaultCluster",
                broker_addr=addr,
                broker_name=name,
                broker_id=broker_id,
                ha_server_addr=addr.replace("109", "119"),
                enable_acting_master=False,
            ),
            wrapper(*topics),
            filter_server_list=filters,
            channel=f"channel-{addr}",
        )
    )


def table_view(table: RouteTable) -> dict[str, Any]:
    """The projected facts as the table holds them."""
    return {
        "queues": {
            (topic, name): (qd.read_queue_nums, qd.write_queue_nums, qd.perm, qd.topic_sys_flag)
            for topic, queues in table.topic_queue_table().items()
            for name, qd in queues.items()
        },
        "groups": {
            name: (bd.cluster, bd.zone_name, bd.enable_acting_master, bd.broker_addrs)
            for name, bd in table.broker_datas().items()
        },
        "clusters": table.cluster_info().cluster_addr_table,
        "live": {
            (v.cluster_name, v.broker_addr): (
                v.last_update_ms,
                v.heartbeat_timeout_ms,
                v.channel,
                v.ha_server_addr,
                v.data_version.counter,
                v.data_version.timestamp,
            )
            for v in table.live_brokers()
        },
        "filters": {
            (key.cluster_name, key.broker_addr): list(servers)
            for key, servers in table.filter_servers().items()
        },
        "kv": table.kv_namespaces(),
    }


def db_view() -> dict[str, Any]:
    """The same facts read back from the projection rows."""
    kv: dict[str, dict[str, str]] = {ns.name: {} for ns in models.KVNamespace.objects.all()}
    for entry in models.KVEntry.objects.select_related("namespace"):
        kv[entry.namespace.name][entry.key] = entry.value
    return {
        "queues": {
            (q.topic, q.broker_name): (
                q.read_queue_nums,
                q.write_queue_nums,
                q.perm,
                q.topic_sys_flag,
            )
            for q in models.QueueData.objects.all()
        },
        "groups": {
            g.broker_name: (
                g.cluster,
                g.zone_name,
                g.enable_acting_master,
                {a.broker_id: a.addr for a in g.addresses.order_by("broker_id")},
            )
            for g in models.BrokerGroup.objects.all()
        },
        "clusters": {c.name: c.broker_names for c in models.Cluster.objects.all()},
        "live": {
            (b.cluster_name, b.broker_addr): (
                b.last_update_ms,
                b.heartbeat_timeout_ms,
                b.channel,
                b.ha_server_addr,
                b.data_version_counter,
                b.data_version_timestamp,
            )
            for b in models.LiveBroker.objects.all()
        },
        "filters": {
            (f.cluster_name, f.broker_addr): f.servers for f in models.FilterServer.objects.all()
        },
        "kv": kv,
    }


@pytest.fixture
def node() -> Iterator[tuple[LocalReplicator, NameServerService, ProjectionWriter, ManualClock]]:
    """A node with a running projection writer (started with a rebuild)."""
    replicator = LocalReplicator("n1")
    clock = ManualClock()
    writer = ProjectionWriter(replicator)
    writer.start(rebuild=True)
    yield replicator, NameServerService(replicator, clock), writer, clock
    writer.stop()


def test_rows_equal_the_table_after_a_sequence_of_commands(node: Any) -> None:
    """Registrations, KV, perm changes, deletes and heartbeats all reach the rows."""
    replicator, service, writer, clock = node
    register(service, "broker-a", "127.0.0.1:10911", 0, "T1", "T2")
    register(service, "broker-a", "127.0.0.1:10921", 1, "T1", "T2", filters=("10.0.0.1:30000",))
    register(service, "broker-b", "127.0.0.1:10931", 0, "T2", "T3", filters=("10.0.0.2:30000",))
    register(service, "broker-b", "127.0.0.1:10931", 0, "T2", "T3", filters=())
    run(service.put_kv(namespace="ORDER_TOPIC_CONFIG", key="T1", value="broker-a:8"))
    run(service.put_kv(namespace="ns", key="gone", value="x"))
    run(service.delete_kv(namespace="ns", key="gone"))
    run(service.wipe_write_perm("broker-b"))
    run(service.delete_topic("T1"))
    clock.advance(5_000)
    run(service.broker_heartbeat(cluster_name="DefaultCluster", broker_addr="127.0.0.1:10911"))
    run(
        service.unregister_broker(
            cluster_name="DefaultCluster",
            broker_addr="127.0.0.1:10921",
            broker_name="broker-a",
            broker_id=1,
        )
    )
    assert writer.flush(FLUSH_TIMEOUT_S)
    assert db_view() == replicator.read(table_view)
    state = models.NodeState.objects.get(node_id="n1")
    assert state.applied_version == replicator.read(lambda t: t.applied_version)
    assert state.digest == replicator.read(lambda t: t.digest())
    assert "enableAllTopicList=true" in state.config_properties


def test_only_the_changed_rows_are_written(node: Any) -> None:
    """A perm change on broker-b restamps broker-b's queues only; a heartbeat one live row."""
    replicator, service, writer, clock = node
    register(service, "broker-a", "127.0.0.1:10911", 0, "T1", "T2")
    register(service, "broker-b", "127.0.0.1:10931", 0, "T3", "T4")
    assert writer.flush(FLUSH_TIMEOUT_S)
    before = dict(models.QueueData.objects.values_list("topic", "applied_version"))
    run(service.wipe_write_perm("broker-b"))
    assert writer.flush(FLUSH_TIMEOUT_S)
    after = dict(models.QueueData.objects.values_list("topic", "applied_version"))
    wipe_version = replicator.read(lambda t: t.applied_version)
    assert after == {"T1": before["T1"], "T2": before["T2"], "T3": wipe_version, "T4": wipe_version}

    live_before = dict(models.LiveBroker.objects.values_list("broker_addr", "applied_version"))
    clock.advance(1_000)
    run(service.broker_heartbeat(cluster_name="DefaultCluster", broker_addr="127.0.0.1:10931"))
    assert writer.flush(FLUSH_TIMEOUT_S)
    live_after = dict(models.LiveBroker.objects.values_list("broker_addr", "applied_version"))
    assert live_after["127.0.0.1:10911"] == live_before["127.0.0.1:10911"]
    assert live_after["127.0.0.1:10931"] == replicator.read(lambda t: t.applied_version)
    assert dict(models.QueueData.objects.values_list("topic", "applied_version")) == after


def test_rebuild_rewrites_every_row_from_the_table(node: Any) -> None:
    """Rows that the table does not hold disappear; the rest equal the table."""
    replicator, service, writer, _ = node
    register(service, "broker-a", "127.0.0.1:10911", 0, "T1", "T2", filters=("10.0.0.1:30000",))
    assert writer.flush(FLUSH_TIMEOUT_S)
    models.QueueData.objects.create(
        topic="ghost", broker_name="nobody", read_queue_nums=1, write_queue_nums=1, perm=6
    )
    writer.stop()
    writer.rebuild()
    assert db_view() == replicator.read(table_view)
    assert not models.QueueData.objects.filter(topic="ghost").exists()


def test_changes_made_while_the_writer_is_away_merge_into_one_transaction() -> None:
    """However many commands apply before the writer looks, it writes them as one
    delta (the later value of a key wins), never drops them for a rebuild."""
    replicator = LocalReplicator("n1")
    service = NameServerService(replicator, ManualClock())
    writer = ProjectionWriter(replicator)
    writer.attach()
    for index in range(500):
        run(service.put_kv(namespace="ns", key=f"k{index % 7}", value=str(index)))
    writer.start(rebuild=False)
    try:
        assert writer.flush(FLUSH_TIMEOUT_S)
        assert (writer.batches_written, writer.rebuilds) == (1, 0)
        assert db_view() == replicator.read(table_view)
        assert models.KVEntry.objects.get(key="k0").value == "497"
    finally:
        writer.stop()


def wait_for_writer(
    condition: Callable[[], bool], what: str, timeout_s: float = FLUSH_TIMEOUT_S
) -> None:
    """Poll ``condition()`` until it holds (the writer thread works on its own).

    The test database is one shared in-memory SQLite, whose table locks make a read
    that meets the writer's transaction fail with "table is locked": that read is
    retried, as "not yet"."""

    def holds() -> bool:
        try:
            return condition()
        except OperationalError as exc:
            if "locked" not in str(exc):
                raise
            return False

    wait_until(holds, what=what, timeout_s=timeout_s, interval_s=0.01)


def stored_digest() -> str:
    """The digest the projection's node-state row holds."""
    return models.NodeState.objects.get(node_id="n1").digest


def heartbeat(service: NameServerService, clock: ManualClock, addr: str) -> None:
    """One applied BrokerHeartbeat a second later: it moves the live row's last update.

    Applied directly: the service may coalesce heartbeats, and these tests need
    each one to reach the table (as every re-registration of a broker does).
    """
    clock.advance(1_000)
    replicator = service.replicator
    assert isinstance(replicator, LocalReplicator)
    result = replicator.apply_now(BrokerHeartbeat("DefaultCluster", addr, clock.now_ms()))
    assert result.changes.live_brokers and not result.changes.affects_routes


def test_heartbeats_alone_do_not_recompute_the_digest_but_route_changes_do() -> None:
    """Busy liveness-only batches leave the stored digest stale; a flush makes it exact."""
    replicator = LocalReplicator("n1")
    clock = ManualClock()
    service = NameServerService(replicator, clock)
    writer = ProjectionWriter(
        replicator,
        digest_interval_s=0.0,
        liveness_digest_interval_s=3600.0,
        liveness_linger_s=0.0,
        idle_poll_s=3600.0,  # no idle catch-up during the test
    )
    writer.start(rebuild=True)
    try:
        wait_for_writer(lambda: writer.rebuilds == 1, "the rebuild")
        register(service, "broker-a", "127.0.0.1:10911", 0, "T1", "T2")
        wait_for_writer(
            lambda: stored_digest() == replicator.read(lambda t: t.digest()), "the digest stored"
        )

        # The rebuild's digest, then the route change's. A batch the test database
        # refuses ("table is locked") is redone by a rebuild, which takes its own
        # digest: count the digests that were not a rebuild's.
        def commit_digests() -> int:
            return writer.digests_computed - writer.rebuilds

        after_route_change = commit_digests()
        assert after_route_change >= 1

        # A refused batch during the heartbeats is redone by a rebuild, whose digest is
        # exact again; the heartbeats are then repeated (a rebuild is not what is tested).
        for _attempt in range(5):
            rebuilds_before = writer.rebuilds
            for _ in range(3):
                heartbeat(service, clock, "127.0.0.1:10911")
            wait_for_writer(
                lambda: (
                    models.NodeState.objects.get(node_id="n1").applied_version
                    == replicator.read(lambda t: t.applied_version)
                ),
                "the heartbeats' version stored",
            )
            if writer.rebuilds == rebuilds_before:
                break
        assert writer.rebuilds == rebuilds_before
        assert commit_digests() == after_route_change
        assert stored_digest() != replicator.read(lambda t: t.digest())

        run(service.put_kv(namespace="ns", key="k", value="v"))
        wait_for_writer(
            lambda: stored_digest() == replicator.read(lambda t: t.digest()), "the digest stored"
        )
        assert commit_digests() > after_route_change

        heartbeat(service, clock, "127.0.0.1:10911")
        assert writer.flush(FLUSH_TIMEOUT_S)
        assert stored_digest() == replicator.read(lambda t: t.digest())
    finally:
        writer.stop()


def test_liveness_only_deltas_are_written_in_one_transaction() -> None:
    """Heartbeats wait for each other (up to the linger); a flush ends the wait."""
    replicator = LocalReplicator("n1")
    clock = ManualClock()
    service = NameServerService(replicator, clock)
    writer = ProjectionWriter(replicator, liveness_linger_s=30.0, idle_poll_s=3600.0)
    writer.start(rebuild=True)
    try:
        register(service, "broker-a", "127.0.0.1:10911", 0, "T1", "T2")
        register(service, "broker-b", "127.0.0.1:10931", 0, "T3", "T4")
        assert writer.flush(FLUSH_TIMEOUT_S)
        before = writer.batches_written
        for index in range(10):
            heartbeat(service, clock, "127.0.0.1:10911" if index % 2 else "127.0.0.1:10931")
        assert writer.flush(FLUSH_TIMEOUT_S)
        assert writer.batches_written == before + 1
        assert db_view() == replicator.read(table_view)
    finally:
        writer.stop()


def test_a_route_change_ends_the_liveness_wait() -> None:
    """A delta that is not liveness-only is written without waiting out the linger."""
    replicator = LocalReplicator("n1")
    clock = ManualClock()
    service = NameServerService(replicator, clock)
    writer = ProjectionWriter(replicator, liveness_linger_s=600.0, idle_poll_s=3600.0)
    writer.start(rebuild=True)
    try:
        register(service, "broker-a", "127.0.0.1:10911", 0, "T1", "T2")
        assert writer.flush(FLUSH_TIMEOUT_S)
        heartbeat(service, clock, "127.0.0.1:10911")
        run(service.wipe_write_perm("broker-a"))
        version = replicator.read(lambda t: t.applied_version)
        wait_for_writer(
            lambda: models.NodeState.objects.get(node_id="n1").applied_version == version,
            "the wiped version stored",
        )
        assert db_view() == replicator.read(table_view)
    finally:
        writer.stop()


def writer_cpu_s(writer: ProjectionWriter) -> float:
    """CPU time the writer's thread has used (Linux: the thread's own CPU clock)."""
    assert writer._thread is not None and writer._thread.ident is not None
    return time.clock_gettime(time.pthread_getcpuclockid(writer._thread.ident))


def test_a_big_batch_keeps_the_writer_to_its_share_unless_a_flush_waits() -> None:
    """The writer's share of a core (DUTY_MAX) holds inside one batch, not only between
    batches: a table of thousands of topics is written at that pace, sleeping between
    chunks, so it never holds the interpreter for its whole cost at once. A flush
    makes it catch up at full speed, with no debt kept for later."""
    replicator = LocalReplicator("n1")
    service = NameServerService(replicator, ManualClock())
    writer = ProjectionWriter(replicator)
    writer.start(rebuild=False)
    try:
        assert writer.flush(FLUSH_TIMEOUT_S)
        topics = [f"PacedTopic{i:05d}" for i in range(3000)]
        cpu_before, started = writer_cpu_s(writer), time.monotonic()
        register(service, "broker-a", "10.0.0.1:10911", 0, *topics)
        wait_for_writer(
            lambda: models.QueueData.objects.filter(broker_name="broker-a").count() == 3000,
            "3000 topics written",
            timeout_s=60.0,
        )
        paced_wall_s = time.monotonic() - started
        paced_cpu_s = writer_cpu_s(writer) - cpu_before
        assert paced_cpu_s > 4 * DUTY_FREE_S, "the batch was too cheap to say anything"
        # Its debt was slept off between chunks, before the rows were committed.
        assert paced_wall_s >= 0.5 * (paced_cpu_s - DUTY_FREE_S) / DUTY_MAX, (
            paced_wall_s,
            paced_cpu_s,
        )

        cpu_before, started = writer_cpu_s(writer), time.monotonic()
        register(service, "broker-b", "10.0.0.2:10911", 0, *topics)
        assert writer.flush(FLUSH_TIMEOUT_S)
        flushed_wall_s = time.monotonic() - started
        flushed_cpu_s = writer_cpu_s(writer) - cpu_before
        assert models.QueueData.objects.filter(broker_name="broker-b").count() == 3000
        assert flushed_wall_s < 0.5 * flushed_cpu_s / DUTY_MAX, (flushed_wall_s, flushed_cpu_s)
        assert db_view() == replicator.read(table_view)
    finally:
        writer.stop()
