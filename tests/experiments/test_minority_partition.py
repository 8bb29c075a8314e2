"""Minority partition in raft mode, end to end: the Raft traffic goes through the fault
proxy from the gateways' first start (the launcher's --raft-dial), so cutting the last node
needs no restart; the majority keeps (or elects) a leader, and with linearizable reads the
routes stay linearizable while the routes change (the runner's route churn) during the cut.

One short run (about 40 s with boot and tear-down) checks both read paths on the same cut:
the clients read with ``linearizable``, and just before the heal (the cut still on, the
churn over: its writes all acknowledged by the majority only) the test's scenario asks the
cut node for every route with LOCAL reads, recorded like any client's (process
``local-reader@<node>``). The churn began after the cut and never goes back to the route
it started from, so the cut node answers those from its last applied table, the route it
held at the cut, which the majority has since changed: the checker and the anomaly classes
must flag them, and the history without them must stay linearizable.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from experiment_history.runs import iter_rows
from experiment_history.schema import WRITE_KINDS
from experiments.config import ExperimentConfig
from experiments.context import ExperimentContext
from experiments.registers import with_broker
from experiments.runner import CHURN_BROKERS, RunOutcome, run_experiment
from experiments.scenarios import SCENARIOS, MinorityPartition
from experiments.workload import read_route
from remoting.consistency import CONSISTENCY_LOCAL
from spark_jobs.anomalies import STALE_READ, classify_rows
from spark_jobs.checker import LINEARIZABLE, NOT_LINEARIZABLE, check_rows

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LISTENING = "(raft) listening on"
LOCAL_READER = "local-reader"
LOCAL_READ_ROUNDS = 3
NOTE = "local_reads"


class MinorityPartitionWithLocalReads(MinorityPartition):
    """The scenario as the runner runs it, plus, before it heals (the cut still on, the
    route churn over, its last write acknowledged by the majority and awaited):
    :data:`LOCAL_READ_ROUNDS` LOCAL reads of every topic from the cut node, so each of
    those reads starts after the churn's acks and the cut node cannot have applied any
    of its writes."""

    async def heal(self, ctx: ExperimentContext) -> None:
        # The churn ends with a spare broker registered, never in the route it started
        # from (the warm-up's, which the cut node has held since the cut).
        registered = sorted(n for n in CHURN_BROKERS if ctx.fleet.brokers[n].alive)
        process = f"{LOCAL_READER}@{self.minority}"
        for _ in range(LOCAL_READ_ROUNDS):
            for topic in ctx.topics:
                result = await read_route(
                    ctx.admin, ctx.nodes[self.minority], topic, ctx.timeout_s, CONSISTENCY_LOCAL
                )
                ctx.recorder.route_read(process, self.minority, topic, result)
        ctx.notes[NOTE] = {
            "process": process,
            "churn_registered": registered,
        }
        await super().heal(ctx)


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunOutcome]:
    out = tmp_path_factory.mktemp("minority")
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(SCENARIOS, MinorityPartition.name, MinorityPartitionWithLocalReads)
        yield run_experiment(
            ExperimentConfig(
                scenario="minority-partition",
                mode="raft",
                out_dir=out,
                seed=4,
                duration_s=10.0,
                brokers=6,
                topics=3,
                producers=1,
                consumer_groups=1,
                run_id="minority-raft",
                read_consistency="linearizable",
            )
        )


def _local(row: dict[str, Any]) -> bool:
    """One of the test's LOCAL reads (every other read of the run is linearizable)."""
    return str(row["process"]).startswith(f"{LOCAL_READER}@")


def test_the_gateways_dial_their_peers_through_the_proxy_and_never_restart(
    outcome: RunOutcome,
) -> None:
    cluster = json.loads((outcome.run_dir / "cluster" / "cluster.json").read_text())
    members = {n["raft_addr"] for n in cluster["nodes"]}
    for node in cluster["nodes"]:
        assert set(node["raft_dial"]) == members - {node["raft_addr"]}
        assert node["skew_allowance_ms"] == 0
        log = (Path(node["log_dir"]) / "gateway.log").read_text()
        assert log.count(LISTENING) == 1, f"{node['id']} gateway started more than once"
    [fault] = outcome.summary["faults"]
    assert fault["raft_bytes_before"] > 0, "Raft traffic crossed the proxy before the cut"
    assert len(fault["raft_links_cut"]) == 4


def test_the_majority_has_a_leader_and_the_cut_node_is_not_it(outcome: RunOutcome) -> None:
    [fault] = outcome.summary["faults"]
    cut = fault["target"]
    during = outcome.summary["notes"]["raft_states_before_heal"]
    assert during[cut] != "leader"
    assert [n for n, state in during.items() if state == "leader" and n != cut]


def test_the_route_history_stays_linearizable_while_routes_change(outcome: RunOutcome) -> None:
    ops = [r for r in iter_rows(outcome.run_dir, "operations") if not _local(r)]
    topics = {r["topic"] for r in ops if r["kind"] == "route_read"}
    assert topics
    [fault] = outcome.summary["faults"]
    inside = [
        r
        for r in ops
        if r["kind"] in WRITE_KINDS
        and r["outcome"] == "ok"
        and fault["start_ms"] <= r["complete_ms"] <= fault["end_ms"]
    ]
    assert {r["topic"] for r in inside} >= topics, "every topic's route changed in the cut"
    verdicts = {t: check_rows([r for r in ops if r["topic"] == t]).verdict for t in topics}
    assert verdicts == dict.fromkeys(topics, LINEARIZABLE)


