"""One class per experiment scenario (docs/EXPERIMENTS.md "Running an experiment").

A scenario says which brokers go through fault proxies (:meth:`Scenario.lanes`), what to
set up before the warm-up (:meth:`Scenario.prepare`), what the fault does
(:meth:`Scenario.inject`) and how it ends (:meth:`Scenario.heal`, only when ``heals``).
Each fault it injects is reported as a :class:`FaultSpec`; the runner writes the fault
rows with the real start and end times.
"""

from __future__ import annotations

import asyncio
import functools
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from experiment_history.schema import (
    FAULT_ASYMMETRIC_PARTITION,
    FAULT_KILL_BROKER,
    FAULT_KILL_NAMESRV,
    FAULT_LEADER_KILL,
    FAULT_PARTITION,
    KIND_BROKER_DOWN,
    KIND_CREATE_TOPIC,
    KIND_DELETE_TOPIC,
    KIND_REGISTER,
    KIND_UNREGISTER,
    route_brokers,
)
from experiments.context import ExperimentContext
from experiments.failover import FAILOVER_BROKER, FAILOVER_TOPIC, FailoverGroup
from experiments.faults import FaultError, faketime_available
from experiments.nemesis import (
    CLOCK_SKEW,
    SCHEDULE_FILE_NAME,
    Schedule,
    draw_schedule,
    for_mode,
    lanes_of,
    load_schedule,
    run_schedule,
    schedule_json,
)
from experiments.workload import (
    Ack,
    SimBroker,
    delete_topic_on,
    now_ms,
    now_us,
    read_route,
    register_topic_on,
)
from raftstore.raft.settings import DEFAULT_SKEW_ALLOWANCE_MS
from remoting.model import DataVersion
from tools.faultproxy import LinkMode

FAULT_STOP_BROKER = "stop_broker"
FAULT_PARTIAL_DELETE = "partial_topic_delete"
FAULT_TOPIC_SUBSET = "topic_subset"
FAULT_MEMBERSHIP = "membership_change"
FAULT_STORM = "registration_storm"
FAULT_CLOCK_SKEW = "clock_skew"
LANE_A = "lane-a"
LANE_B = "lane-b"
LANE_ALL = "lane-all"
NEW_TOPIC = "topic-subset-new"
STORM_BROKERS = 16
STORM_TOPICS_EACH = 400
STORM_FIRST_PORT = 40911
STORM_WATCH_EVERY = 2
"""The clients and the prober watch the first topic of every second storm broker: enough
topics to check, few enough that the probes do not add a storm of their own."""
MEMBERSHIP_SETTLE_S = 10.0
"""How long s6 asks the remaining members to remove the node and waits for them to stop
listing it."""
MEMBERSHIP_RETRY_S = 0.5
SKEW_MARGIN_MS = 1_000
"""clock-skew-within-allowance stays this far under raft's allowance."""


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """One fault row to be: what kind, on what target, with which details."""

    kind: str
    target: str
    detail: dict[str, Any] = field(default_factory=dict)


class Scenario:
    """Base: no proxies, nothing to prepare, nothing to heal."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    heals: ClassVar[bool] = True
    subset_topics: ClassVar[tuple[str, ...]] = ()
    """Topics the clients use that no broker announces at start (S5)."""
    fault_topics: ClassVar[tuple[str, ...]] = ()
    """Topics of brokers the fault adds (S8): read and probed from the start like the
    others, their truth the fleet's."""
    raft_proxied: ClassVar[bool] = False
    """Raft mode: the gateways dial their peers through a :class:`RaftMesh` from boot."""
    skew_allowance_ms: ClassVar[int | None] = 0
    """Raft mode's clock-skew allowance unless ``--skew-allowance-ms`` says otherwise.
    0 by default: every process of a run reads the same clock, and eventual mode expires
    with no allowance, so both modes expire a silent broker by the same rule. None keeps
    the gateway's default (5 s)."""

    def lanes(self, ctx: ExperimentContext) -> dict[str, list[str]]:
        """Lane name -> brokers on it; each lane gets proxy links to ``lane_targets``."""
        return {}

    def lane_targets(self, ctx: ExperimentContext, lane: str) -> Sequence[str] | None:
        """The nodes lane ``lane`` needs links for (None: all)."""
        return None

    async def prepare(self, ctx: ExperimentContext) -> None:
        """Runs after the cluster is up and before any broker registers."""

    async def inject(self, ctx: ExperimentContext) -> list[FaultSpec]:
        """Start the fault; returns the faults it started (the base: none, a baseline)."""
        return []

    async def heal(self, ctx: ExperimentContext) -> None:
        """End the fault (only called when ``heals``)."""


