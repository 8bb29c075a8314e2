"""What one experiment run is asked to do: :class:`ExperimentConfig`.

Plain settings and their checks; which scenarios exist is the runner's business
(:func:`experiments.runner.run_experiment` refuses an unknown one), so the scenarios can see
the config without importing the runner.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from raftstore import vocab
from remoting.consistency import CONSISTENCY_LOCAL

RUNS_DIR_NAME = "runs"
"""An invocation's folder holds ``runs/<run_id>`` (one history per mode and seed) ..."""
REPORT_DIR_NAME = "report"
"""... and ``report/``, the analysis of them all."""


@dataclass(frozen=True, slots=True)
class ExperimentConfig:
    """Everything one run needs; times are compressed (RocketMQ: 30 s / 120 s / 30 s)."""

    scenario: str
    mode: str
    out_dir: Path
    seed: int = 1
    nodes: int = 3
    duration_s: float = 30.0
    brokers: int = 12
    topics: int = 8
    brokers_per_topic: int = 2
    queues: int = 4
    producers: int = 3
    consumer_groups: int = 2
    consumers_per_group: int = 3
    heartbeat_ms: int = 1_000
    expiry_ms: int = 4_000
    poll_ms: int = 1_000
    rebalance_ms: int = 2_000
    sample_ms: int = 250
    scan_interval_s: int = 1
    request_timeout_s: float = 1.0
    send_timeout_ms: int = 1_000
    clock_skew_ms: int = 0
    skew_allowance_ms: int | None = None
    """Raft mode's expiry allowance; None: the scenario's (0, or the gateway's 5 s for
    clock-skew). Eventual mode has none."""
    read_consistency: str = CONSISTENCY_LOCAL
    churn_ms: int = 3_000
    """Inside the fault window two spare brokers holding every topic take turns to
    register and unregister, one step every ``churn_ms`` (0: never), each registration
    with queue counts of its own, so each topic's route changes while the fault lasts in
    both modes, every value once (runner._churn), and the linearizability check has
    writes to order. A topic with fewer than two writes is reported as not exercised."""
    fresh_shares: bool | None = None
    """Every periodic registration round of a broker announces a share (queue counts and
    DataVersion) no earlier round of it did, so every route write has a value of its own
    (``BrokerFleet.fresh_shares``); None: the scenario's choice (on in the nemesis, off
    elsewhere)."""
    schedule_file: str = ""
    """The nemesis scenario: play this stored schedule (a run's schedule.json) instead of
    drawing one from the seed ('': draw)."""
    extra_env: tuple[tuple[str, str], ...] = ()
    """(name, value) pairs added to the environment of every process of the run's
    cluster, after the runner's own. A hook for tests only (a test-only patch on
    PYTHONPATH, tests/experiments/broken_namesrv); no command-line option sets it."""
    run_id: str = ""

    def validate(self) -> None:
        """Refuse settings the runner cannot honour."""
        if self.mode not in vocab.MODES:
            raise ValueError(f"mode must be one of {vocab.MODES}, got {self.mode!r}")
        if self.nodes < 3:
            raise ValueError("experiments need at least 3 nodes (S1 cuts two of them)")
        if self.brokers < self.brokers_per_topic or self.brokers_per_topic < 2:
            raise ValueError("need brokers >= brokers_per_topic >= 2")
        if self.topics < 2 or self.duration_s <= 0:
            raise ValueError("need topics >= 2 and a positive duration")
        if self.expiry_ms <= self.heartbeat_ms:
            raise ValueError("expiry_ms must exceed heartbeat_ms")
        if self.skew_allowance_ms is not None and self.skew_allowance_ms < 0:
            raise ValueError("skew_allowance_ms must be >= 0")
        if self.churn_ms < 0:
            raise ValueError("churn_ms must be >= 0 (0: no route churn)")

    def effective_run_id(self) -> str:
        """The run id: given, or ``<scenario>-<mode>-s<seed>-<unix seconds>``."""
        return self.run_id or f"{self.scenario}-{self.mode}-s{self.seed}-{int(time.time())}"
