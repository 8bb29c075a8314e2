"""The plain-function core of ``manage.py run_experiment``.

:func:`run_experiment` boots a cluster with ``localcluster.launcher`` (real gateways,
Redis, Celery scans, web processes on loopback, free ports, under ``out/<run_id>/cluster``),
runs the workload and the scenario's fault on a compressed timeline, records the history
under ``out/<run_id>/`` with :class:`experiment_history.runs.HistoryWriter`, and tears the
cluster down whatever happens. Timeline (fractions of ``duration_s``, after warm-up)::

    0 ........ fault_at (0.25) ........ heal_at (0.65) ........ 1.0
    recording    inject                  heal (if the fault heals)   stop
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from experiment_history.runs import HistoryWriter, RunMeta
from experiment_history.schema import KIND_REGISTER, KIND_UNREGISTER, PROCESS_RAFT
from experiment_reports.report import markdown_verdicts
from experiments.config import ExperimentConfig
from experiments.context import ExperimentContext
from experiments.faults import ClusterHandle, ProxyMesh, RaftMesh
from experiments.follow_up import FollowUpReader
from experiments.progress import Progress, silent
from experiments.scenarios import FaultSpec, Nemesis, Scenario, scenario
from experiments.traffic import ClientTiming, ConsumerGroup, Prober, Producer
from experiments.workload import (
    CLUSTER_NAME,
    BrokerFleet,
    ReadResult,
    Recorder,
    SimBroker,
    make_brokers,
    now_ms,
)
from localcluster import launcher
from localcluster.demo import topic_table
from raftstore import vocab

MODES = vocab.MODES
CHURN_BROKER = "broker-churn"
CHURN_BROKER_B = "broker-churn-b"
CHURN_BROKERS = (CHURN_BROKER, CHURN_BROKER_B)
"""The route churn's two spare brokers, registered and unregistered in turn (``_churn``)."""
CHURN_BROKER_PORT = 10_700
"""The first churn broker's port; the second one's is the next but one."""
FAULT_AT_FRACTION = 0.25
HEAL_AT_FRACTION = 0.65
WARMUP_TIMEOUT_S = 30.0
CLUSTER_DIR_NAME = "cluster"


@dataclass(slots=True)
class RunOutcome:
    """What a finished run produced."""

    run_id: str
    run_dir: Path
    meta: RunMeta
    summary: dict[str, Any]


def _dialer(ctx_ref: list[ExperimentContext]) -> Callable[[str, str], str]:
    """Broker -> node address: through the broker's lane proxy when it has one."""

    def dial(broker: str, node: str) -> str:
        ctx = ctx_ref[0]
        for lane, names in ctx.lane_brokers.items():
            if broker in names:
                with contextlib.suppress(KeyError):
                    return ctx.mesh.addr(lane, node)
        return ctx.nodes[node]

    return dial


def effective_skew_allowance(config: ExperimentConfig) -> int | None:
    """The raft gateways' --skew-allowance-ms: the config's, else the scenario's (None:
    the gateway's default)."""
    if config.skew_allowance_ms is not None:
        return config.skew_allowance_ms
    return scenario(config.scenario).skew_allowance_ms


def plan_cluster(config: ExperimentConfig, run_dir: Path) -> launcher.ClusterPlan:
    """The launcher plan of one run: free ports, and in raft mode the skew allowance."""
    plan = launcher.plan_ports(
        run_dir / CLUSTER_DIR_NAME,
        nodes=config.nodes,
        mode=config.mode,
        base_port=0,
        web_base_port=0,
        internal_base_port=0,
        redis_port=0,
        **({"raft_base_port": 0} if config.mode == "raft" else {}),
    )
    if config.mode != "raft":
        return plan
    allowance = effective_skew_allowance(config)
    ids = [n.node_id for n in plan.nodes]
    return launcher.with_gateway_options(
        plan,
        skew_allowance_ms=None if allowance is None else dict.fromkeys(ids, allowance),
    )