# ---------------------------------------------------------------------------- brokers


class BrokerKill(Scenario):
    """S2: a broker's machine dies; no FIN reaches the nodes, only silence."""

    name = "broker-kill"
    summary = "kill -9 of a broker machine (no FIN): routes stay until expiry"
    heals = False

    async def inject(self, ctx: ExperimentContext) -> list[FaultSpec]:
        victim = ctx.brokers_of(ctx.focus_topic)[0]
        ctx.fleet.kill_hard(victim)
        ctx.truth_changed(victim, KIND_BROKER_DOWN)
        return [FaultSpec(FAULT_KILL_BROKER, victim, {"no_fin": True})]


class BrokerStop(Scenario):
    """A graceful broker shutdown: UNREGISTER_BROKER to every node, then close."""

    name = "broker-stop"
    summary = "graceful broker shutdown (UNREGISTER_BROKER to every node)"
    heals = False

    async def inject(self, ctx: ExperimentContext) -> list[FaultSpec]:
        victim = ctx.brokers_of(ctx.focus_topic)[0]
        await ctx.broker_write(
            victim, KIND_UNREGISTER, functools.partial(ctx.fleet.stop_graceful, victim)
        )
        return [FaultSpec(FAULT_STOP_BROKER, victim, {})]


# -------------------------------------------------------------------------- partitions


class AsymmetricPartition(Scenario):
    """S1: n1 loses broker x, n2 loses broker y; both brokers and all nodes stay up."""

    name = "s1-asymmetric-partition"
    summary = "n1 loses broker x, n2 loses broker y (blackholed proxies, no FIN)"

    def lanes(self, ctx: ExperimentContext) -> dict[str, list[str]]:
        first, second = ctx.brokers_of(ctx.focus_topic)[:2]
        return {LANE_A: [first], LANE_B: [second]}

    async def inject(self, ctx: ExperimentContext) -> list[FaultSpec]:
        nodes = ctx.cluster.node_ids
        cut = {nodes[0]: LANE_A, nodes[1 % len(nodes)]: LANE_B}
        specs = []
        for node, lane in cut.items():
            ctx.mesh.set(lane, node, LinkMode.BLACKHOLE)
            specs.append(
                FaultSpec(
                    FAULT_ASYMMETRIC_PARTITION, node, {"lost_brokers": ctx.lane_brokers[lane]}
                )
            )
        return specs

    async def heal(self, ctx: ExperimentContext) -> None:
        ctx.mesh.heal()


