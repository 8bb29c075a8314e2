"""The nemesis: a random schedule of many faults over one longer run, from the run's seed.

:func:`draw_schedule` draws a list of :class:`Step` (``at_s`` after recording starts,
``kind``, ``target``, ``duration_s``) from ``random.Random(seed)`` and the run's shape
(node ids, broker names, duration, expiry) only, so both modes of a seed get the same
draw; :func:`for_mode` then marks the steps that make no sense in a mode as skipped
(eventual mode has no Raft links and no leader). Rules of the draw:

- two steps that overlap in time (plus :data:`SETTLE_S` after each, for a restart to
  finish) touch different resources: a node (``node:n1``), a broker lane, a broker;
- at most one step that can cost a node its part in the quorum (a Raft link cut, a
  leader isolation, a pause, a kill, a skewed restart) runs at a time (``quorum``), and
  each such step takes at most one node out or cuts one pair of peers: a majority always
  remains, so none is lost for longer than the step;
- every step ends before the run's quiet phase (:func:`quiet_s`), whose convergence the
  analysis measures;
- a ``kill_master`` step (raft mode only: eventual mode has no broker failover) kills the
  master of a failover group (:mod:`experiments.failover`) and lasts at least
  :func:`kill_master_min_s`, long enough for the leader's scan to expire it and elect
  the slave; the group takes no other step (it is no lane member and no ``kill_broker``
  target).

:func:`run_schedule` plays the steps on a running experiment (each in its own task,
holding locks on what it touches, so a late restart delays the next step on that node
instead of colliding with it) and writes one fault row per step with its real start and
end. The schedule is a JSON file (:func:`schedule_json`, :func:`load_schedule`) that
``--schedule FILE`` plays again exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import random
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from experiment_history.schema import FAULT_KILL_BROKER, KIND_BROKER_DOWN, KIND_REGISTER
from experiments.context import ExperimentContext
from experiments.failover import FAILOVER_BROKER, FailoverGroup
from experiments.faults import FaultError, faketime_available, faketime_env
from experiments.workload import now_ms
from tools.faultproxy import LinkMode

LINK_PARTITION = "link_partition"
"""Both directions of one broker lane's links to one node blackholed."""
LINK_ONE_WAY = "link_one_way"
"""One direction of one broker lane's links to one node cut (``detail.direction``)."""
RAFT_LINK_PARTITION = "raft_link_partition"
"""Both directions between two Raft peers blackholed (raft mode only)."""
RAFT_LINK_ONE_WAY = "raft_link_one_way"
"""What one Raft peer sends another dropped, the other way kept (raft mode only)."""
LEADER_ISOLATION = "leader_isolation"
"""Every Raft link of whichever node leads when the step starts cut (raft mode only)."""
PAUSE_GATEWAY = "pause_namesrv"
"""SIGSTOP of a gateway, SIGCONT at the end."""
KILL_GATEWAY = "kill_namesrv"
"""SIGKILL of a gateway, restarted at the end."""
KILL_BROKER = FAULT_KILL_BROKER
"""A broker dies (no FIN), restarted at the end."""
CLOCK_SKEW = "clock_skew"
"""A gateway restarted with its wall clock ``detail.skew_ms`` off (libfaketime), and
restarted on the real clock at the end."""
KILL_MASTER = "kill_master"
"""The master of a raft failover group dies (no FIN, no more registrations); the leader's
scan elects its slave; at the end the old master starts again and rejoins as a slave
(raft mode only)."""

