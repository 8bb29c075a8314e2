"""A node's own changes enter the history as the node's journal reports them.

The journal itself (numbered, bounded, each entry's kind and raft position), the
harness's mapping of its wall-clock stamps, and one short raft broker-kill run (about
30 s with boot and tear-down): the leader's scan expires the killed broker and its
journal reports it with the Raft log index and term; the harness records one expire
write per topic of that broker at the scan's window, which the prober then never infers
a second time. Eventual mode's journal against a real cluster: tests/experiments/
test_nemesis.py's eventual run.
"""

from __future__ import annotations

import asyncio
import collections
import json
from pathlib import Path
from typing import Any

import pytest

from experiment_history.runs import iter_rows
from experiment_history.schema import (
    KIND_EXPIRE as EXPIRE_WRITE,
    KIND_UNREGISTER,
    ORIGIN_NODE,
    PROCESS_RAFT,
)
from experiments import journals as journals_module
from experiments.config import ExperimentConfig
from experiments.faults import NODE_STATUS_CODE
from experiments.journals import wall_offset_us
from experiments.registers import with_broker
from experiments.runner import run_experiment
from experiments.workload import Ack, now_us
from gateway.expiry_reports import (
    EXPIRY_REPORTS_MAX,
    KIND_CHANNEL_CLOSE,
    KIND_EXPIRE,
    ExpiryReports,
    RaftPosition,
)
from gateway.internal import JOURNAL_FIELD, JOURNAL_ONLY
from raftstore.results import BrokerAddrInfo, MasterElection
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, make_response
from tests.experiments.unit_context import unit_context

WALL_STEP_US = 2_000_000
"""How far this host's wall clock is ahead of the harness clock in the clock test (as
after a step of the wall clock since the harness started)."""
SLACK_US = 2_000
"""What the mapping may be off by in that test: the offset is read a moment after the
fake node stamped its report (reading the clocks, scheduling), never the 2 s step."""


def test_a_node_keeps_its_latest_expiring_scans_numbered_and_bounded() -> None:
    ticks = iter(range(1_000, 10**6, 10))
    reports = ExpiryReports(clock_us=lambda: next(ticks))
    reports.record(5, [])
    assert reports.snapshot() == []
    for started in range(EXPIRY_REPORTS_MAX + 3):
        reports.record(started, [BrokerAddrInfo("c", f"10.0.0.1:{started}")])
    kept = reports.snapshot()
    assert len(kept) == EXPIRY_REPORTS_MAX
    assert [r["seq"] for r in kept] == list(range(4, EXPIRY_REPORTS_MAX + 4))
    assert all(r["started_us"] < r["committed_us"] for r in kept)
    assert kept[-1]["expired"] == [{"cluster": "c", "addr": f"10.0.0.1:{EXPIRY_REPORTS_MAX + 2}"}]
    assert {r["kind"] for r in kept} == {KIND_EXPIRE}


def test_the_journal_says_what_each_change_was_and_where_raft_committed_it() -> None:
    journal = ExpiryReports(clock_us=lambda: 50)
    gone = BrokerAddrInfo("c", "10.0.0.1:1")
    election = MasterElection("c", "b", "10.0.0.1:1", "10.0.0.2:1", None, 1, 0, 0)
    journal.record(10, [gone], elections=[election], raft=RaftPosition(41, 3, 17))
    journal.record(20, [], elections=[election])  # an election alone is a change too
    journal.record(30, [gone], kind=KIND_CHANNEL_CLOSE)
    journal.record(40, [], kind=KIND_CHANNEL_CLOSE)  # a close that removed nothing: none
    scan, elected, closed = journal.snapshot()
    assert journal.started_us == 50, "the journal says when it began: the gateway's start"
    assert scan == {
        "seq": 1,
        "kind": KIND_EXPIRE,
        "started_us": 10,
        "committed_us": 50,
        "expired": [{"cluster": "c", "addr": "10.0.0.1:1"}],
        "elections": [
            {"broker_name": "b", "new_master_addr": "10.0.0.2:1", "old_master_addr": "10.0.0.1:1"}
        ],
        "raft_index": 41,
        "raft_term": 3,
        "applied_version": 17,
    }
    assert (elected["seq"], elected["expired"], "raft_index" in elected) == (2, [], False)
    assert (closed["kind"], closed["seq"]) == (KIND_CHANNEL_CLOSE, 3)