class MinorityPartition(Scenario):
    """One node cut off from every broker and (raft) from its peers; clients still reach it.

    Raft mode: the gateways dial each other through a :class:`RaftMesh` from their first
    start (the launcher's ``--raft-dial``), so the partition is a blackhole on the links to
    and from the minority node, with no restart.
    """

    name = "minority-partition"
    summary = "one node cut from brokers and Raft peers; clients can still ask it"
    raft_proxied = True

    def __init__(self) -> None:
        self.minority = ""

    def lanes(self, ctx: ExperimentContext) -> dict[str, list[str]]:
        return {LANE_ALL: sorted(ctx.fleet.brokers)}

    def lane_targets(self, ctx: ExperimentContext, lane: str) -> Sequence[str] | None:
        return [ctx.cluster.node_ids[-1]]

    async def inject(self, ctx: ExperimentContext) -> list[FaultSpec]:
        self.minority = ctx.cluster.node_ids[-1]
        detail: dict[str, Any] = {"brokers_cut": True, "raft_links_cut": []}
        if ctx.raft_mesh is not None:
            detail["raft_states_before"] = await _raft_states(ctx)
            detail["raft_bytes_before"] = sum(ctx.raft_mesh.forwarded_bytes().values())
            detail["raft_links_cut"] = ctx.raft_mesh.cut(self.minority)
        ctx.mesh.set(LANE_ALL, self.minority, LinkMode.BLACKHOLE)
        return [FaultSpec(FAULT_PARTITION, self.minority, detail)]

    async def heal(self, ctx: ExperimentContext) -> None:
        ctx.mesh.heal()
        if ctx.raft_mesh is not None:
            ctx.notes["raft_states_before_heal"] = await _raft_states(ctx)
            ctx.raft_mesh.heal()


async def _raft_states(ctx: ExperimentContext) -> dict[str, str | None]:
    """Each node's own Raft state (leader/follower/candidate), None when it does not answer."""
    states: dict[str, str | None] = {}
    for node in ctx.cluster.node_ids:
        status = await ctx.cluster.status(node)
        states[node] = None if status is None else status.get("state")
    return states


# ------------------------------------------------------------------------ name servers


class NamesrvRestart(Scenario):
    """S3: a NameServer node crashes (SIGKILL) and comes back later."""

    name = "s3-namesrv-restart"
    summary = "SIGKILL of node n1's gateway, restarted at heal time"

    def __init__(self) -> None:
        self.victim = ""

    async def inject(self, ctx: ExperimentContext) -> list[FaultSpec]:
        victim = ctx.cluster.node_ids[0]
        ctx.cluster.kill_gateway(victim, signal.SIGKILL)
        await ctx.cluster.wait_gone(victim)
        self.victim = victim
        return [FaultSpec(FAULT_KILL_NAMESRV, victim, {"signal": "SIGKILL"})]

    async def heal(self, ctx: ExperimentContext) -> None:
        await ctx.cluster.start_gateway(self.victim)


class LeaderKill(Scenario):
    """Raft: SIGKILL of the leader's gateway (eventual: of n1, which has no special role)."""

    name = "raft-leader-kill"
    summary = "SIGKILL of the Raft leader's gateway (eventual: n1), restarted at heal time"

    def __init__(self) -> None:
        self.victim = ""

    async def inject(self, ctx: ExperimentContext) -> list[FaultSpec]:
        leader = await ctx.cluster.leader()
        victim = leader or ctx.cluster.node_ids[0]
        ctx.cluster.kill_gateway(victim, signal.SIGKILL)
        await ctx.cluster.wait_gone(victim)
        self.victim = victim
        return [FaultSpec(FAULT_LEADER_KILL, victim, {"was_leader": leader is not None})]

    async def heal(self, ctx: ExperimentContext) -> None:
        await ctx.cluster.start_gateway(self.victim)


class MembershipChange(Scenario):
    """S6: the operator drops the last node (raft: the last follower) from the brokers'
    NameServer list (and, in raft mode, from the Raft membership); clients keep asking
    the removed-but-alive node.

    Raft mode: a removal that no member acknowledged, or that the remaining members do
    not show, stops the run with :class:`FaultError` (a run without the fault would be
    reported as if it had one). The fault row records what the removed node answers to
    a route query of the focus topic right after, and its own Raft view."""

    name = "s6-membership-change"
    summary = "last node removed from brokers' list (raft: and membership); clients keep it"
    heals = False

    async def inject(self, ctx: ExperimentContext) -> list[FaultSpec]:
        # PySyncObj's leader refuses to remove itself: in raft mode the last follower goes.
        leader = await ctx.cluster.leader() if ctx.raft else None
        leaving = [n for n in ctx.cluster.node_ids if n != leader][-1]
        detail: dict[str, Any] = {"brokers_dropped_node": True, "leader": leader}
        if ctx.raft:
            detail.update(await remove_raft_member(ctx, leaving))
        for broker in ctx.fleet.brokers.values():
            broker.namesrv = [n for n in broker.namesrv if n != leaving]
        detail["removed_node_answer"] = await _removed_node_answer(ctx, leaving)
        return [FaultSpec(FAULT_MEMBERSHIP, leaving, detail)]


