"""A discrete-event model of both NameServer designs, writing histories in the run schema:
what it models, and every knob of it (:class:`SimConfig`).

No processes and no sockets: brokers heart-beat every 30 s to each NameServer node over
links that a scenario may cut or make lossy, nodes scan for silent brokers, and clients
poll a random node every 30 s, send through the MQFaultStrategy model and (consumers)
rebalance with AllocateMessageQueueAveragely every 20 s.

- ``eventual``: every node keeps its own live table, registers a broker when it hears it
  and expires it on its own scan (120 s of silence), exactly as the original.
- ``raft``: one replicated table. A heartbeat heard by any node that reaches the leader
  refreshes the replicated last-heard time; only the leader scans; a change commits after
  ``commit_latency_ms`` and a follower applies it ``apply_lag_ms`` later. While the leader
  is down nothing commits until ``election_ms`` has passed.

Every write's ``origin`` is ``node`` (the node's own change, or the leader's commit) but
the initial ones at time 0, the harness's (``harness``); other operations have none.

The parameters are documented in docs/EXPERIMENTS.md "Simulation"; the timing ones can be
measured from real runs (``spark_jobs.calibrate``; ``python -m spark_jobs.cli simulate
--calibrate-from``, the command line that runs this model).
Everything is driven by one seeded RNG (latencies by a second one) and a heap ordered by
(time, sequence), so a seed reproduces a history exactly. Rows stream to
Parquet in chunks, so memory holds the model state, not the history.

The model is cut by the state each part keeps, one module each:
``simulate_run`` (:class:`~experiment_history.simulate_run.Simulation`, the driver: builds
the parts, schedules the events, dispatches them; and :func:`simulate`), ``simulate_events``
(the clock and the latency draws), ``simulate_world`` (the cluster's layout and what is
really up), ``simulate_tables`` (the nodes' route tables, one class per mode),
``simulate_faults`` (what the scenario breaks), ``simulate_workload`` (the clients) and
``simulate_rows`` (the history rows). This module is the bottom of them: it alone imports
``raftstore.vocab`` (the one import across the package layers, see pyproject.toml), so the
others take the modes' and scenarios' words from here.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from raftstore import vocab

MODE_EVENTUAL = vocab.MODE_EVENTUAL
MODE_RAFT = vocab.MODE_RAFT
SCENARIO_NONE = "none"
SCENARIO_ASYMMETRIC = "asymmetric_partition"
SCENARIO_BROKER_KILL = "broker_kill"
SCENARIO_NAMESRV_RESTART = "namesrv_restart"
SCENARIOS = (SCENARIO_NONE, SCENARIO_ASYMMETRIC, SCENARIO_BROKER_KILL, SCENARIO_NAMESRV_RESTART)


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Every knob of the model; times in ms of simulated time."""

    brokers: int = 30
    topics: int = 100
    reads: int = 2_000
    mode: str = MODE_EVENTUAL
    seed: int = 1
    scenario: str = SCENARIO_ASYMMETRIC
    nodes: int = 3
    brokers_per_topic: int = 2
    queues_per_broker: int = 4
    duration_ms: int = 600_000
    heartbeat_interval_ms: int = 30_000
    broker_timeout_ms: int = 120_000
    scan_interval_ms: int = 5_000
    poll_interval_ms: int = 30_000
    rebalance_interval_ms: int = 20_000
    rpc_latency_ms: int = 2
    request_timeout_ms: int = 3_000
    fault_start_ms: int = 60_000
    fault_end_ms: int = 420_000
    fault_share: float = 0.01
    link_loss: float = 0.0
    commit_latency_ms: int = 3
    apply_lag_ms: int = 2
    election_ms: int = 2_000
    topics_per_client: int = 10
    sends_per_poll: int = 1
    consumer_groups: int = 4
    consumers_per_group: int = 3
    sample_topics: int = 200
    sample_interval_ms: int = 5_000
    chunk_rows: int = 50_000
    rpc_latency_quantiles_ms: tuple[float, ...] = ()
    """Route-read latency as evenly spaced quantiles (0 %, ..., 100 %), each read drawing
    from them; empty: every read takes ``rpc_latency_ms``."""
    commit_latency_quantiles_ms: tuple[float, ...] = ()
    """Raft commit latency the same way; empty: ``commit_latency_ms``."""
    expiry_extra_ms: int = 0
    """Detection delay beyond ``broker_timeout_ms`` (raft's skew allowance and the like)."""
    calibration_source: str = ""
    """Where the calibrated values came from (``spark_jobs.calibrate``), for run.json."""

    def validate(self) -> None:
        """Refuse settings the model cannot run."""
        if self.mode not in (MODE_EVENTUAL, MODE_RAFT):
            raise ValueError(f"unknown mode {self.mode!r}")
        if self.scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario {self.scenario!r}")
        if self.nodes < 1 or self.brokers < self.brokers_per_topic or self.topics < 1:
            raise ValueError("need nodes >= 1, topics >= 1, brokers >= brokers_per_topic")
        if not 0 <= self.fault_start_ms <= self.fault_end_ms <= self.duration_ms:
            raise ValueError("need 0 <= fault_start_ms <= fault_end_ms <= duration_ms")
        for name in ("rpc_latency_quantiles_ms", "commit_latency_quantiles_ms"):
            points = getattr(self, name)
            if points and (
                len(points) < 2
                or points[0] < 0
                or any(b < a for a, b in itertools.pairwise(points))
            ):
                raise ValueError(
                    f"{name} must be at least 2 non-negative, non-decreasing values, got {points!r}"
                )
        if self.expiry_extra_ms < 0 or self.election_ms < 0:
            raise ValueError("expiry_extra_ms and election_ms must be >= 0")
        if (
            min(
                self.heartbeat_interval_ms,
                self.scan_interval_ms,
                self.poll_interval_ms,
                self.rebalance_interval_ms,
                self.sample_interval_ms,
            )
            <= 0
        ):
            raise ValueError("every interval must be positive")