KINDS = (
    LINK_PARTITION,
    LINK_ONE_WAY,
    RAFT_LINK_PARTITION,
    RAFT_LINK_ONE_WAY,
    LEADER_ISOLATION,
    PAUSE_GATEWAY,
    KILL_GATEWAY,
    KILL_BROKER,
    CLOCK_SKEW,
    KILL_MASTER,
)
RAFT_ONLY = frozenset({RAFT_LINK_PARTITION, RAFT_LINK_ONE_WAY, LEADER_ISOLATION, KILL_MASTER})
QUORUM_KINDS = frozenset(
    {RAFT_LINK_PARTITION, RAFT_LINK_ONE_WAY, LEADER_ISOLATION, PAUSE_GATEWAY, KILL_GATEWAY}
    | {CLOCK_SKEW}
)
QUORUM = "quorum"
LANE_PREFIX = "nemesis-"
DIRECTIONS = ("to_node", "to_broker")
"""A one-way broker link cut: the brokers' requests are lost (``to_node``) or the node's
answers are (``to_broker``)."""
MIN_STEP_S = 1.5
MAX_STEP_S = 6.0
GAP_MIN_S = 0.5
GAP_MAX_S = 2.5
SETTLE_S = 1.0
"""Kept free after a step on what it touched (a restart finishing, a lane reconnecting)."""
RESTART_SETTLE_S = 3.0
"""The same after a step that restarts a gateway."""
QUIET_FRACTION = 0.3
SCHEDULE_FILE_NAME = "schedule.json"
TARGET_KEYS = frozenset({"lane", "node", "src", "dst"})
"""Detail keys the target already says (left out of the printed line)."""
SKIPPED_IN_EVENTUAL = "no Raft links, leader or broker failover in eventual mode"
KILL_MASTER_MARGIN_S = 3.0
"""A ``kill_master`` step lasts at least one expiry plus this: the leader's next scan
(every second), the commit, and a registration round of the slave to hear of it."""
RESTARTING = frozenset({KILL_GATEWAY, CLOCK_SKEW, KILL_MASTER})
"""Step kinds that restart something at their end (:data:`RESTART_SETTLE_S` after)."""


def kill_master_min_s(expiry_ms: int) -> float:
    """The shortest ``kill_master`` step: one expiry plus :data:`KILL_MASTER_MARGIN_S`."""
    return round(expiry_ms / 1000 + KILL_MASTER_MARGIN_S, 1)


@dataclass(frozen=True, slots=True)
class Step:
    """One fault of the schedule; ``skipped`` says why it does not run in this mode."""

    index: int
    at_s: float
    kind: str
    target: str
    duration_s: float
    touches: tuple[str, ...]
    detail: dict[str, Any] = field(default_factory=dict)
    skipped: str = ""

    @property
    def end_s(self) -> float:
        """When the step is planned to heal."""
        return self.at_s + self.duration_s

    @property
    def busy_until_s(self) -> float:
        """Until when what it touches stays reserved."""
        return self.end_s + (RESTART_SETTLE_S if self.kind in RESTARTING else SETTLE_S)

    def describe(self) -> str:
        """One line of the printed schedule."""
        shown = sorted((k, v) for k, v in self.detail.items() if k not in TARGET_KEYS)
        extra = ", ".join(f"{k}={v}" for k, v in shown)
        text = (
            f"#{self.index:02d} t={self.at_s:5.1f}s +{self.duration_s:4.1f}s "
            f"{self.kind} {self.target}" + (f" ({extra})" if extra else "")
        )
        return text + (f"  [skipped: {self.skipped}]" if self.skipped else "")


@dataclass(frozen=True, slots=True)
class Schedule:
    """The steps of one run and what they were drawn from."""

    seed: int
    duration_s: float
    quiet_from_s: float
    steps: tuple[Step, ...]
    mode: str = ""
    source: str = "drawn"


def quiet_s(duration_s: float, expiry_ms: int) -> float:
    """The final quiet phase: :data:`QUIET_FRACTION` of the run, and never less than two
    expiries and 2 s (a broker restarted at the last moment is expired or back by then)."""
    return max(duration_s * QUIET_FRACTION, 2 * expiry_ms / 1000 + 2.0)


def lanes_of(brokers: Sequence[str]) -> dict[str, list[str]]:
    """The two broker lanes of the nemesis: brokers in turn (sorted names)."""
    names = sorted(brokers)
    return {f"{LANE_PREFIX}a": names[0::2], f"{LANE_PREFIX}b": names[1::2]}