async def remove_raft_member(ctx: ExperimentContext, leaving: str) -> dict[str, Any]:
    """Remove ``leaving`` through the first member that accepts, asking again while they
    refuse (a change may still be pending on a fresh leader); raise unless one accepts
    and then stops listing it within :data:`MEMBERSHIP_SETTLE_S`."""
    member = ctx.cluster.raft_addr(leaving)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + MEMBERSHIP_SETTLE_S
    refusals: list[str] = []
    via = await _first_accepting(ctx, member, refusals)
    while via is None and loop.time() < deadline:
        await asyncio.sleep(MEMBERSHIP_RETRY_S)
        via = await _first_accepting(ctx, member, refusals)
    if via is None:
        raise FaultError(
            f"s6: no member removed {leaving} ({member}) in {MEMBERSHIP_SETTLE_S:g} s: "
            + "; ".join(refusals[-2:])
        )
    while True:
        status = await ctx.cluster.status(via)
        members = [] if status is None else list(status.get("members") or [])
        if status is not None and member not in members:
            return {"removed_via": via, "refusals": refusals, "members_after": members}
        if loop.time() > deadline:
            raise FaultError(
                f"s6: {via} acknowledged removing {leaving} ({member}) but still lists "
                f"members {members or 'unknown (no status)'} after {MEMBERSHIP_SETTLE_S:g} s"
            )
        await asyncio.sleep(MEMBERSHIP_RETRY_S)


async def _first_accepting(ctx: ExperimentContext, member: str, refusals: list[str]) -> str | None:
    """The first remaining node that removes ``member`` (None: all refused, noted)."""
    for via in ctx.cluster.node_ids:
        if ctx.cluster.raft_addr(via) == member:
            continue
        remark = await ctx.cluster.remove_member(via, member)
        if not remark:
            return via
        refusals.append(f"{via}: {remark}")
    return None


async def _removed_node_answer(ctx: ExperimentContext, node: str) -> dict[str, Any]:
    """The removed node's route of the focus topic (outcome, brokers, whether it is the
    true route) and its own Raft view (state, leader, members; None in eventual mode)."""
    topic = ctx.focus_topic
    answer = await read_route(ctx.admin, ctx.nodes[node], topic, ctx.timeout_s)
    status = await ctx.cluster.status(node) if ctx.raft else None
    return {
        "topic": topic,
        "outcome": answer.outcome,
        "brokers": sorted(route_brokers(answer.value)),
        "true_route": answer.value == ctx.truth_of(topic),
        "raft": None
        if status is None
        else {k: status.get(k) for k in ("state", "leader", "members", "has_quorum")},
    }