def boot_cluster(config: ExperimentConfig, plan: launcher.ClusterPlan) -> ClusterHandle:
    """Start the planned cluster (blocking; the launcher's functions)."""
    extra_env = {"NAMESRV_SCAN_INTERVAL_S": str(max(1, math.ceil(config.scan_interval_s)))}
    # A test's additions (ExperimentConfig.extra_env); restarts reuse them (ClusterHandle).
    extra_env.update(config.extra_env)
    summary = launcher.cluster_up(plan, extra_env=extra_env)
    return ClusterHandle(plan=plan, summary=summary, extra_env=extra_env)


def run_experiment(config: ExperimentConfig, progress: Progress | None = None) -> RunOutcome:
    """Boot, drive, record, tear down; returns the run's outcome (see the module doc).
    ``progress`` hears of every phase (nothing is printed without one)."""
    config.validate()
    scenario(config.scenario)  # an unknown name is refused before anything is written
    run_id = config.effective_run_id()
    run_dir = Path(config.out_dir).resolve() / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    return asyncio.run(_run(config, run_id, run_dir, progress or silent()))


async def _run(
    config: ExperimentConfig, run_id: str, run_dir: Path, progress: Progress
) -> RunOutcome:
    # The cluster boots in a thread so that a Raft proxy mesh (in this loop) already
    # forwards while the gateways elect their first leader.
    the_scenario = scenario(config.scenario)
    raft_mesh = RaftMesh() if config.mode == "raft" and the_scenario.raft_proxied else None
    try:
        plan = plan_cluster(config, run_dir)
        if raft_mesh is not None:
            plan = launcher.with_gateway_options(plan, raft_dial=await raft_mesh.build(plan))
        with progress.phase(f"cluster boot ({config.mode}, {config.nodes} nodes)"):
            cluster = await asyncio.to_thread(boot_cluster, config, plan)
        meta = RunMeta(
            run_id=run_id,
            scenario=config.scenario,
            mode=config.mode,
            seed=config.seed,
            nodes=cluster.node_ids,
            params={k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(config).items()}
            | {
                "effective_skew_allowance_ms": (
                    effective_skew_allowance(config) if config.mode == "raft" else 0
                ),
                "raft_proxied": raft_mesh is not None,
            },
        )
        writer = HistoryWriter(run_dir, meta)
        try:
            summary = await _drive(config, the_scenario, cluster, writer, raft_mesh, progress)
        finally:
            with progress.phase("teardown"):
                await asyncio.to_thread(launcher.cluster_down, cluster.run_dir)
                writer.close()
    finally:
        if raft_mesh is not None:
            await raft_mesh.close()
    meta.timings.update(summary.pop("timings", {}))
    (run_dir / "run.json").write_text(meta.to_json())
    return RunOutcome(run_id, run_dir, meta, summary)


async def _drive(
    config: ExperimentConfig,
    the_scenario: Scenario,
    cluster: ClusterHandle,
    writer: HistoryWriter,
    raft_mesh: RaftMesh | None,
    progress: Progress,
) -> dict[str, Any]:
    rng = random.Random(config.seed)
    recorder = Recorder(writer)
    topics = [f"topic-{i:03d}" for i in range(config.topics)]
    brokers = make_brokers(
        config.brokers, topics, config.brokers_per_topic, config.queues, rng, cluster.node_ids
    )
    if config.churn_ms:
        brokers.extend(
            _churn_broker(name, i, brokers[0], topics, config.queues)
            for i, name in enumerate(CHURN_BROKERS)
        )
    ctx_ref: list[ExperimentContext] = []
    fleet = BrokerFleet(
        brokers,
        _dialer(ctx_ref),
        recorder,
        heartbeat_ms=config.heartbeat_ms,
        expiry_ms=config.expiry_ms,
        timeout_s=config.request_timeout_s,
        rng=random.Random(rng.random()),
    )
    ctx = ExperimentContext(
        config,
        cluster,
        ProxyMesh(),
        fleet,
        recorder,
        rng,
        topics + list(the_scenario.subset_topics) + list(the_scenario.fault_topics),
        cluster.admin_client(),
        raft_mesh=raft_mesh,
        progress=progress,
    )
    ctx_ref.append(ctx)
    try:
        return await _run_phases(ctx, the_scenario)
    finally:
        await fleet.close()
        await ctx.admin.close()
        await ctx.mesh.close()
        for close in ctx.closers:
            await close()
        await cluster.close()