class _StatusCluster:
    """Three nodes; n1 reports the scans in ``reports`` (wall-clock stamps, as a gateway
    does) in its NODE_STATUS."""

    node_ids = ["n1", "n2", "n3"]

    def __init__(self, skew_us: int = 0) -> None:
        self.reports: list[dict[str, Any]] = []
        self.skew_us = skew_us
        """n1's wall clock against this host's (a gateway started under libfaketime)."""

    def remoting_addrs(self) -> dict[str, str]:
        return {n: f"127.0.0.1:{9000 + i}" for i, n in enumerate(self.node_ids)}

    async def internal(
        self, node: str, code: int, ext: dict[str, str], timeout_s: float
    ) -> RemotingCommand:
        """NODE_STATUS ``journal=only``, as a gateway answers it."""
        assert (code, ext) == (NODE_STATUS_CODE, {JOURNAL_FIELD: JOURNAL_ONLY})
        skew_us = self.skew_us if node == "n1" else 0
        body = {
            "expiries": list(self.reports) if node == "n1" else [],
            "started_us": 0,
            "now_us": journals_module.wall_us() + skew_us,
        }
        request = RemotingCommand.request(code, ext)
        return make_response(request, ResponseCode.SUCCESS, body=json.dumps(body).encode())


TOPICS = ["topic-000", "topic-001"]


def _context(tmp_path: Path, cluster: _StatusCluster) -> tuple[Any, Any, list[Any]]:
    """A unit context over ``cluster`` with each topic's route written once."""
    ctx, writer, brokers = unit_context(
        tmp_path,
        "broker-kill",
        topics=TOPICS,
        nodes=["n1", "n2", "n3"],
        brokers=3,
        seed=2,
        cluster=cluster,
    )
    for topic in TOPICS:
        ctx.registers.record(topic, 0, 10, ctx.fleet.truth(topic))
    return ctx, writer, brokers


def _recorded_expiries(ctx: Any, writer: Any, tmp_path: Path) -> list[dict[str, Any]]:
    """Read every node's journal once and return the expiry writes it recorded."""
    asyncio.run(ctx.journals.collect())
    writer.close()
    rows = [r for r in iter_rows(tmp_path / "run", "operations") if r["kind"] == EXPIRE_WRITE]
    assert rows, "the scan of the victim is recorded"
    return rows


def test_reported_expiry_windows_are_moved_onto_the_harness_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host's wall clock has stepped 2 s ahead of the harness's monotonic clock since
    the harness started: the node's wall-clock stamps of its scans must be recorded on the
    harness clock (2 s earlier), and a scan from before the recording started (which its
    wall-clock stamp puts after it) must not be recorded at all. The wall clock is the
    harness clock plus the step: the host's real one may have stepped already."""
    monkeypatch.setattr(journals_module, "wall_us", lambda: now_us() + WALL_STEP_US)
    offset = wall_offset_us()
    assert abs(offset - WALL_STEP_US) < SLACK_US
    cluster = _StatusCluster()
    ctx, writer, brokers = _context(tmp_path, cluster)
    victim = brokers[0]
    start_us = ctx.recorder.started_ms * 1_000
    scan_us = now_us()  # harness clock: the scan starts now, commits 3 ms later
    wall = scan_us + WALL_STEP_US  # what the node's wall clock says at those moments
    cluster.reports = [
        {  # a scan 1 s before the recording started; its wall stamp is 1 s after
            "seq": 1,
            "started_us": start_us - 1_000_000 + WALL_STEP_US,
            "committed_us": start_us - 997_000 + WALL_STEP_US,
            "expired": [{"cluster": "c", "addr": brokers[1].addr}],
        },
        {
            "seq": 2,
            "started_us": wall,
            "committed_us": wall + 3_000,
            "expired": [{"cluster": "c", "addr": victim.addr}],
        },
    ]
    rows = _recorded_expiries(ctx, writer, tmp_path)
    assert {json.loads(r["extra"])["scan_seq"] for r in rows} == {2}, "seq 1 predates the run"
    assert {r["topic"] for r in rows} == {t for t in TOPICS if t in victim.topics}
    for row in rows:
        assert row["broker"] == victim.name
        assert abs(row["invoke_us"] - scan_us) < SLACK_US, row
        assert abs(row["complete_us"] - (scan_us + 3_000)) < SLACK_US, row
        assert row["complete_us"] - row["invoke_us"] == 3_000
        assert row["invoke_ms"] == row["invoke_us"] // 1_000