class ClockSkew(Scenario):
    """One node's clock runs ahead for its liveness scans, past raft's allowance.

    The gateway stamps scans from its own clock and reads no offset, so the skew is
    applied where the time enters: the runner sends that node SCAN_NOT_ACTIVE_BROKER
    with ``now_ms`` = real time + skew every scan period (raft: to the leader, the only
    node whose scan proposes). The skew is ``--clock-skew-ms`` or, by default, the
    allowance plus one expiry: even a broker heard from a moment ago looks expired to the
    skewed scan in both modes. :class:`ClockSkewWithinAllowance` is the other value.
    """

    name = "clock-skew"
    summary = "liveness scans of one node (raft: the leader) skewed past raft's allowance"
    skew_allowance_ms = None
    """The allowance is the defence this scenario tests: keep the gateway's default."""

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None
        self.stop = asyncio.Event()

    def default_skew_ms(self, allowance_ms: int, expiry_ms: int) -> int:
        """The skew when ``--clock-skew-ms`` is 0: past the allowance by one expiry."""
        return allowance_ms + expiry_ms

    async def inject(self, ctx: ExperimentContext) -> list[FaultSpec]:
        target = (await ctx.cluster.leader()) or ctx.cluster.node_ids[0]
        allowance_ms = _raft_allowance_ms(ctx)
        skew_ms = ctx.config.clock_skew_ms or self.default_skew_ms(
            allowance_ms, ctx.config.expiry_ms
        )
        self.stop = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._scan(ctx, target, skew_ms))
        detail = {
            "skew_ms": skew_ms,
            "raft_allowance_ms": allowance_ms,
            "past_allowance": skew_ms > allowance_ms,
        }
        return [FaultSpec(FAULT_CLOCK_SKEW, target, detail)]

    async def _scan(self, ctx: ExperimentContext, target: str, skew_ms: int) -> None:
        while not self.stop.is_set():
            expired = await ctx.cluster.scan(target, now_ms() + skew_ms)
            ctx.notes.setdefault("skewed_scan_expired", []).append(expired)
            await asyncio.sleep(ctx.config.scan_interval_s)

    async def heal(self, ctx: ExperimentContext) -> None:
        self.stop.set()
        if self.task is not None:
            await self.task


class ClockSkewWithinAllowance(ClockSkew):
    """The same skewed scans, :data:`SKEW_MARGIN_MS` under raft's allowance: raft's
    defence should hold, eventual mode (which has none) expires live brokers once the
    skew passes its expiry minus a heartbeat."""

    name = "clock-skew-within-allowance"
    summary = "liveness scans of one node (raft: the leader) skewed just under raft's allowance"

    def default_skew_ms(self, allowance_ms: int, expiry_ms: int) -> int:
        """Just under the allowance (never negative)."""
        return max(0, allowance_ms - SKEW_MARGIN_MS)


def _raft_allowance_ms(ctx: ExperimentContext) -> int:
    """Raft mode's allowance in this batch: ``--skew-allowance-ms`` or the gateway's
    default. Both modes of a batch get the same skew, whatever mode runs."""
    given = ctx.config.skew_allowance_ms
    return DEFAULT_SKEW_ALLOWANCE_MS if given is None else given


# ----------------------------------------------------------------------------- nemesis


NEMESIS_SPARE_BROKERS = ("broker-churn", "broker-churn-b")
"""The runner's route-churn brokers (``runner.CHURN_BROKERS``): never a nemesis target."""