async def _setup_lanes(ctx: ExperimentContext, the_scenario: Scenario) -> None:
    ctx.lane_brokers = the_scenario.lanes(ctx)
    for lane in ctx.lane_brokers:
        targets = the_scenario.lane_targets(ctx, lane)
        nodes = {n: a for n, a in ctx.nodes.items() if targets is None or n in targets}
        await ctx.mesh.lane(lane, nodes)


async def _warm_up(ctx: ExperimentContext, prober: Prober) -> dict[tuple[str, str], ReadResult]:
    """Register every broker and wait until every node answers the same full routes."""
    ctx.fleet.start()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WARMUP_TIMEOUT_S
    while True:
        answers = await prober.sample()
        if _agreed(ctx, answers):
            return answers
        if loop.time() > deadline:
            wrong = _disagreement(ctx, answers)
            raise RuntimeError(f"warm-up: the nodes did not agree in time: {wrong}")
        await asyncio.sleep(ctx.config.sample_ms / 1000)


def _agreed(ctx: ExperimentContext, answers: dict[tuple[str, str], ReadResult]) -> bool:
    return not _disagreement(ctx, answers)


def _disagreement(ctx: ExperimentContext, answers: dict[tuple[str, str], ReadResult]) -> list[str]:
    """Every (node, topic) whose answer differs from the expected route."""
    wrong = []
    for topic in ctx.topics:
        expected = ctx.truth_of(topic)
        for node in ctx.cluster.node_ids:
            seen = answers.get((node, topic))
            if seen is None or seen.value != expected:
                got = "no answer" if seen is None else repr(seen.value)
                wrong.append(f"{node}/{topic}: {got} != {expected!r}")
    return wrong


def _clients(ctx: ExperimentContext, timing: ClientTiming) -> list[Any]:
    cfg, nodes = ctx.config, ctx.nodes
    clients: list[Any] = [
        Producer(
            f"producer-{i}",
            ctx.topics,
            nodes,
            ctx.recorder,
            timing,
            random.Random(ctx.rng.random()),
            ctx.fleet,
            cfg.seed * 1_000_003 + i,
        )
        for i in range(cfg.producers)
    ]
    for g in range(cfg.consumer_groups):
        topic = ctx.topics[g % len(ctx.topics)]
        group = ConsumerGroup(
            f"cg{g}", topic, cfg.consumers_per_group, nodes, ctx.recorder, timing, ctx.rng
        )
        clients.extend(group.consumers)
    for topic in (t for t in ctx.topics if t not in ctx.topics[: cfg.consumer_groups]):
        if topic in ctx.truth_overrides or not ctx.brokers_of(topic):
            group = ConsumerGroup(
                f"cg-{topic}", topic, cfg.consumers_per_group, nodes, ctx.recorder, timing, ctx.rng
            )
            clients.extend(group.consumers)
    return clients


