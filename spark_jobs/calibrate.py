"""Fit the simulator's timing parameters to real run histories (a Spark job).

``calibrate(spark, root)`` reads every run under ``root`` (the Parquet histories that
``manage.py run_experiment`` writes; simulated runs are skipped) and measures, per mode:

- ``rpc_latency_quantiles_ms``: route-read latency (``complete_ms - invoke_ms`` of
  ``route_read`` answered ``ok``/``not_found``), as 21 quantiles (0 %, 5 %, ..., 100 %);
  the simulator draws each read's latency from them.
- ``register_latency_quantiles_ms``: REGISTER_BROKER latency (``heartbeat`` rows, ``ok``).
- ``commit_latency_quantiles_ms`` (raft): the extra latency of a registration that waited
  for a Raft commit. A raft registration is counted as committed when it is slower than
  the eventual-mode p95 (local handling only), and its commit latency is its latency minus
  the eventual-mode median. Without eventual runs, the raft median and minimum stand in
  for those two (a rougher estimate; ``notes`` says so).
- ``expiry_extra_ms``: the detection delay beyond the broker timeout, from every hard
  broker kill: ``nodes_window_ms`` (kill until no node routes to the broker, the
  ``stale_route_windows`` job) minus the timeout, corrected for the mean heartbeat phase
  and scan wait, ``(scan_interval - heartbeat_interval) / 2``; the mean over kills,
  floored at 0. It holds raft's skew allowance and commit, and eventual's scan jitter.
- ``election_ms`` (raft): per leader kill, from the kill to the last REGISTER_BROKER to a
  surviving node that was *called* before a leader could take it (outcome not ``ok``);
  the mean over leader kills (no failed call: 0).
- ``poll_interval_ms`` / ``heartbeat_interval_ms`` / ``sample_interval_ms``: the median
  gap between a client's consecutive reads of one topic, between a broker's consecutive
  registrations with one node, and between sampling rounds (the real periods, processing
  included).
- ``broker_timeout_ms`` / ``scan_interval_ms``: from the runs' parameters (``expiry_ms``,
  ``scan_interval_s``; simulated runs' names are understood too).

:meth:`Calibration.apply` puts them into a :class:`~experiment_history.simulate.SimConfig`: the
latencies, commit, detection and election always; the protocol periods (poll, heartbeat,
timeout, scan, sampling) only with ``timings=True``, which reproduces the compressed real setup
instead of RocketMQ's 30 s / 120 s defaults. The apply lag of a follower is not
measurable from histories sampled every 250 ms and keeps its default.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window, functions as F

from experiment_history.runs import find_runs, read_meta
from experiment_history.schema import (
    FAULT_KILL_BROKER,
    FAULT_LEADER_KILL,
    KIND_ROUTE_READ,
    OUTCOME_NOT_FOUND,
    OUTCOME_OK,
    PROCESS_FOLLOW_UP,
    PROCESS_SEPARATOR,
)
from experiment_history.simulate import MODE_EVENTUAL, MODE_RAFT, SimConfig
from spark_jobs.dataset import History, load_history
from spark_jobs.metrics import PERCENTILE_ACCURACY, stale_route_windows

KIND_HEARTBEAT = "heartbeat"
"""``experiments.workload.KIND_HEARTBEAT`` (not imported: that module needs the
remoting client, this one runs on plain Spark workers)."""
QUANTILE_POINTS = tuple(i / 20 for i in range(21))
CALIBRATION_VERSION = 1


@dataclass(slots=True)
class ModeCalibration:
    """The measured parameters of one mode; None / [] = not measurable from these runs."""

    rpc_latency_quantiles_ms: list[float] = field(default_factory=list)
    register_latency_quantiles_ms: list[float] = field(default_factory=list)
    commit_latency_quantiles_ms: list[float] = field(default_factory=list)
    expiry_extra_ms: int | None = None
    election_ms: int | None = None
    poll_interval_ms: int | None = None
    heartbeat_interval_ms: int | None = None
    sample_interval_ms: int | None = None
    broker_timeout_ms: int | None = None
    scan_interval_ms: int | None = None
    samples: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Calibration:
    """Per-mode parameters and the runs they came from."""

    modes: dict[str, ModeCalibration]
    runs: list[str]
    version: int = CALIBRATION_VERSION

    def to_json(self) -> str:
        """The calibration as JSON (what ``spark_jobs.cli calibrate`` writes)."""
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Calibration:
        """Read what :meth:`to_json` wrote; ValueError on another shape."""
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("version") != CALIBRATION_VERSION:
            raise ValueError(
                f"not a calibration file of version {CALIBRATION_VERSION}: {str(data)[:80]!r}"
            )
        modes = {mode: ModeCalibration(**values) for mode, values in data["modes"].items()}
        return cls(modes, list(data["runs"]))

    def apply(self, config: SimConfig, *, timings: bool = False) -> SimConfig:
        """``config`` with the measured parameters of its mode; ValueError when the
        calibration has no run of that mode."""
        measured = self.modes.get(config.mode)
        if measured is None:
            raise ValueError(
                f"the calibration has no {config.mode} run (modes: {sorted(self.modes)})"
            )
        changes: dict[str, Any] = {}
        if measured.rpc_latency_quantiles_ms:
            changes["rpc_latency_quantiles_ms"] = tuple(measured.rpc_latency_quantiles_ms)
            changes["rpc_latency_ms"] = round(statistics.median(measured.rpc_latency_quantiles_ms))
        if measured.commit_latency_quantiles_ms:
            changes["commit_latency_quantiles_ms"] = tuple(measured.commit_latency_quantiles_ms)
            changes["commit_latency_ms"] = round(
                statistics.median(measured.commit_latency_quantiles_ms)
            )
        if measured.expiry_extra_ms is not None:
            changes["expiry_extra_ms"] = measured.expiry_extra_ms
        if measured.election_ms is not None:
            changes["election_ms"] = measured.election_ms
        if timings:
            for name in (
                "poll_interval_ms",
                "heartbeat_interval_ms",
                "broker_timeout_ms",
                "scan_interval_ms",
                "sample_interval_ms",
            ):
                value = getattr(measured, name)
                if value is not None:
                    changes[name] = value
        calibrated = replace(config, **changes)
        calibrated.validate()
        return calibrated


def load_calibration(path: Path | str, spark: SparkSession | None = None) -> Calibration:
    """A calibration from a JSON file, or measured now from the runs under a directory
    (``spark`` is then used, or a local session started)."""
    path = Path(path)
    if path.is_file():
        return Calibration.from_json(path.read_text())
    if spark is None:
        from spark_jobs.session import get_spark

        spark = get_spark()
    return calibrate(spark, path)


# ----------------------------------------------------------------------- the job


def calibrate(spark: SparkSession, root: Path | str) -> Calibration:
    """Measure every parameter of the module doc from the real runs under ``root``."""
    real = [d for d in find_runs(root) if not read_meta(d).params.get("simulated")]
    if not real:
        raise FileNotFoundError(f"no real run (run.json without params.simulated) under {root}")
    metas = {read_meta(d).run_id: read_meta(d) for d in real}
    history = load_history(spark, real)
    modes: dict[str, ModeCalibration] = {}
    for mode in sorted({m.mode for m in metas.values()}):
        runs = [m for m in metas.values() if m.mode == mode]
        modes[mode] = _mode_calibration(
            history, mode, [m.run_id for m in runs], [m.params for m in runs]
        )
    _commit_latency(history, modes)
    return Calibration(modes, sorted(metas))


def _quantiles(frame: DataFrame, column: str) -> tuple[list[float], int]:
    """21 quantiles of ``column`` (exact on small data) and the row count."""
    row = frame.agg(
        F.percentile_approx(column, list(QUANTILE_POINTS), PERCENTILE_ACCURACY).alias("q"),
        F.count(F.lit(1)).alias("n"),
    ).first()
    if row is None or not row["n"]:
        return [], 0
    return [float(x) for x in row["q"]], int(row["n"])


def _latency(frame: DataFrame) -> DataFrame:
    return frame.withColumn("latency_ms", F.col("complete_ms") - F.col("invoke_ms"))


def _param(params: dict[str, Any], real: str, simulated: str, scale: float = 1.0) -> int | None:
    if params.get(real) is not None:
        return round(float(params[real]) * scale)
    if params.get(simulated) is not None:
        return round(float(params[simulated]))
    return None


def client_polls(reads: DataFrame) -> DataFrame:
    """The reads clients made on their own: the follow-up reader's bursts right after a
    write (``follow-up-reader`` and ``follow-up-reader@<node>``) are no poll interval."""
    follow_ups = (F.col("process") == PROCESS_FOLLOW_UP) | F.col("process").startswith(
        PROCESS_FOLLOW_UP + PROCESS_SEPARATOR
    )
    return reads.filter(~follow_ups)


def _mode_calibration(
    history: History, mode: str, run_ids: list[str], params: list[dict[str, Any]]
) -> ModeCalibration:
    ops = _latency(history.operations.filter(F.col("run_id").isin(run_ids)))
    reads = ops.filter(
        (F.col("kind") == KIND_ROUTE_READ) & F.col("outcome").isin(OUTCOME_OK, OUTCOME_NOT_FOUND)
    )
    beats = ops.filter((F.col("kind") == KIND_HEARTBEAT) & (F.col("outcome") == OUTCOME_OK))
    result = ModeCalibration()
    result.rpc_latency_quantiles_ms, result.samples["route_reads"] = _quantiles(reads, "latency_ms")
    result.register_latency_quantiles_ms, result.samples["registrations"] = _quantiles(
        beats, "latency_ms"
    )
    result.poll_interval_ms = _median_gap(client_polls(reads), ["run_id", "process", "topic"])
    result.heartbeat_interval_ms = _median_gap(
        ops.filter(F.col("kind") == KIND_HEARTBEAT), ["run_id", "broker", "node"]
    )
    rounds = (
        history.node_states.filter(F.col("run_id").isin(run_ids))
        .select("run_id", F.col("ts_ms").alias("invoke_ms"))
        .distinct()
    )
    result.sample_interval_ms = _median_gap(rounds, ["run_id"])
    timeouts = {_param(p, "expiry_ms", "broker_timeout_ms") for p in params}
    scans = {_param(p, "scan_interval_s", "scan_interval_ms", 1000.0) for p in params}
    beats_ms = {_param(p, "heartbeat_ms", "heartbeat_interval_ms") for p in params}
    result.broker_timeout_ms = _single(timeouts, "broker timeout", result)
    result.scan_interval_ms = _single(scans, "scan interval", result)
    heartbeat_ms = _single(beats_ms, "heartbeat interval", result)
    result.expiry_extra_ms, result.samples["broker_kills"] = _expiry_extra(
        history, run_ids, result.broker_timeout_ms, result.scan_interval_ms, heartbeat_ms
    )
    if mode == MODE_RAFT:
        result.election_ms, result.samples["leader_kills"] = _election(history, run_ids)
    return result


def _single(values: set[int | None], what: str, result: ModeCalibration) -> int | None:
    known = sorted(v for v in values if v is not None)
    if len(known) > 1:
        result.notes.append(f"runs disagree on the {what} ({known}); the median is used")
    return round(statistics.median(known)) if known else None


def _median_gap(frame: DataFrame, keys: list[str]) -> int | None:
    order = Window.partitionBy(*keys).orderBy("invoke_ms")
    gaps = frame.select(
        (F.col("invoke_ms") - F.lag("invoke_ms").over(order)).alias("gap_ms")
    ).filter(F.col("gap_ms").isNotNull())
    row = gaps.agg(F.percentile_approx("gap_ms", 0.5, PERCENTILE_ACCURACY).alias("m")).first()
    return None if row is None or row["m"] is None else int(row["m"])


def _expiry_extra(
    history: History,
    run_ids: list[str],
    timeout_ms: int | None,
    scan_ms: int | None,
    heartbeat_ms: int | None,
) -> tuple[int | None, int]:
    if timeout_ms is None:
        return None, 0
    subset = History(
        *(
            getattr(history, n).filter(F.col("run_id").isin(run_ids))
            for n in ("operations", "writes", "faults", "node_states")
        )
    )
    windows = [
        r["nodes_window_ms"]
        for r in stale_route_windows(subset)
        .filter(F.col("fault_kind") == FAULT_KILL_BROKER)
        .select("nodes_window_ms")
        .collect()
        if r["nodes_window_ms"] is not None
    ]
    if not windows:
        return None, 0
    correction = ((scan_ms or 0) - (heartbeat_ms or 0)) / 2
    extra = statistics.fmean(windows) - timeout_ms - correction
    return max(0, round(extra)), len(windows)


def _election(history: History, run_ids: list[str]) -> tuple[int | None, int]:
    kills = history.faults.filter(
        F.col("run_id").isin(run_ids) & (F.col("kind") == FAULT_LEADER_KILL)
    ).select(
        "run_id",
        F.col("target").alias("victim"),
        "start_ms",
        F.when(F.col("end_ms") >= F.col("start_ms"), F.col("end_ms"))
        .otherwise(F.lit(2**62))
        .alias("end_ms"),
    )
    failed = history.operations.filter(
        (F.col("kind") == KIND_HEARTBEAT) & (F.col("outcome") != OUTCOME_OK)
    ).select("run_id", "node", "invoke_ms")
    per_kill = (
        kills.join(failed, "run_id", "left")
        .filter(
            F.col("invoke_ms").isNull()
            | (
                (F.col("node") != F.col("victim"))
                & (F.col("invoke_ms") >= F.col("start_ms"))
                & (F.col("invoke_ms") < F.col("end_ms"))
            )
        )
        .groupBy("run_id", "start_ms")
        .agg(F.coalesce(F.max(F.col("invoke_ms") - F.col("start_ms")), F.lit(0)).alias("election"))
        .collect()
    )
    # A kill with no failed call at all still counts (0): nothing had to wait.
    counted = {(r["run_id"], r["start_ms"]): int(r["election"]) for r in per_kill}
    for row in kills.select("run_id", "start_ms").collect():
        counted.setdefault((row["run_id"], row["start_ms"]), 0)
    if not counted:
        return None, 0
    return round(statistics.fmean(counted.values())), len(counted)


def _commit_latency(history: History, modes: dict[str, ModeCalibration]) -> None:
    raft = modes.get(MODE_RAFT)
    if raft is None:
        return
    beats = _latency(
        history.operations.filter(
            (F.col("kind") == KIND_HEARTBEAT)
            & (F.col("outcome") == OUTCOME_OK)
            & (F.col("mode") == MODE_RAFT)
        )
    )
    eventual = modes.get(MODE_EVENTUAL)
    local = eventual.register_latency_quantiles_ms if eventual else []
    if local:
        threshold, baseline = local[19], local[10]  # eventual p95, p50
    elif raft.register_latency_quantiles_ms:
        threshold, baseline = (
            raft.register_latency_quantiles_ms[10],
            raft.register_latency_quantiles_ms[0],
        )
        raft.notes.append(
            "no eventual run: committed registrations are those above the raft "
            "median, their commit latency is measured from the raft minimum"
        )
    else:
        return
    committed = beats.filter(F.col("latency_ms") > threshold).select(
        (F.col("latency_ms") - F.lit(baseline)).alias("commit_ms")
    )
    raft.commit_latency_quantiles_ms, raft.samples["commits"] = _quantiles(committed, "commit_ms")