def test_the_cut_node_refuses_linearizable_reads_instead_of_answering_stale(
    outcome: RunOutcome,
) -> None:
    # Only reads answered before the heal: a read that waits out the cut on its barrier
    # and is answered after the heal, with the majority's value, is a correct answer.
    [fault] = outcome.summary["faults"]
    cut_reads = [
        r
        for r in iter_rows(outcome.run_dir, "operations")
        if r["kind"] == "route_read"
        and not _local(r)
        and r["node"] == fault["target"]
        and fault["start_ms"] + 1_000 <= r["invoke_ms"]
        and r["complete_ms"] <= fault["end_ms"]
    ]
    assert cut_reads, "the clients kept asking the cut node"
    assert all(r["outcome"] not in ("ok", "not_found") for r in cut_reads)


def test_every_answered_read_records_the_node_s_routes_version(outcome: RunOutcome) -> None:
    """Ext ``routesVersion`` reaches the history: every answered read and node sample has a
    version, and one client's reads of one node never see it go backwards."""
    answered = [
        r
        for r in iter_rows(outcome.run_dir, "operations")
        if r["kind"] == "route_read" and r["outcome"] in ("ok", "not_found")
    ]
    assert answered and all(r["version"] >= 0 for r in answered)
    samples = list(iter_rows(outcome.run_dir, "node_states"))
    assert samples and all(s["version"] >= 0 for s in samples)
    by_client_node: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in answered:
        by_client_node.setdefault((r["process"], r["node"]), []).append(r)
    for reads in by_client_node.values():
        reads.sort(key=lambda r: r["invoke_ms"])
        for before, after in itertools.pairwise(reads):
            if before["complete_ms"] <= after["invoke_ms"]:
                assert after["version"] >= before["version"], (before, after)


def test_local_reads_of_the_cut_node_are_flagged_and_linearizable_reads_are_not(
    outcome: RunOutcome,
) -> None:
    """Issue 33's regression test: the same cut, the same writes, the same history as the
    experiment records it. The LOCAL reads the cut node answered after the majority
    acknowledged the churn's route changes return the route the cut node held at the cut,
    an older one: the checker says not linearizable and the anomaly classes call every one
    of them a stale read; without them (the clients' linearizable reads only) the topic is
    linearizable."""
    [fault] = outcome.summary["faults"]
    cut = fault["target"]
    note = outcome.summary["notes"][NOTE]
    assert note["process"] == f"{LOCAL_READER}@{cut}"
    assert note["churn_registered"], "the churn did not go back to the route held at the cut"
    ops = list(iter_rows(outcome.run_dir, "operations"))
    local = [r for r in ops if _local(r)]
    assert len(local) == LOCAL_READ_ROUNDS * len({r["topic"] for r in local}) > 0
    assert all(r["node"] == cut and r["outcome"] == "ok" for r in local), local
    first_local_us = min(r["invoke_us"] for r in local)
    for topic in sorted({r["topic"] for r in local}):
        rows = [r for r in ops if r["topic"] == topic]
        acked = [r for r in rows if r["kind"] in WRITE_KINDS and r["outcome"] == "ok"]
        # The write the local reads follow: the churn's last acknowledged one, and the
        # route the cut node held at the cut: the last one acknowledged before it.
        write = max(
            (
                r
                for r in acked
                if r["process"] in CHURN_BROKERS and r["complete_us"] < first_local_us
            ),
            key=lambda r: r["complete_us"],
        )
        held = max(
            (r for r in acked if r["complete_ms"] < fault["start_ms"]),
            key=lambda r: r["complete_us"],
        )
        churned = [r for r in acked if r["process"] in CHURN_BROKERS]
        assert all(cut not in json.loads(r["extra"])["acked_by"] for r in churned), topic
        assert held["value"] not in {r["value"] for r in churned}, "the churn never goes back"
        old_route = write["value"]
        for broker in CHURN_BROKERS:
            old_route = with_broker(old_route, broker, None)
        assert held["value"] == old_route, "the cut node held the route without the churn"
        reads = [r for r in rows if _local(r)]
        assert all(r["invoke_us"] > write["complete_us"] for r in reads)
        assert {r["value"] for r in reads} == {held["value"]}, "the cut node answers the old route"
        assert check_rows(rows).verdict == NOT_LINEARIZABLE, topic
        verdicts = {v.op_id: v.anomaly for v in classify_rows(rows)}
        assert {verdicts[r["op_id"]] for r in reads} == {STALE_READ}, topic
        others = [r for r in rows if r["kind"] == "route_read" and not _local(r)]
        assert STALE_READ not in {verdicts.get(r["op_id"]) for r in others}, topic
        assert check_rows([r for r in rows if not _local(r)]).verdict == LINEARIZABLE, topic
