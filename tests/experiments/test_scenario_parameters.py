"""What the scenarios are asked to do, without a cluster: the two clock skews and the
storm topics that are checked."""

from __future__ import annotations

from pathlib import Path

from experiments.config import ExperimentConfig
from experiments.runner import effective_skew_allowance
from experiments.scenarios import (
    STORM_BROKERS,
    ClockSkew,
    ClockSkewWithinAllowance,
    RegistrationStorm,
    scenario,
)
from raftstore.raft.settings import DEFAULT_SKEW_ALLOWANCE_MS

EXPIRY_MS = ExperimentConfig(scenario="clock-skew", mode="raft", out_dir=Path(".")).expiry_ms


def test_clock_skew_goes_past_raft_allowance_by_default_and_the_other_run_stays_under() -> None:
    above = ClockSkew().default_skew_ms(DEFAULT_SKEW_ALLOWANCE_MS, EXPIRY_MS)
    below = ClockSkewWithinAllowance().default_skew_ms(DEFAULT_SKEW_ALLOWANCE_MS, EXPIRY_MS)
    assert below < DEFAULT_SKEW_ALLOWANCE_MS < above
    # Past the allowance by a whole expiry: a broker heard from just now looks expired.
    assert above - DEFAULT_SKEW_ALLOWANCE_MS >= EXPIRY_MS


def test_both_clock_skew_runs_keep_the_gateway_allowance_they_test(tmp_path: Path) -> None:
    for name in ("clock-skew", "clock-skew-within-allowance"):
        config = ExperimentConfig(scenario=name, mode="raft", out_dir=tmp_path)
        assert effective_skew_allowance(config) is None, name
    assert scenario("clock-skew-within-allowance").name == "clock-skew-within-allowance"


def test_the_storm_topics_checked_belong_to_storm_brokers() -> None:
    topics = RegistrationStorm.fault_topics
    assert len(topics) == STORM_BROKERS // 2
    assert all(t.startswith("storm-") and t.endswith("-t0000") for t in topics)
    assert len(set(topics)) == len(topics)
