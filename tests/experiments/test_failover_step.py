"""The nemesis' ``kill_master`` step: how the schedule draws it (fast, no cluster), and
one short raft run that plays it with linearizable reads (about 40 s with boot, tear-down
and the Spark job)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiment_history.runs import iter_rows
from experiment_history.schema import (
    KIND_EXPIRE,
    KIND_REGISTER,
    KIND_ROUTE_READ,
    ORIGIN_CLIENT,
    ORIGIN_NODE,
    PROCESS_RAFT,
    parse_route,
)
from experiments.config import ExperimentConfig
from experiments.failover import FAILOVER_BROKER, FAILOVER_TOPIC
from experiments.nemesis import (
    KILL_BROKER,
    KILL_MASTER,
    RAFT_ONLY,
    SKIPPED_IN_EVENTUAL,
    Schedule,
    Step,
    conflicts,
    draw_schedule,
    for_mode,
    kill_master_min_s,
    schedule_json,
)
from experiments.runner import run_experiment
from remoting.consistency import CONSISTENCY_LINEARIZABLE

NODES = ["n1", "n2", "n3"]
BROKERS = [f"broker-{i:03d}" for i in range(12)]
EXPIRY_MS = 4_000
SEEDS = range(1, 41)


def _kill_master_steps(seed: int) -> list:
    schedule = draw_schedule(seed, NODES, BROKERS, 120.0, EXPIRY_MS)
    return [s for s in schedule.steps if s.kind == KILL_MASTER]


def test_seeds_draw_kill_master_steps_on_the_failover_group_long_enough_to_elect() -> None:
    steps = [s for seed in SEEDS for s in _kill_master_steps(seed)]
    assert len(steps) >= 10, "a long run draws the new kind like the others"
    for step in steps:
        assert step.target == FAILOVER_BROKER
        assert step.touches == (f"broker:{FAILOVER_BROKER}",)
        assert step.duration_s >= kill_master_min_s(EXPIRY_MS) == 7.0


def test_the_same_seed_draws_the_same_kill_master_steps() -> None:
    assert _kill_master_steps(7) == _kill_master_steps(7)


def test_kill_master_steps_never_overlap_each_other_and_end_before_the_quiet_phase() -> None:
    for seed in SEEDS:
        schedule = draw_schedule(seed, NODES, BROKERS, 120.0, EXPIRY_MS)
        assert conflicts(schedule) == []
        for step in schedule.steps:
            assert step.end_s <= schedule.quiet_from_s
            if step.kind == KILL_BROKER:
                assert step.target != FAILOVER_BROKER


def test_without_a_failover_group_no_kill_master_is_drawn() -> None:
    kinds = {
        s.kind
        for seed in SEEDS
        for s in draw_schedule(seed, NODES, BROKERS, 120.0, EXPIRY_MS, failover_groups=()).steps
    }
    assert KILL_MASTER not in kinds


def test_eventual_mode_skips_kill_master_for_want_of_failover() -> None:
    assert KILL_MASTER in RAFT_ONLY
    seed = next(s for s in SEEDS if _kill_master_steps(s))
    schedule = draw_schedule(seed, NODES, BROKERS, 120.0, EXPIRY_MS)
    eventual = for_mode(schedule, "eventual")
    skipped = [s for s in eventual.steps if s.kind == KILL_MASTER]
    assert skipped and all(s.skipped == SKIPPED_IN_EVENTUAL for s in skipped)
    raft = for_mode(schedule, "raft")
    assert all(not s.skipped for s in raft.steps if s.kind == KILL_MASTER)


def test_a_run_too_short_for_an_election_draws_no_kill_master() -> None:
    # 12 s: the quiet phase (two expiries and 2 s: 10 s) starts at 2 s, so no 7 s step
    # fits after the first step at 1.2 s.
    for seed in SEEDS:
        schedule = draw_schedule(seed, NODES, BROKERS, 12.0, EXPIRY_MS)
        assert all(s.kind != KILL_MASTER for s in schedule.steps)


# ---------------------------------------------------------------------- one real run

OLD_MASTER = "127.0.0.1:10800"
SLAVE = "127.0.0.1:10802"
ONE_KILL = Schedule(
    seed=0,
    duration_s=22.0,
    quiet_from_s=12.0,
    steps=(Step(0, 1.0, KILL_MASTER, FAILOVER_BROKER, 7.0, (f"broker:{FAILOVER_BROKER}",)),),
)
"""The master dies at 1 s; with a 4 s expiry the leader's scan elects the slave a few
seconds later; at 8 s the old master starts again and rejoins as the slave."""


def _masters(value: str) -> set[str]:
    return {i.master_addr for i in parse_route(value) if i.broker == FAILOVER_BROKER}


@pytest.mark.integration
@pytest.mark.slow
def test_a_killed_master_is_replaced_by_its_slave_and_no_client_goes_back_to_it(
    tmp_path: Path,
) -> None:
    from spark_jobs.dataset import load_history
    from spark_jobs.session import get_spark
    from spark_jobs.two_masters import two_masters_by_run

    stored = tmp_path / "stored.json"
    stored.write_text(schedule_json(ONE_KILL))
    run = run_experiment(
        ExperimentConfig(
            scenario="nemesis",
            mode="raft",
            out_dir=tmp_path,
            seed=3,
            duration_s=ONE_KILL.duration_s,
            brokers=2,
            topics=2,
            producers=2,
            consumer_groups=1,
            read_consistency=CONSISTENCY_LINEARIZABLE,
            schedule_file=str(stored),
            run_id="failover",
        )
    )
    (fault,) = [f for f in iter_rows(run.run_dir, "faults") if f["kind"] == KILL_MASTER]
    assert json.loads(fault["detail"])["killed"] == OLD_MASTER
    ops = list(iter_rows(run.run_dir, "operations"))
    mine = [o for o in ops if o["topic"] == FAILOVER_TOPIC]
    (election,) = [o for o in mine if o["kind"] == KIND_EXPIRE]
    assert (election["outcome"], election["origin"], election["process"]) == (
        "ok",
        ORIGIN_NODE,
        PROCESS_RAFT,
    )
    assert _masters(election["value"]) == {SLAVE}
    assert election["invoke_us"] >= fault["start_ms"] * 1_000 - 1_000
    # The new master announces fresh queues: a client write no earlier write had.
    fresh = [o for o in mine if o["kind"] == KIND_REGISTER and o["origin"] == ORIGIN_CLIENT]
    assert fresh and all(_masters(o["value"]) == {SLAVE} for o in fresh)
    values = [o["value"] for o in mine if o["kind"] in (KIND_EXPIRE, KIND_REGISTER)]
    assert len(values) == len(set(values))
    reads = [o for o in mine if o["kind"] == KIND_ROUTE_READ and o["outcome"] == "ok"]
    assert any(_masters(r["value"]) == {SLAVE} for r in reads)
    assert _masters(max(reads, key=lambda r: r["invoke_us"])["value"]) == {SLAVE}
    assert run.meta.timings["inferred_writes"] == 0
    assert [e["new_master"] for e in run.summary["notes"]["failover"]["elections"]] == [SLAVE]
    history = load_history(get_spark(), run.run_dir.parent)
    (row,) = [r.asDict() for r in two_masters_by_run(history).collect()]
    assert row["groups_checked"] >= 2 and row["two_masters"] == 0, row