def test_a_node_on_a_skewed_clock_is_read_on_its_own_clock(tmp_path: Path) -> None:
    """n1 runs 5 s ahead of this host (the nemesis' libfaketime restart): its stamps are
    moved by its own offset, measured from its answer's ``now_us``, and its window
    widened by that measure's uncertainty; read with this host's offset, the scan would
    be recorded 5 s late."""
    skew_us = 5_000_000
    cluster = _StatusCluster(skew_us=skew_us)
    ctx, writer, brokers = _context(tmp_path, cluster)
    victim = brokers[0]
    scan_us = now_us()
    wall = scan_us + wall_offset_us() + skew_us
    cluster.reports = [
        {
            "seq": 1,
            "started_us": wall,
            "committed_us": wall + 3_000,
            "expired": [{"cluster": "c", "addr": victim.addr}],
        }
    ]
    rows = _recorded_expiries(ctx, writer, tmp_path)
    for row in rows:
        # Widened by the measure's uncertainty, never narrowed: the scan lies inside.
        assert row["invoke_us"] <= scan_us + SLACK_US, row
        assert row["complete_us"] >= scan_us + 3_000 - SLACK_US, row
        assert abs(row["invoke_us"] - scan_us) < 10 * SLACK_US, row


@pytest.mark.parametrize("expiry_version", [7, 9])
def test_a_raft_write_and_an_expiry_reported_while_it_was_on_its_way_go_in_log_order(
    tmp_path: Path, expiry_version: int
) -> None:
    """The leader committed an expiry of one broker while another broker's
    unregistration was on its way, in the same log entry (3, a batch: the table versions
    the commands left, 7 or 9 and 8, order them), and journaled it only after the
    unregistration was sent. Version 7: the expiry came first, so the unregistration,
    valued when sent with the expired broker still in, is valued again once its answer
    names its place, on the expiry's result. Version 9: the expiry came after, so it waits
    for the unregistration and is valued on its result, not on the value before it."""
    cluster = _StatusCluster()
    ctx, writer, brokers = _context(tmp_path, cluster)
    leaving, expired = (b for b in brokers if TOPICS[0] in b.topics)
    before = ctx.registers.latest(TOPICS[0])

    async def unregister() -> list[Ack]:
        scan_us = now_us() + wall_offset_us()
        cluster.reports = [
            {
                "seq": 1,
                "started_us": scan_us,
                "committed_us": scan_us + 100,
                "expired": [{"cluster": "c", "addr": expired.addr}],
                "raft_index": 3,
                "applied_version": expiry_version,
            }
        ]
        await ctx.journals.collect()  # a prober round reads it while this is on its way
        return [Ack("n2", now_us(), log_index=3, applied_version=8)]

    asyncio.run(ctx.broker_write(leaving.name, KIND_UNREGISTER, unregister))
    writer.close()
    rows = [r for r in iter_rows(tmp_path / "run", "operations") if r["topic"] == TOPICS[0]]
    without_expired = with_broker(before, expired.name, None)
    without_leaving = with_broker(before, leaving.name, None)
    neither = with_broker(without_expired, leaving.name, None)
    expected = {
        7: [(EXPIRE_WRITE, without_expired), (KIND_UNREGISTER, neither)],
        9: [(KIND_UNREGISTER, without_leaving), (EXPIRE_WRITE, neither)],
    }[expiry_version]
    assert [(r["kind"], r["value"]) for r in rows] == expected, "each on the one before"
    assert json.loads(rows[int(expiry_version < 8)]["extra"])["applied_version"] == 8
    assert ctx.registers.latest(TOPICS[0]) == neither
    assert ctx.notes["held_journal_entries"] == 1
    if expiry_version == 7:
        assert not ctx.registers.written(TOPICS[0], without_leaving), (
            "the value it was sent with is no write's"
        )