def _candidates(
    kind: str,
    nodes: Sequence[str],
    brokers: Sequence[str],
    lanes: Sequence[str],
    groups: Sequence[str] = (),
) -> list[tuple[str, tuple[str, ...], dict[str, Any]]]:
    """(target, touches, detail) of every way ``kind`` can be aimed, in a fixed order."""
    quorum = (QUORUM,) if kind in QUORUM_KINDS else ()
    if kind == KILL_MASTER:
        return [(g, (f"broker:{g}",), {}) for g in groups]
    if kind in (LINK_PARTITION, LINK_ONE_WAY):
        return [
            (f"{lane}->{node}", (f"node:{node}", f"lane:{lane}"), {"lane": lane, "node": node})
            for lane in lanes
            for node in nodes
        ]
    if kind in (RAFT_LINK_PARTITION, RAFT_LINK_ONE_WAY):
        pairs = [(a, b) for a in nodes for b in nodes if a != b]
        if kind == RAFT_LINK_PARTITION:
            pairs = [(a, b) for a, b in pairs if a < b]
        arrow = "->" if kind == RAFT_LINK_ONE_WAY else "<->"
        return [
            (f"{a}{arrow}{b}", (f"node:{a}", f"node:{b}", *quorum), {"src": a, "dst": b})
            for a, b in pairs
        ]
    if kind == LEADER_ISOLATION:
        return [("leader", (*(f"node:{n}" for n in nodes), *quorum), {})]
    if kind == KILL_BROKER:
        return [(b, (f"broker:{b}",), {}) for b in brokers]
    return [(n, (f"node:{n}", *quorum), {}) for n in nodes]


def _overlaps(step: Step, at_s: float, busy_until_s: float) -> bool:
    return step.at_s < busy_until_s and at_s < step.busy_until_s


def draw_schedule(
    seed: int,
    nodes: Sequence[str],
    brokers: Sequence[str],
    duration_s: float,
    expiry_ms: int,
    clock_skew_ms: int = 0,
    failover_groups: Sequence[str] = (FAILOVER_BROKER,),
) -> Schedule:
    """The schedule of ``seed`` for a run of this shape (see the module doc);
    ``failover_groups``: the broker names ``kill_master`` may aim at (the nemesis
    scenario always has :data:`~experiments.failover.FAILOVER_BROKER`).

    Depends on nothing else (no mode, no clock), so both modes and a replay agree."""
    rng = random.Random(seed)
    quiet_from = round(duration_s - quiet_s(duration_s, expiry_ms), 1)
    first = round(max(1.0, duration_s * 0.1), 1)
    lanes = sorted(lanes_of(brokers))
    longest = min(MAX_STEP_S, max(MIN_STEP_S, (quiet_from - first) * 0.3))
    steps: list[Step] = []
    at = first
    while True:
        if steps:
            at = round(at + rng.uniform(GAP_MIN_S, GAP_MAX_S), 1)
        if at + MIN_STEP_S > quiet_from:
            break
        kind = rng.choice(KINDS)
        length = round(min(rng.uniform(MIN_STEP_S, longest), quiet_from - at), 1)
        if kind == KILL_MASTER:
            # Long enough for the election; none when it no longer fits.
            length = max(length, kill_master_min_s(expiry_ms))
            if at + length > quiet_from:
                continue
        detail_extra: dict[str, Any] = {}
        if kind == LINK_ONE_WAY:
            detail_extra["direction"] = rng.choice(DIRECTIONS)
        if kind == CLOCK_SKEW:
            sign = rng.choice((-1, 1))
            detail_extra["skew_ms"] = clock_skew_ms or sign * 100 * round(
                rng.uniform(expiry_ms / 2, 2 * expiry_ms) / 100
            )
        busy_until = at + length + (RESTART_SETTLE_S if kind in RESTARTING else SETTLE_S)
        taken = {t for s in steps if _overlaps(s, at, busy_until) for t in s.touches}
        free = [
            c
            for c in _candidates(kind, nodes, brokers, lanes, failover_groups)
            if not taken.intersection(c[1])
        ]
        if not free:
            continue
        target, touches, detail = rng.choice(free)
        steps.append(Step(len(steps), at, kind, target, length, touches, detail | detail_extra))
    return Schedule(seed, duration_s, quiet_from, tuple(steps))