class Nemesis(Scenario):
    """Many faults over one run, on a schedule drawn from the seed (:mod:`experiments.nemesis`).

    The brokers are on two lanes through fault proxies to every node, and in raft mode
    the gateways dial their peers through a :class:`RaftMesh`, so any broker link or
    Raft link can be cut, one way or both. The schedule is drawn (or read back from
    ``--schedule``) before the warm-up, printed, and written to the run's schedule.json,
    which gets each step's real outcome at the end. Every broker announces a fresh share
    each round (``ExperimentConfig.fresh_shares``), so every write has a unique value.

    The fleet also has a failover group (:class:`~experiments.failover.FailoverGroup`:
    in raft mode a master and a slave that opt in to raft failover, whose master the
    ``kill_master`` steps kill; in eventual mode its master alone, an ordinary broker),
    holding the watched topic :data:`~experiments.failover.FAILOVER_TOPIC`. It dials
    the nodes directly (no lane) and is no ``kill_broker`` target.
    """

    name = "nemesis"
    summary = "a seeded random schedule of partitions, pauses, kills and clock skews"
    raft_proxied = True
    fault_topics = (FAILOVER_TOPIC,)

    def __init__(self) -> None:
        self.schedule: Schedule | None = None
        self.failover: FailoverGroup | None = None

    def lanes(self, ctx: ExperimentContext) -> dict[str, list[str]]:
        return lanes_of(list(ctx.fleet.brokers))

    def plan(self, ctx: ExperimentContext) -> Schedule:
        """The schedule of this run in its mode: the stored one, else the seed's draw."""
        cfg = ctx.config
        if cfg.schedule_file:
            drawn = load_schedule(cfg.schedule_file)
        else:
            # The brokers of the workload only: the churn brokers are the runner's, the
            # failover group is kill_master's.
            spare = {*NEMESIS_SPARE_BROKERS, FAILOVER_BROKER}
            brokers = [b for b in sorted(ctx.fleet.brokers) if b not in spare]
            drawn = draw_schedule(
                cfg.seed,
                ctx.cluster.node_ids,
                brokers,
                cfg.duration_s,
                cfg.expiry_ms,
                cfg.clock_skew_ms,
            )
        return for_mode(drawn, cfg.mode)

    async def prepare(self, ctx: ExperimentContext) -> None:
        # Every round a write with a value of its own (unless the config turns it off):
        # a share a scan removed never comes back with an earlier value.
        ctx.fleet.fresh_shares = ctx.config.fresh_shares is not False
        self.schedule = self.plan(ctx)
        self.failover = FailoverGroup(ctx)
        self.failover.join()
        ctx.progress.line(
            f"nemesis schedule ({self.schedule.source}, seed {self.schedule.seed}, "
            f"{len(self.schedule.steps)} steps, quiet from t={self.schedule.quiet_from_s:g} s):"
        )
        for step in self.schedule.steps:
            ctx.progress.line("  " + step.describe())
        if any(step.kind == CLOCK_SKEW for step in self.schedule.steps) and not (
            faketime_available()
        ):
            ctx.progress.line(
                "  clock_skew steps: libfaketime is not installed (apt-get install faketime), "
                "so they forge the node's scan stamps instead of skewing its clock"
            )
        (ctx.cluster.run_dir.parent / SCHEDULE_FILE_NAME).write_text(schedule_json(self.schedule))

    async def run_schedule(self, ctx: ExperimentContext, start_ms: int) -> list[dict[str, Any]]:
        if self.schedule is None:
            raise FaultError("nemesis: no schedule (prepare did not run)")
        out = ctx.cluster.run_dir.parent / SCHEDULE_FILE_NAME
        try:
            return await run_schedule(ctx, self.schedule, start_ms, out, self.failover)
        finally:
            if self.failover is not None and self.failover.failover:
                ctx.notes["failover"] = self.failover.notes()


# ------------------------------------------------------------------------------ topics


class PartialTopicDelete(Scenario):
    """S4: the topic is deleted on its brokers, but the NameServer delete reaches n1 only."""

    name = "s4-partial-topic-delete"
    summary = "topic deleted on brokers; DELETE_TOPIC_IN_NAMESRV reaches n1 only"
    heals = False

    async def inject(self, ctx: ExperimentContext) -> list[FaultSpec]:
        topic = ctx.focus_topic
        for name in ctx.brokers_of(topic):
            broker = ctx.fleet.brokers[name]
            broker.topics.pop(topic, None)
            broker.bump_version()
        reached = ctx.cluster.node_ids[0]

        async def delete() -> list[Ack]:
            ok = await delete_topic_on(ctx.admin, ctx.nodes[reached], topic, ctx.timeout_s)
            return [Ack(reached, now_us())] if ok else []

        acks = await ctx.admin_write(KIND_DELETE_TOPIC, topic, "", delete)
        ok = bool(acks)
        missed = ctx.cluster.node_ids[1:]
        return [
            FaultSpec(
                FAULT_PARTIAL_DELETE,
                reached,
                {"topic": topic, "acknowledged": ok, "missed": missed},
            )
        ]


