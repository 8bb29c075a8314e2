"""S6 in raft mode on real clusters: the removal is checked, and what the removed node then
answers is recorded; a removal the members refuse stops the run with an error.

One short run (about 40 s with boot and tear-down, 10 s of it the refused second removal).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from experiment_history.runs import iter_rows
from experiments.config import ExperimentConfig
from experiments.context import ExperimentContext
from experiments.faults import FaultError
from experiments.runner import RunOutcome, run_experiment
from experiments.scenarios import SCENARIOS, FaultSpec, MembershipChange, remove_raft_member

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SMALL = {"brokers": 4, "topics": 2, "producers": 1, "consumer_groups": 1, "seed": 6}


class RemovedTwice(MembershipChange):
    """S6, then the same removal again at once: the members refuse it (the node is gone),
    and the error a real s6 run would stop with is kept in the run's notes."""

    name = "s6-removed-twice"

    async def inject(self, ctx: ExperimentContext) -> list[FaultSpec]:
        specs = await super().inject(ctx)
        try:
            await remove_raft_member(ctx, specs[0].target)
        except FaultError as exc:
            ctx.notes["second_removal"] = str(exc)
        return specs


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunOutcome]:
    out = tmp_path_factory.mktemp("s6")
    config = ExperimentConfig(
        scenario=RemovedTwice.name,
        mode="raft",
        out_dir=out,
        duration_s=8.0,
        run_id="s6-raft",
        **SMALL,
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(SCENARIOS, RemovedTwice.name, RemovedTwice)
        yield run_experiment(config)


def _fault(outcome: RunOutcome) -> dict[str, Any]:
    [fault] = outcome.summary["faults"]
    return fault


def test_the_removal_is_checked_against_the_remaining_members(outcome: RunOutcome) -> None:
    fault = _fault(outcome)
    removed = fault["target"]
    assert fault["removed_via"] in outcome.meta.nodes and fault["removed_via"] != removed
    cluster = json.loads((outcome.run_dir / "cluster" / "cluster.json").read_text())
    raft_addrs = {node["id"]: node["raft_addr"] for node in cluster["nodes"]}
    assert sorted(fault["members_after"]) == sorted(
        addr for node, addr in raft_addrs.items() if node != removed
    )


def test_the_removed_node_answer_to_a_route_query_is_recorded(outcome: RunOutcome) -> None:
    answer = _fault(outcome)["removed_node_answer"]
    assert answer["topic"] == "topic-000"
    assert answer["outcome"] in ("ok", "not_found", "error", "timeout")
    assert answer["outcome"] != "ok" or answer["brokers"], "an ok answer names its brokers"
    assert answer["raft"] is not None and "state" in answer["raft"]
    [row] = list(iter_rows(outcome.run_dir, "faults"))
    assert '"removed_node_answer"' in row["detail"]


def test_a_removal_no_member_performs_is_an_error(outcome: RunOutcome) -> None:
    """Raised from the scenario's fault, this error ends a run (the runner catches none)."""
    removed = _fault(outcome)["target"]
    error = outcome.summary["notes"]["second_removal"]
    assert error.startswith(f"s6: no member removed {removed} ")
    assert "is not a member" in error