def for_mode(schedule: Schedule, mode: str) -> Schedule:
    """The schedule as ``mode`` runs it: in eventual mode the Raft-only steps are kept in
    the list but skipped (:data:`SKIPPED_IN_EVENTUAL`); nothing else changes."""
    steps = tuple(
        replace(s, skipped=SKIPPED_IN_EVENTUAL)
        if mode != "raft" and s.kind in RAFT_ONLY and not s.skipped
        else s
        for s in schedule.steps
    )
    return replace(schedule, steps=steps, mode=mode)


def conflicts(schedule: Schedule) -> list[tuple[int, int]]:
    """Pairs of steps (indexes) that overlap and share something they touch (none in a
    drawn schedule; a hand-written one is checked with this on load)."""
    steps = [s for s in schedule.steps if not s.skipped]
    return [
        (a.index, b.index)
        for i, a in enumerate(steps)
        for b in steps[i + 1 :]
        if _overlaps(a, b.at_s, b.busy_until_s) and set(a.touches) & set(b.touches)
    ]


def schedule_json(schedule: Schedule, results: Sequence[dict[str, Any]] = ()) -> str:
    """The schedule as written with a run (``results``: what each step really did)."""
    data = asdict(schedule)
    if results:
        data["results"] = list(results)
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def load_schedule(path: Path | str) -> Schedule:
    """A schedule written by :func:`schedule_json` (its results and mode are dropped: the
    run decides the mode). Refuses one whose steps conflict."""
    data = json.loads(Path(path).read_text())
    steps = tuple(
        Step(
            index=int(s["index"]),
            at_s=float(s["at_s"]),
            kind=str(s["kind"]),
            target=str(s["target"]),
            duration_s=float(s["duration_s"]),
            touches=tuple(s["touches"]),
            detail=dict(s.get("detail") or {}),
        )
        for s in data["steps"]
    )
    unknown = sorted({s.kind for s in steps} - set(KINDS))
    if unknown:
        raise ValueError(f"{path}: unknown step kinds {unknown}; known: {list(KINDS)}")
    schedule = Schedule(
        seed=int(data["seed"]),
        duration_s=float(data["duration_s"]),
        quiet_from_s=float(data["quiet_from_s"]),
        steps=steps,
        source=str(path),
    )
    clashes = conflicts(schedule)
    if clashes:
        raise ValueError(f"{path}: steps overlap on what they touch: {clashes}")
    return schedule


# ------------------------------------------------------------------------------ running


class _Locks:
    """One lock per thing a step touches; a step takes its locks in a fixed order."""

    def __init__(self) -> None:
        self.locks: dict[str, asyncio.Lock] = {}

    @contextlib.asynccontextmanager
    async def hold(self, names: Sequence[str]) -> Any:
        async with contextlib.AsyncExitStack() as stack:
            for name in sorted(set(names)):
                await stack.enter_async_context(self.locks.setdefault(name, asyncio.Lock()))
            yield


async def _sleep_until(start_ms: int, offset_s: float) -> None:
    delay = start_ms / 1000 + offset_s - now_ms() / 1000
    if delay > 0:
        await asyncio.sleep(delay)


