"""Raft expiries enter the history as the scanning node reports them.

One short raft broker-kill run (about 30 s with boot and tear-down): the leader's scan
expires the killed broker and NODE_STATUS reports it; the harness records one expire
write per topic of that broker at the scan's window, which the prober then never infers
a second time.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from experiment_history.runs import iter_rows
from experiment_history.schema import KIND_EXPIRE, PROCESS_RAFT
from experiments.config import ExperimentConfig
from experiments.runner import run_experiment
from gateway.expiry_reports import EXPIRY_REPORTS_MAX, ExpiryReports
from raftstore.results import BrokerAddrInfo


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
    expiries = [r for r in rows if r["kind"] == KIND_EXPIRE]
    reported = [r for r in expiries if "reported_by" in json.loads(r["extra"])]
    assert reported, expiries
    for row in reported:
        assert row["process"] == PROCESS_RAFT and row["outcome"] == "ok"
        assert row["broker"] == kill["target"]
        assert kill["start_ms"] * 1_000 <= row["invoke_us"] <= row["complete_us"]
        assert kill["target"] not in row["value"]
    # Reported or (when the prober saw the change first) inferred, never both.
    per_topic = collections.Counter(r["topic"] for r in expiries)
    assert set(per_topic.values()) == {1}, per_topic