async def _run_phases(ctx: ExperimentContext, the_scenario: Scenario) -> dict[str, Any]:
    cfg = ctx.config
    await _setup_lanes(ctx, the_scenario)
    await the_scenario.prepare(ctx)
    for topic in the_scenario.subset_topics:
        ctx.truth_overrides[topic] = ""
    process = (lambda node: PROCESS_RAFT) if ctx.raft else (lambda node: f"ns-{node}")
    prober = Prober(
        ctx.nodes,
        ctx.topics,
        ctx.recorder,
        ctx.registers,
        sample_ms=cfg.sample_ms,
        timeout_s=cfg.request_timeout_s,
        process=process,
        before_round=ctx.journals.collect,
        journal_read_since=ctx.journals_read_since,
        views=None if ctx.raft else ctx.fleet.views,
    )
    ctx.closers.append(prober.close)
    warm_start = now_ms()
    with ctx.progress.phase(f"warm-up ({cfg.brokers} brokers register, every node agrees)"):
        answers = await _warm_up(ctx, prober)
    start = ctx.recorder.start()
    prober.baseline(answers, warm_start)
    ctx.record_truth("", KIND_REGISTER)
    ctx.fleet.record_round = ctx.broker_write
    timing = ClientTiming(
        cfg.poll_ms,
        cfg.rebalance_ms,
        cfg.send_timeout_ms,
        cfg.request_timeout_s,
        cfg.read_consistency,
    )
    clients = _clients(ctx, timing)
    follow_up = FollowUpReader(
        ctx.nodes, ctx.recorder, cfg.request_timeout_s, cfg.read_consistency, ctx.registers
    )
    ctx.follow_up = follow_up
    ctx.closers.append(follow_up.close)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(c.run(stop)) for c in clients]
    tasks.append(loop.create_task(prober.run(stop)))
    try:
        with ctx.progress.phase(
            f"recording ({cfg.duration_s:g} s, {len(clients)} clients)", total_s=cfg.duration_s
        ):
            faults = await _fault_timeline(ctx, the_scenario, start)
    finally:
        stop.set()
        ctx.fleet.record_round = None
        await asyncio.gather(*tasks, return_exceptions=True)
        ctx.flush_held()
        ctx.recorder.stop()
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
    ctx.notes["follow_up"] = {
        "writes_followed": follow_up.followed,
        "read_back": follow_up.read_back,
        "skipped": follow_up.skipped,
    }
    return {
        "timings": {
            "warmup_ms": start - warm_start,
            "recorded_ms": now_ms() - start,
            "inferred_writes": prober.writes,
            "composed_reads": prober.composed,
            "deferred_inferences": prober.deferred,
        },
        "faults": faults,
        "notes": {k: v for k, v in ctx.notes.items() if k != "skewed_scan_expired"}
        | (
            {"skewed_scan_expired_total": sum(x for x in ctx.notes["skewed_scan_expired"] if x > 0)}
            if "skewed_scan_expired" in ctx.notes
            else {}
        ),
    }


def _churn_broker(
    name: str, index: int, template: SimBroker, topics: Sequence[str], queues: int
) -> SimBroker:
    """Spare broker ``index`` of the route churn: holds every topic, silent until the
    fault."""
    broker = SimBroker(
        name,
        f"{template.addr.rsplit(':', 1)[0]}:{CHURN_BROKER_PORT + 2 * index}",
        topic_table([name, CLUSTER_NAME, *topics], queues),
        list(template.namesrv),
        template.data_version,
    )
    broker.alive = broker.heartbeating = False
    return broker