async def run_schedule(
    ctx: ExperimentContext,
    schedule: Schedule,
    start_ms: int,
    out: Path | None = None,
    failover: FailoverGroup | None = None,
) -> list[dict[str, Any]]:
    """Play every step not skipped (recording started at ``start_ms``); returns, and
    writes as fault rows, one row per step that ran, with its real start and end. Each
    step's result (ran, skipped, failed, or late: held up by an earlier step on what it
    touches until it would have ended in the quiet phase) also goes into ``out`` (the
    run's schedule.json) when given. ``failover``: the group a ``kill_master`` step
    kills the master of. Returns once every step has healed."""
    locks = _Locks()
    results: dict[int, dict[str, Any]] = {
        s.index: {"index": s.index, "status": "skipped", "reason": s.skipped}
        for s in schedule.steps
        if s.skipped
    }
    rows: list[dict[str, Any]] = []

    async def play(step: Step) -> None:
        await _sleep_until(start_ms, step.at_s)
        async with locks.hold(step.touches):
            begun = now_ms()
            late_s = (begun - start_ms) / 1000 - step.at_s
            if (begun - start_ms) / 1000 + step.duration_s > schedule.quiet_from_s:
                # A restart before it on the same node ran over: the step would eat into
                # the quiet phase, so it does not run.
                reason = f"{late_s:.1f} s late, would end in the quiet phase"
                results[step.index] = {"index": step.index, "status": "late", "reason": reason}
                ctx.progress.line(f"nemesis #{step.index:02d} {step.kind} not run: {reason}")
                return
            try:
                heal, target, detail = await _inject(ctx, step, failover)
            except (FaultError, OSError) as exc:
                results[step.index] = {"index": step.index, "status": "failed", "reason": str(exc)}
                ctx.progress.line(f"nemesis #{step.index:02d} {step.kind} failed: {exc}")
                return
            started = now_ms()
            ctx.progress.line(
                f"nemesis #{step.index:02d} t={(started - start_ms) / 1000:.1f} s: "
                f"{step.kind} {target}"
            )
            await _sleep_until(started, step.duration_s)
            try:
                await heal()
            finally:
                ended = now_ms()
                ctx.progress.line(
                    f"nemesis #{step.index:02d} healed at t={(ended - start_ms) / 1000:.1f} s"
                )
                detail = detail | {
                    "step": step.index,
                    "planned_at_s": step.at_s,
                    "planned_duration_s": step.duration_s,
                    "inject_ms": started - begun,
                }
                ctx.recorder.fault(started, ended, step.kind, target, detail)
                rows.append(
                    {"kind": step.kind, "target": target, "start_ms": started, "end_ms": ended}
                    | detail
                )
                results[step.index] = {
                    "index": step.index,
                    "status": "ran",
                    "target": target,
                    "start_s": round((started - start_ms) / 1000, 3),
                    "end_s": round((ended - start_ms) / 1000, 3),
                }

    try:
        await asyncio.gather(*(play(s) for s in schedule.steps if not s.skipped))
    finally:
        if out is not None:
            ordered = [results[i] for i in sorted(results)]
            out.write_text(schedule_json(schedule, ordered))
        ctx.notes["nemesis"] = {
            "steps": len(schedule.steps),
            "ran": sum(r["status"] == "ran" for r in results.values()),
            "skipped": sum(r["status"] == "skipped" for r in results.values()),
            "failed": sum(r["status"] == "failed" for r in results.values()),
            "late": sum(r["status"] == "late" for r in results.values()),
            "source": schedule.source,
        }
    return sorted(rows, key=lambda r: (r["start_ms"], r["step"]))


Heal = Callable[[], Awaitable[None]]
"""How a step ends."""