def test_an_expiry_s_write_of_one_topic_does_not_wait_for_a_write_of_another(
    tmp_path: Path,
) -> None:
    """The expired broker serves both topics, and a write of each is on its way, both
    sent before the expiry committed. The expiry's write of the first topic waits only
    for the first topic's write: that one's answer puts it after the expiry (version 8
    against 7), so the expiry is recorded first and the write valued on it, while the
    second topic's write is still on its way (and the expiry's write of that topic
    still waits for it)."""
    cluster = _StatusCluster()
    ctx, writer, brokers = _context(tmp_path, cluster)
    [both] = [b for b in brokers if set(TOPICS) <= set(b.topics)]
    first, second = (
        next(b for b in brokers if b is not both and topic in b.topics) for topic in TOPICS
    )
    assert first is not second
    before = ctx.registers.latest(TOPICS[0])
    second_may_end = asyncio.Event()

    async def unregister_first() -> list[Ack]:
        scan_us = now_us() + wall_offset_us()
        cluster.reports = [
            {
                "seq": 1,
                "started_us": scan_us,
                "committed_us": scan_us + 100,
                "expired": [{"cluster": "c", "addr": both.addr}],
                "raft_index": 3,
                "applied_version": 7,
            }
        ]
        return [Ack("n2", now_us(), log_index=4, applied_version=8)]

    async def unregister_second() -> list[Ack]:
        await second_may_end.wait()
        return [Ack("n2", now_us(), log_index=5, applied_version=9)]

    async def both_writes() -> None:
        later = asyncio.create_task(
            ctx.broker_write(second.name, KIND_UNREGISTER, unregister_second)
        )
        await asyncio.sleep(0)  # the second topic's write is on its way first
        await ctx.broker_write(first.name, KIND_UNREGISTER, unregister_first)
        assert ctx._held_topics() == {TOPICS[1]}, "only the second topic's write waits"
        second_may_end.set()
        await later

    asyncio.run(both_writes())
    writer.close()
    rows = [r for r in iter_rows(tmp_path / "run", "operations") if r["topic"] == TOPICS[0]]
    without_both = with_broker(before, both.name, None)
    assert [(r["kind"], r["value"]) for r in rows] == [
        (EXPIRE_WRITE, without_both),
        (KIND_UNREGISTER, with_broker(without_both, first.name, None)),
    ]
    assert not ctx._held


@pytest.mark.integration
@pytest.mark.slow
def test_the_killed_broker_s_expiry_is_recorded_once_per_topic_at_the_scan(
    tmp_path: Path,
) -> None:
    outcome = run_experiment(
        ExperimentConfig(
            scenario="broker-kill",
            mode="raft",
            out_dir=tmp_path,
            seed=5,
            duration_s=10.0,
            brokers=4,
            topics=3,
            run_id="expiry-raft",
        )
    )
    rows = list(iter_rows(outcome.run_dir, "operations"))
    [kill] = [f for f in iter_rows(outcome.run_dir, "faults") if f["kind"] == "kill_broker"]
    # The other brokers stay alive: every expiry of the run is the killed broker's.
    expiries = [r for r in rows if r["kind"] == EXPIRE_WRITE]
    reported = [r for r in expiries if "reported_by" in json.loads(r["extra"])]
    assert reported, expiries
    for row in reported:
        assert row["process"] == PROCESS_RAFT and row["outcome"] == "ok"
        assert row["origin"] == ORIGIN_NODE
        # Where the leader committed it: a log index and term, and the table version.
        source = json.loads(row["extra"])
        assert source["journal_kind"] == KIND_EXPIRE
        # The entry's own position, handed out with the result: never read after it.
        assert source["raft_index"] > 0 and source["raft_term"] >= 1, source
        assert source["applied_version"] > 0, source
        assert row["broker"] == kill["target"]
        assert kill["start_ms"] * 1_000 <= row["invoke_us"] <= row["complete_us"]
        assert kill["target"] not in row["value"]
    # Reported or (when the prober saw the change first) inferred, never both.
    per_topic = collections.Counter(r["topic"] for r in expiries)
    assert set(per_topic.values()) == {1}, per_topic