async def _churn(ctx: ExperimentContext, stop: asyncio.Event) -> int:
    """Until ``stop``: every ``churn_ms`` one of the two churn brokers registers or
    unregisters; each change is true from its first acknowledgement on
    (``ctx.broker_write``).

    A stopped churn broker registers (the first of them when both are); with both
    registered, the one registered longer ago unregisters. From the baseline route B
    that is B, B+X1, B+X1+Y1, B+Y1, B+Y1+X2, B+X2, B+X2+Y2, B+Y2, ... (Xn: the n-th
    incarnation of the first broker's share, Yn the second's; each stop steps the
    broker's incarnation, ``SimBroker.next_incarnation``), so no write of the churn
    repeats a value an earlier write of the topic had, and it never goes back to B,
    the warm-up's value: the churn ends with one or both spare brokers registered.

    Topics the scenario itself rewrites (a deleted or admin-created topic) are left out,
    so the churn never undoes the fault. Returns the number of route changes driven.
    """
    brokers = {name: ctx.fleet.brokers[name] for name in CHURN_BROKERS}
    for broker in brokers.values():
        for topic in [t for t in broker.topics if t in ctx.truth_overrides]:
            del broker.topics[topic]
    registered = [name for name, broker in brokers.items() if broker.alive]
    changes = 0
    while not stop.is_set():
        down = [name for name, broker in brokers.items() if not broker.alive]
        if down:
            name = down[0]
            await ctx.broker_write(
                name, KIND_REGISTER, functools.partial(ctx.fleet.start_acknowledged, name)
            )
            registered = [n for n in registered if n != name] + [name]
        else:
            name = registered.pop(0)
            await ctx.broker_write(
                name, KIND_UNREGISTER, functools.partial(ctx.fleet.stop_graceful, name)
            )
        changes += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), ctx.config.churn_ms / 1000)
    return changes


async def _sleep_until(start_ms: int, offset_s: float) -> None:
    """Sleep until ``offset_s`` after ``start_ms``, both on the harness clock (``now_ms``:
    the wall clock may step away from it during a run)."""
    delay = start_ms / 1000 + offset_s - now_ms() / 1000
    if delay > 0:
        await asyncio.sleep(delay)


async def _fault_timeline(
    ctx: ExperimentContext, the_scenario: Scenario, start_ms: int
) -> list[dict[str, Any]]:
    duration = ctx.config.duration_s
    if isinstance(the_scenario, Nemesis):  # its own timeline of many faults
        return await _scheduled_timeline(ctx, the_scenario, start_ms)
    await _sleep_until(start_ms, duration * FAULT_AT_FRACTION)
    injected_ms = now_ms()
    specs: Sequence[FaultSpec] = await the_scenario.inject(ctx)
    what = ", ".join(f"{spec.kind} {spec.target}" for spec in specs) or the_scenario.name
    ctx.progress.line(f"fault injected at t={(injected_ms - start_ms) / 1000:.1f} s: {what}")
    churn_stop = asyncio.Event()
    churn = (
        asyncio.get_running_loop().create_task(_churn(ctx, churn_stop))
        if ctx.config.churn_ms and set(CHURN_BROKERS) <= set(ctx.fleet.brokers)
        else None
    )
    end_ms = -1
    churn_changes = 0
    try:
        # The churn lasts until the heal time, whether or not the fault heals (without a
        # heal the routes then settle before recording stops).
        await _sleep_until(start_ms, duration * HEAL_AT_FRACTION)
        churn_stop.set()
        churn_changes = await churn if churn is not None else 0
    finally:
        churn_stop.set()
        if churn is not None and not churn.done():
            churn.cancel()
    if the_scenario.heals:
        await the_scenario.heal(ctx)
        end_ms = now_ms()
        ctx.progress.line(f"healed at t={(end_ms - start_ms) / 1000:.1f} s")
    if churn is not None:
        ctx.notes["churn_route_changes"] = churn_changes
        ctx.progress.line(
            f"route churn: {churn_changes} changes of every topic's route inside the fault window"
        )
    await _sleep_until(start_ms, duration)
    rows = []
    for spec in specs:
        ctx.recorder.fault(injected_ms, end_ms, spec.kind, spec.target, spec.detail)
        rows.append(
            {
                "kind": spec.kind,
                "target": spec.target,
                "start_ms": injected_ms,
                "end_ms": end_ms,
                **spec.detail,
            }
        )
    return rows