async def _inject(
    ctx: ExperimentContext, step: Step, failover: FailoverGroup | None = None
) -> tuple[Heal, str, dict[str, Any]]:
    """Start ``step``; returns how to heal it, the real target and the row's detail."""
    kind, d = step.kind, step.detail
    detail: dict[str, Any] = dict(d)
    if kind == KILL_MASTER:
        if failover is None or failover.name != step.target or not failover.failover:
            raise FaultError(f"kill_master: no raft failover group {step.target!r} in this run")
        heal_master, killed = await failover.kill_master()
        return heal_master, step.target, detail | killed
    if kind in (LINK_PARTITION, LINK_ONE_WAY):
        lane, node = d["lane"], d["node"]
        mode = LinkMode.BLACKHOLE
        if kind == LINK_ONE_WAY:
            mode = LinkMode.CUT_FORWARD if d["direction"] == "to_node" else LinkMode.CUT_BACKWARD
        ctx.mesh.set(lane, node, mode)
        detail["lost_brokers"] = ctx.lane_brokers.get(lane, [])

        async def heal_link() -> None:
            ctx.mesh.set(lane, node, LinkMode.PASS)

        return heal_link, step.target, detail
    if kind in RAFT_ONLY:
        mesh = ctx.raft_mesh
        if mesh is None:
            raise FaultError(f"{kind} needs the Raft proxy mesh (raft mode)")
        if kind == LEADER_ISOLATION:
            leader = await ctx.cluster.leader()
            if leader is None:
                raise FaultError("no leader to isolate")
            names = mesh.cut(leader)
            target = leader
        else:
            names = mesh.cut_pair(d["src"], d["dst"], one_way=kind == RAFT_LINK_ONE_WAY)
            target = step.target
        detail["raft_links_cut"] = names

        async def heal_raft() -> None:
            mesh.heal_links(names)

        return heal_raft, target, detail
    if kind == PAUSE_GATEWAY:
        node = step.target
        detail["pid"] = ctx.cluster.kill_gateway(node, signal.SIGSTOP)

        async def resume() -> None:
            ctx.cluster.kill_gateway(node, signal.SIGCONT)

        return resume, node, detail
    if kind == KILL_GATEWAY:
        node = step.target
        ctx.cluster.kill_gateway(node, signal.SIGKILL)
        await ctx.cluster.wait_gone(node)
        detail["signal"] = "SIGKILL"

        async def restart() -> None:
            ctx.gateway_restarting(node)
            await ctx.cluster.start_gateway(node)

        return restart, node, detail
    if kind == CLOCK_SKEW:
        return await _skew(ctx, step, detail)
    if kind == KILL_BROKER:
        broker = step.target
        ctx.fleet.kill_hard(broker)
        ctx.truth_changed(broker, KIND_BROKER_DOWN)
        detail["no_fin"] = True

        async def revive() -> None:
            # first: the schedule waits on this restart, not on the rounds queued before it.
            await ctx.broker_write(
                broker,
                KIND_REGISTER,
                functools.partial(ctx.fleet.start_acknowledged, broker),
                first=True,
            )

        return revive, broker, detail
    raise FaultError(f"unknown nemesis step kind {kind!r}")


async def _skew(
    ctx: ExperimentContext, step: Step, detail: dict[str, Any]
) -> tuple[Heal, str, dict[str, Any]]:
    """A real clock skew: the gateway killed (SIGKILL: no drain to wait for) and started
    under libfaketime, and again on the real clock at the end. Without libfaketime, the
    forged scan stamps of the ``clock-skew`` scenario (SCAN_NOT_ACTIVE_BROKER stamped
    now + skew, every scan period)."""
    node, skew_ms = step.target, int(step.detail["skew_ms"])
    if faketime_available():
        detail["mechanism"] = "libfaketime"
        ctx.cluster.kill_gateway(node, signal.SIGKILL)
        await ctx.cluster.wait_gone(node)
        ctx.gateway_restarting(node)
        await ctx.cluster.start_gateway(node, faketime_env(skew_ms))

        async def unskew() -> None:
            ctx.cluster.kill_gateway(node, signal.SIGKILL)
            await ctx.cluster.wait_gone(node)
            ctx.gateway_restarting(node)
            await ctx.cluster.start_gateway(node)

        return unskew, node, detail
    detail["mechanism"] = "forged_scan"
    stop = asyncio.Event()

    async def scans() -> None:
        while not stop.is_set():
            await ctx.cluster.scan(node, now_ms() + skew_ms)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), ctx.config.scan_interval_s)

    task = asyncio.get_running_loop().create_task(scans())

    async def stop_scans() -> None:
        stop.set()
        await task

    return stop_scans, node, detail