class TopicSubset(Scenario):
    """S5: a new topic is registered on n1 only (REGISTER_TOPIC_IN_NAMESRV to one node)."""

    name = "s5-topic-subset"
    summary = "new topic registered on n1 only (client-go#173); clients ask random nodes"
    heals = False
    subset_topics = (NEW_TOPIC,)

    async def inject(self, ctx: ExperimentContext) -> list[FaultSpec]:
        owner = ctx.fleet.brokers[sorted(ctx.fleet.brokers)[0]]
        template = next(iter(owner.topics.values()))
        config = type(template)(
            topic_name=NEW_TOPIC,
            read_queue_nums=template.read_queue_nums,
            write_queue_nums=template.write_queue_nums,
            perm=template.perm,
        )
        # Only the route knows the topic: the broker's own table does not (the admin
        # wrote to one NameServer), so its full registrations never spread it.
        probe = SimBroker(owner.name, owner.addr, {NEW_TOPIC: config}, [], DataVersion())
        target = ctx.cluster.node_ids[0]
        value = probe.route_item(NEW_TOPIC).encode()

        async def create() -> list[Ack]:
            addr = ctx.nodes[target]
            ok = await register_topic_on(ctx.admin, addr, NEW_TOPIC, probe, ctx.timeout_s)
            return [Ack(target, now_us())] if ok else []

        acks = await ctx.admin_write(KIND_CREATE_TOPIC, NEW_TOPIC, value, create)
        ok = bool(acks)
        return [
            FaultSpec(
                FAULT_TOPIC_SUBSET,
                target,
                {"topic": NEW_TOPIC, "acknowledged": ok, "broker": owner.name},
            )
        ]


class RegistrationStorm(Scenario):
    """S8: many extra brokers with large topic tables register at once, every period.

    The storm brokers are in the fleet from the start but silent (so the clients know
    their topics have brokers, and no consumer group is made for them); the fault starts
    them and the heal unregisters them. Every second storm broker's first topic is a
    :attr:`fault_topics` entry, so its creation and deletion are checked like any route."""

    name = "s8-registration-storm"
    summary = "16 extra brokers x 400 topics re-register with every node each period"
    fault_topics = tuple(f"storm-{i:03d}-t0000" for i in range(0, STORM_BROKERS, STORM_WATCH_EVERY))

    def __init__(self) -> None:
        self.names: list[str] = []

    async def prepare(self, ctx: ExperimentContext) -> None:
        from localcluster.demo import topic_table

        version = DataVersion(timestamp=now_ms(), counter=1)
        for i in range(STORM_BROKERS):
            name = f"storm-{i:03d}"
            topics = [f"storm-{i:03d}-t{j:04d}" for j in range(STORM_TOPICS_EACH)]
            broker = SimBroker(
                name,
                f"127.0.0.1:{STORM_FIRST_PORT + 2 * i}",
                topic_table(topics),
                list(ctx.cluster.node_ids),
                version,
            )
            broker.alive = broker.heartbeating = False
            self.names.append(name)
            ctx.fleet.brokers[name] = broker

    async def inject(self, ctx: ExperimentContext) -> list[FaultSpec]:
        await asyncio.gather(
            *(
                ctx.broker_write(
                    n, KIND_REGISTER, functools.partial(ctx.fleet.start_acknowledged, n)
                )
                for n in self.names
            )
        )
        return [
            FaultSpec(
                FAULT_STORM,
                "all",
                {
                    "brokers": STORM_BROKERS,
                    "topics_each": STORM_TOPICS_EACH,
                    "topics_checked": list(self.fault_topics),
                },
            )
        ]

    async def heal(self, ctx: ExperimentContext) -> None:
        await asyncio.gather(
            *(
                ctx.broker_write(n, KIND_UNREGISTER, functools.partial(ctx.fleet.stop_graceful, n))
                for n in self.names
            )
        )


SCENARIOS: dict[str, type[Scenario]] = {
    cls.name: cls
    for cls in (
        BrokerKill,
        BrokerStop,
        AsymmetricPartition,
        NamesrvRestart,
        PartialTopicDelete,
        TopicSubset,
        MembershipChange,
        RegistrationStorm,
        LeaderKill,
        MinorityPartition,
        ClockSkew,
        ClockSkewWithinAllowance,
        Nemesis,
    )
}


def scenario(name: str) -> Scenario:
    """A fresh scenario object by its command-line name."""
    try:
        return SCENARIOS[name]()
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}; one of {sorted(SCENARIOS)}") from None