async def _scheduled_timeline(
    ctx: ExperimentContext, the_scenario: Nemesis, start_ms: int
) -> list[dict[str, Any]]:
    """A scenario with its own schedule of faults (the nemesis): it plays them from the
    start of recording and writes their rows; the route churn runs until the last one
    has healed, then the run stays quiet until its end."""
    churn_stop = asyncio.Event()
    churn = (
        asyncio.get_running_loop().create_task(_churn(ctx, churn_stop))
        if ctx.config.churn_ms and set(CHURN_BROKERS) <= set(ctx.fleet.brokers)
        else None
    )
    try:
        rows = await the_scenario.run_schedule(ctx, start_ms)
        churn_stop.set()
        if churn is not None:
            ctx.notes["churn_route_changes"] = await churn
    finally:
        churn_stop.set()
        if churn is not None and not churn.done():
            churn.cancel()
    healed_s = (now_ms() - start_ms) / 1000
    ctx.notes["quiet_s"] = round(max(0.0, ctx.config.duration_s - healed_s), 3)
    ctx.progress.line(f"every fault healed at t={healed_s:.1f} s; quiet until the end")
    await _sleep_until(start_ms, ctx.config.duration_s)
    return rows


def batch_dir(
    out_dir: Path | str, scenario_name: str, seed: int, stamp: str, seeds: int = 1
) -> Path:
    """The one folder of an invocation: ``<out>/<scenario>-s<seed>-<stamp>`` (with
    several seeds ``-s<seed>x<seeds>-``) holding ``runs/<run_id>`` (one per mode and
    seed) and ``report/``."""
    count = f"x{seeds}" if seeds > 1 else ""
    return Path(out_dir).resolve() / f"{scenario_name}-s{seed}{count}-{stamp}"


def batch_configs(
    base: ExperimentConfig, modes: Sequence[str], seeds: Sequence[int]
) -> list[ExperimentConfig]:
    """One config per seed and mode, seed after seed (every mode of a seed before the
    next seed), so a batch cut short still compares the modes on the seeds it ran."""
    return [replace(base, mode=mode, seed=seed) for seed in seeds for mode in modes]


def seed_series(base: int, count: int) -> list[int]:
    """The seeds of ``--seeds count`` from ``--seed base``: ``base, base + 1, ...``, so
    seed i is reproduced alone by ``--seed base+i``."""
    if count < 1:
        raise ValueError(f"--seeds must be at least 1, got {count}")
    return [base + i for i in range(count)]


def analyze_runs(
    history_root: Path,
    out_dir: Path,
    spark_master: str | None = None,
    progress: Progress | None = None,
    *,
    spark_verbose: bool = False,
) -> dict[str, list[dict[str, Any]]]:
    """Run every Spark job of ``spark_jobs.metrics`` over the runs under ``history_root``;
    write the report (tables, plots, ``summary.md``) to ``out_dir``; return the tables."""
    # Imported here, not above: the console imports this module for its names, and its
    # process must not load Spark or matplotlib.
    from spark_jobs.analysis import JOBS_TOTAL, analyze
    from spark_jobs.dataset import DATASET_DIR_NAME
    from spark_jobs.report_folder import write_report
    from spark_jobs.session import get_spark

    progress = progress or silent()
    with progress.phase("Spark session"):
        spark = get_spark(spark_master, verbose=spark_verbose)
    with progress.phase("analysis", steps=JOBS_TOTAL) as running:

        def on_job(text: str, finished: bool) -> None:
            progress.line(text)
            if finished:
                running.advance()

        tables, seconds = analyze(
            spark, history_root, on_job=on_job, dataset_dir=Path(out_dir) / DATASET_DIR_NAME
        )
    with progress.phase("report (tables, plots, summary.md)"):
        write_report(out_dir, tables, seconds, history_root)
    return tables


def summary_text(tables: dict[str, list[dict[str, Any]]]) -> str:
    """The printed summary: each mode's verdicts side by side."""
    return markdown_verdicts(tables)
