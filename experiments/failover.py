"""A broker group with a master and a slave that opts in to raft failover, for the nemesis.

:class:`FailoverGroup` simulates the two brokers of :data:`FAILOVER_BROKER` over the wire,
as the real ones of ``tests/integration/test_broker_failover.py`` register
(docs/RAFT.md, "Failover"): every ``heartbeat_ms`` each live member sends REGISTER_BROKER
to every node with ``enableRaftFailover=true``, its offsets (``maxOffset``,
``confirmOffset``) and its report of HA links (``remoting.ha_report``): the master
vouches for the slave's HA connection (``haSlaveAcks``, the slave acknowledged all the
master wrote: in sync), the slave names that connection as its own (``haClientAddr``).
The group holds one watched topic, :data:`FAILOVER_TOPIC`, whose route value names the
group's master address (``RouteItem.master_addr``), so every route read of it records
which master a client was told.

In raft mode the nemesis' ``kill_master`` step (:meth:`FailoverGroup.kill_master`) kills
the master hard (its registrations stop, its connections stay open: no FIN); the leader's
scan expires it and, in the same applied ExpireBrokers, elects the slave. The slave hears
it in the answer to its next registration (``assignedBrokerId=0``), takes id 0 and
registers as the master with one more queue in each topic, so that route is a value no
earlier write had (the next failover back to the old address then writes a value of its
own too). At the step's end the old master starts again on a new connection, registers as
id 0, is told the slave id to take, and rejoins as the slave.

What the history gets (every write of :data:`FAILOVER_TOPIC` is recorded here, the topic
is the harness's own through ``ExperimentContext.truth_overrides``, so the fleet's
register model leaves it alone):

- the election, origin ``node``, process ``raft``, kind ``expire`` (it is part of the
  ExpireBrokers the leader committed) with ``extra.election``, from the node journal
  entry that reports it (:meth:`FailoverGroup.journal_entry`, when the context hands
  the journals to it: the scan's window, ``reported_by``, ``scan_seq`` and the Raft
  position), else from the first registration answer that tells the slave
  ``assignedBrokerId=0`` (window: from the kill, no scan can expire the master
  earlier, to that answer). It is a pending write of the register from the kill on,
  so the prober never infers it;
- an expiry of the master that elected nobody (journal only): the route keeps the
  group with no master (``-``);
- the new master's registration with its fresh queues, origin ``client``, and any
  master registration that puts the master back in a route that lacks it (after such
  an expiry), with fresh queues too.

A slave registers with :data:`SLAVE_TIMEOUT_FACTOR` expiries as its heartbeat timeout, so
a skewed scan (a nemesis ``clock_skew``) may expire a live master, and elect the slave,
but never both: the topic never vanishes, and its absent value is never written twice.

In eventual mode the group is the master alone, an ordinary broker of the fleet (its
heartbeat, expiries and writes are the fleet's): no slave, no failover, no
``kill_master`` (the nemesis skips it).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from experiment_history.schema import (
    KIND_EXPIRE,
    KIND_REGISTER,
    NO_MASTER_ADDR,
    ORIGIN_CLIENT,
    ORIGIN_NODE,
    OUTCOME_ERROR,
    OUTCOME_OK,
    OUTCOME_TIMEOUT,
    PROCESS_RAFT,
    RouteItem,
    canonical_route,
)
from experiments.context import JOURNAL_RAFT_KEYS, ExperimentContext
from experiments.workload import (
    BROKER_HOST,
    CLUSTER_NAME,
    KIND_HEARTBEAT,
    SimBroker,
    now_us,
)
from localcluster.demo import topic_table
from remoting.client import RemotingClient, RemotingClientError
from remoting.codes import ResponseCode
from remoting.ha_report import HA_CLIENT_ADDR_FIELD, HA_SLAVE_ACKS_FIELD, encode_slave_acks
from remoting.model import MASTER_ID, DataVersion, TopicConfig, TopicConfigSerializeWrapper
from remoting.register_body import RAFT_FAILOVER_FIELD, register_broker_request

FAILOVER_BROKER = "broker-failover"
FAILOVER_TOPIC = "failover-000"
FAILOVER_PORT = 10_800
"""The first member's broker port (its HA port the next); the second's is two above."""
HA_LINK_PORT = 51_800
"""The local port of each member's HA connection when it is the slave (as its master
sees the peer)."""
SLAVE_ID = 1
ASSIGNED_BROKER_ID_FIELD = "assignedBrokerId"
"""The registration answer's field telling a broker the id to take (gateway.dispatch)."""
OFFSET_STEP = 4096
"""Bytes the master writes per registration round (its commit log grows; the slave keeps up)."""
SLAVE_TIMEOUT_FACTOR = 3
"""A slave registers with this many expiries as its heartbeat timeout: a skewed scan (the
nemesis draws at most two expiries of skew) can expire the master, never the slave, so
the group always keeps a member to elect and its topic never vanishes."""
ELECTION_WAIT_S = 5.0
"""How long past its planned end a ``kill_master`` step waits for the election before the
old master starts again (after that the election write stays pending)."""


@dataclass(slots=True)
class Member:
    """One broker process of the group."""

    addr: str
    ha_addr: str
    link: str
    broker_id: int
    client: RemotingClient = field(default_factory=RemotingClient)
    alive: bool = True
    task: asyncio.Task[None] | None = None

    @property
    def master(self) -> bool:
        return self.broker_id == MASTER_ID


@dataclass(slots=True)
class _Election:
    """The election a kill started: the register handle of its pending write."""

    killed_addr: str
    new_addr: str
    value: str
    invoke_us: int
    handle: int
    done: asyncio.Event = field(default_factory=asyncio.Event)


class FailoverGroup:
    """The failover group of one run (see the module doc)."""

    name = FAILOVER_BROKER
    topic = FAILOVER_TOPIC

    def __init__(self, ctx: ExperimentContext) -> None:
        self.ctx = ctx
        self.failover = ctx.raft
        cfg = ctx.config
        self.topics: dict[str, TopicConfig] = topic_table(
            [FAILOVER_BROKER, CLUSTER_NAME, FAILOVER_TOPIC], cfg.queues
        )
        ports = (FAILOVER_PORT, FAILOVER_PORT + 2)
        self.members = [
            Member(
                f"{BROKER_HOST}:{port}",
                f"{BROKER_HOST}:{port + 1}",
                f"{BROKER_HOST}:{HA_LINK_PORT + i}",
                MASTER_ID if i == 0 else SLAVE_ID,
            )
            for i, port in enumerate(ports)
        ]
        self.sim = SimBroker(
            FAILOVER_BROKER,
            self.members[0].addr,
            self.topics,
            list(ctx.cluster.node_ids),
            DataVersion(timestamp=now_us() // 1_000, counter=1),
        )
        self.offset = OFFSET_STEP
        self.route_master = self.members[0].addr
        """The master the latest recorded write of the topic names."""
        self.last_invoke_us = 0
        """The call of the latest write of the topic recorded here (0: none yet)."""
        self.journal_fed = False
        """The nodes' journals reach :meth:`journal_entry`: the election is recorded from
        the journal entry that reports it (else from the first registration answer that
        tells the slave it holds id 0)."""
        self.fresh_needed = False
        """The master's next round announces one more queue per topic (it was elected)."""
        self.pending: _Election | None = None
        self.elections: list[dict[str, Any]] = []
        self._retired: list[RemotingClient] = []

    # -- set-up ---------------------------------------------------------------------

    def join(self) -> None:
        """Add the group to the run (before the warm-up): raft mode, its topic is the
        harness's own (``truth_overrides``) and the members' registrations start; eventual
        mode, the master joins the fleet as an ordinary broker."""
        fleet = self.ctx.fleet
        fleet.brokers[self.name] = self.sim
        if not self.failover:
            return  # the fleet heartbeats it like any broker
        self.sim.heartbeating = False  # this module registers the members
        self.ctx.truth_overrides[self.topic] = self.value(self.members[0].addr)
        self.ctx.closers.append(self.close)
        # The context hands each node journal entry to its readers before recording it
        # (``NodeJournals.readers``).
        self.ctx.journals.readers.append(self.journal_entry)
        self.journal_fed = True
        for member in self.members:
            self._start(member)

    def value(self, master: str) -> str:
        """The topic's route with ``master`` as the group's master and today's queues."""
        config = self.topics[self.topic]
        item = RouteItem(
            self.name, master, config.write_queue_nums, config.read_queue_nums, config.perm
        )
        return canonical_route([item])

    def master(self) -> Member | None:
        """The live member that holds id 0, if any."""
        return next((m for m in self.members if m.alive and m.master), None)

    # -- registrations --------------------------------------------------------------

    def _start(self, member: Member) -> None:
        member.alive = True
        member.task = asyncio.get_running_loop().create_task(self._beat(member))

    async def _beat(self, member: Member) -> None:
        while member.alive:
            await self._round(member)
            await asyncio.sleep(self.ctx.config.heartbeat_ms / 1000)

    def _request(self, member: Member) -> Any:
        fields = {
            RAFT_FAILOVER_FIELD: "true",
            "maxOffset": str(self.offset),
            "confirmOffset": str(self.offset),
        }
        if member.master:
            slaves = [(m.link, self.offset) for m in self.members if m.alive and not m.master]
            fields[HA_SLAVE_ACKS_FIELD] = encode_slave_acks(slaves)
        else:
            fields[HA_CLIENT_ADDR_FIELD] = member.link
        return register_broker_request(
            cluster_name=CLUSTER_NAME,
            broker_name=self.name,
            broker_id=member.broker_id,
            broker_addr=member.addr,
            ha_server_addr=member.ha_addr,
            wrapper=TopicConfigSerializeWrapper(
                data_version=self.sim.data_version, topic_config_table=self.topics
            ),
            enable_acting_master=None,
            heartbeat_timeout_ms=self.ctx.config.expiry_ms
            * (1 if member.master else SLAVE_TIMEOUT_FACTOR),
            extra_fields=fields,
        )

    async def _register_at(self, member: Member, node: str) -> tuple[int | None, int | None]:
        """One REGISTER_BROKER of ``member`` to ``node``, recorded as a heartbeat: (ack µs
        when it succeeded, the id the answer assigned)."""
        request = self._request(member)
        invoke = now_us()
        assigned = None
        try:
            answer = await member.client.invoke(
                self.ctx.nodes[node], request, self.ctx.config.request_timeout_s
            )
            outcome = OUTCOME_OK if answer.code == ResponseCode.SUCCESS else OUTCOME_ERROR
            text = (answer.ext_fields or {}).get(ASSIGNED_BROKER_ID_FIELD, "")
            assigned = int(text) if text.isdigit() else None
            remark = answer.remark or ""
        except RemotingClientError as exc:
            outcome = OUTCOME_TIMEOUT if "no answer" in str(exc) else OUTCOME_ERROR
            remark = str(exc)
        done = now_us()
        self.ctx.recorder.operation(
            process=f"{self.name}@{member.addr}",
            kind=KIND_HEARTBEAT,
            node=node,
            topic="",
            outcome=outcome,
            broker=self.name,
            extra={"remark": remark[:200]} if outcome != OUTCOME_OK else None,
            invoke_us=invoke,
            complete_us=done,
        )
        return (done if outcome == OUTCOME_OK else None), assigned

    async def _send(self, member: Member) -> list[tuple[str, int, int | None]]:
        """One round of ``member`` to every node: (node, ack µs, assigned id) of each ack."""
        nodes = list(self.ctx.cluster.node_ids)
        answers = await asyncio.gather(*(self._register_at(member, n) for n in nodes))
        return [(n, ack, a) for n, (ack, a) in zip(nodes, answers, strict=True) if ack is not None]

    async def _round(self, member: Member) -> None:
        """One registration round. The master's is a write when the recorded route names
        it as the master but it was just elected, or the route lacks it (an expiry): it
        announces one more queue per topic first, so the route it writes is one no
        earlier write had. A member that believes it is the master while the route names
        another is a returning old master, told its slave id: no write."""
        if member.master:
            self.offset += OFFSET_STEP
        if (
            member.master
            and self.ctx.recorder.recording
            and self.route_master == member.addr
            and (
                self.fresh_needed
                or self.ctx.registers.latest(self.topic) != self.value(member.addr)
            )
        ):
            self.fresh_needed = False
            self._fresh_queues()
            await self._write_round(member, self.value(member.addr))
            return
        acks = await self._send(member)
        self._heard(member, acks)

    async def _write_round(self, member: Member, value: str) -> None:
        """A master's round that changes the topic's route to ``value``, recorded at its
        RPC (``ExperimentContext.sent``), true from its first ack."""
        heard: list[tuple[str, int, int | None]] = []

        async def call() -> list[tuple[str, int]]:
            heard.extend(await self._send(member))
            # An answer assigning it a slave id stored nothing: no ack of the write.
            return [(n, ack) for n, ack, a in heard if a is None or a == MASTER_ID]

        self.last_invoke_us = now_us()
        acks = await self.ctx.sent(
            f"{self.name}@{member.addr}",
            KIND_REGISTER,
            [(self.topic, value)],
            call,
            broker=self.name,
            origin=ORIGIN_CLIENT,
        )
        if acks:
            self.route_master = member.addr
            self._truth(value, min(ack for _, ack in acks), KIND_REGISTER)
        self._heard(member, heard)

    def _heard(self, member: Member, acks: list[tuple[str, int, int | None]]) -> None:
        """Take the ids the nodes assigned: a slave told id 0 was elected; a master told
        a slave id is a returning old master."""
        for node, ack_us, assigned in sorted(acks, key=lambda a: a[1]):
            if assigned is None or assigned == member.broker_id:
                continue
            if assigned == MASTER_ID:
                self._elected(member, node, ack_us)
            elif member.master:
                member.broker_id = assigned
                self.ctx.progress.line(
                    f"failover: {member.addr} came back as slave id {assigned} of {self.name}"
                )
            return

    def _elected(self, member: Member, node: str, ack_us: int) -> None:
        """``member`` heard from ``node`` (at ``ack_us``) that it holds id 0."""
        if not self.journal_fed:
            self.record_election(
                member.addr,
                node,
                None,
                ack_us,
                {"seen_in": "registration answer", "assigned_broker_id": MASTER_ID},
            )
        member.broker_id = MASTER_ID
        for other in self.members:
            if other is not member and other.master:
                other.broker_id = SLAVE_ID  # dead, or told so at its next registration
        self.fresh_needed = True
        self.sim.addr = member.addr
        self.sim.alive = True

    def _fresh_queues(self) -> None:
        """One more read and write queue in every topic, and a new DataVersion."""
        for name, config in list(self.topics.items()):
            self.topics[name] = dataclasses.replace(
                config,
                read_queue_nums=config.read_queue_nums + 1,
                write_queue_nums=config.write_queue_nums + 1,
            )
        self.sim.bump_version()

    # -- the election as a write ------------------------------------------------------

    def record_election(
        self,
        new_addr: str,
        node: str,
        invoke_us: int | None,
        complete_us: int,
        extra: dict[str, Any],
    ) -> bool:
        """Record the election of ``new_addr`` as the write it is, unless already recorded
        (False then): completes the write a kill left pending, else (an election no kill
        of the harness caused, e.g. a skewed scan's) records one with window
        [``invoke_us``, ``complete_us``] (``invoke_us`` None: the previous write's call)."""
        if self.route_master == new_addr:
            return False
        pending = self.pending
        value = self.value(new_addr)
        registers = self.ctx.registers
        if pending is not None and pending.new_addr == new_addr:
            registers.complete(self.topic, pending.handle, complete_us)
            start = pending.invoke_us if invoke_us is None else invoke_us
            extra = extra | {"killed": pending.killed_addr}
            pending.done.set()
            self.pending = None
        else:
            start = invoke_us if invoke_us is not None else self._previous_call_us(complete_us)
            registers.record(self.topic, start, complete_us, value)
        self._node_write(
            node,
            value,
            start,
            complete_us,
            {"election": {"old": self.route_master, "new": new_addr}, **extra},
        )
        self.elections.append(
            {"new_master": new_addr, "old_master": self.route_master, "node": node}
        )
        self.ctx.progress.line(f"failover: {self.name} elected {new_addr} (seen by {node})")
        self.route_master = new_addr
        self._truth(value, complete_us, KIND_EXPIRE)
        return True

    def _node_write(
        self, node: str, value: str, invoke_us: int, complete_us: int, extra: dict[str, Any]
    ) -> None:
        """Record a change of the topic the raft cluster made (an election, an expiry) as
        the node write it is, reported by ``node``."""
        self.last_invoke_us = invoke_us
        self.ctx.recorder.operation(
            process=PROCESS_RAFT,
            kind=KIND_EXPIRE,
            node=node,
            topic=self.topic,
            outcome=OUTCOME_OK,
            value=value,
            broker=self.name,
            extra=extra,
            origin=ORIGIN_NODE,
            invoke_us=invoke_us,
            complete_us=complete_us,
        )

    def record_expiry(
        self, node: str, gone: set[str], invoke_us: int, complete_us: int, extra: dict[str, Any]
    ) -> bool:
        """A reported scan expired the recorded master without electing anyone: the route
        keeps the group with no master, or loses the topic when no member is left (a
        slave's longer timeout makes that all but impossible, :data:`SLAVE_TIMEOUT_FACTOR`)."""
        left = [m for m in self.members if m.addr not in gone and m.alive]
        value = self.value(NO_MASTER_ADDR) if left else ""
        if value == self.ctx.registers.latest(self.topic):
            return False
        self.ctx.registers.record(self.topic, invoke_us, complete_us, value)
        self._node_write(
            node, value, invoke_us, complete_us, {"expired": sorted(a for a in gone if a)} | extra
        )
        self._truth(value, complete_us, KIND_EXPIRE)
        return True

    def _previous_call_us(self, before_us: int) -> int:
        """The call of the latest write of the topic (an election no kill caused happened
        after the write it replaced was sent, at the earliest; before any, the warm-up's
        agreed route, which the recording's start completes)."""
        known = self.last_invoke_us or self.ctx.recorder.started_ms * 1_000
        return min(before_us, known)

    def _truth(self, value: str, at_us: int, kind: str) -> None:
        self.ctx.truth_overrides[self.topic] = value
        self.ctx.record_truth(self.name, kind, at_us // 1_000)

    # -- the nemesis step ---------------------------------------------------------------

    async def kill_master(self) -> tuple[Callable[[], Awaitable[None]], dict[str, Any]]:
        """Kill the master hard; returns how the step ends (wait for the election, then
        start the old master again, to rejoin as the slave) and the fault row's detail."""
        victim = self.master()
        slave = next((m for m in self.members if m.alive and not m.master), None)
        if victim is None or slave is None:
            raise RuntimeError(f"{self.name} has no live master and slave to fail over")
        victim.alive = False
        if victim.task is not None:
            victim.task.cancel()
        # No FIN: the connections stay open until the group closes.
        self._retired.append(victim.client)
        victim.client = RemotingClient()
        self.sim.alive = False  # sends fail until the slave takes over
        kill_us = now_us()
        value = self.value(slave.addr)
        handle = self.ctx.registers.record(self.topic, kill_us, None, value)
        election = _Election(victim.addr, slave.addr, value, kill_us, handle)
        self.pending = election
        detail = {"killed": victim.addr, "slave": slave.addr, "no_fin": True}

        async def restart_old_master() -> None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(election.done.wait(), ELECTION_WAIT_S)
            if self.pending is election:
                self._give_up(election)
            self._start(victim)

        return restart_old_master, detail

    def _give_up(self, election: _Election) -> None:
        """No node told of the election in time: its write stays pending (``timeout``:
        it may have happened or not)."""
        self.pending = None
        self.ctx.recorder.operation(
            process=PROCESS_RAFT,
            kind=KIND_EXPIRE,
            node="",
            topic=self.topic,
            outcome=OUTCOME_TIMEOUT,
            value=election.value,
            broker=self.name,
            extra={"election": {"old": election.killed_addr, "new": election.new_addr}},
            origin=ORIGIN_NODE,
            invoke_us=election.invoke_us,
            complete_us=now_us(),
        )
        self.ctx.progress.line(f"failover: no election of {election.new_addr} seen in time")

    def journal_entry(self, node: str, entry: dict[str, Any], offset_us: int) -> bool:
        """Record the elections of one node journal entry (NODE_STATUS, ``elections`` of an
        ``expire`` entry, ``gateway.expiry_reports``) of the run's failover group, with the
        entry's window moved onto the harness clock by ``offset_us`` (the wall clock's offset,
        ``experiments.journals.wall_offset_us``), and an expiry of the master that elected
        nobody; True when one was recorded. ``ExperimentContext`` calls it with each new
        entry before it records the entry's expiries (which leave the group's topic alone:
        it is in ``truth_overrides``)."""
        recorded = False
        elected = {e.get("broker_name") for e in entry.get("elections", [])}
        gone = {e.get("addr") for e in entry.get("expired", [])}
        source = {
            "reported_by": node,
            "scan_seq": int(entry["seq"]),
            "journal_kind": entry.get("kind", "expire"),
        } | {key: entry[key] for key in JOURNAL_RAFT_KEYS if key in entry}
        if self.route_master in gone and self.name not in elected:
            recorded |= self.record_expiry(
                node,
                gone,
                int(entry["started_us"]) - offset_us,
                int(entry["committed_us"]) - offset_us,
                source,
            )
        for election in entry.get("elections", []):
            if election.get("broker_name") != self.name:
                continue
            recorded |= self.record_election(
                str(election["new_master_addr"]),
                node,
                int(entry["started_us"]) - offset_us,
                int(entry["committed_us"]) - offset_us,
                source,
            )
        return recorded

    async def close(self) -> None:
        """Stop every member and close every connection (killed members' too)."""
        tasks = [m.task for m in self.members if m.task is not None]
        for member in self.members:
            member.alive = False
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        clients = [m.client for m in self.members] + self._retired
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)

    def notes(self) -> dict[str, Any]:
        """What the run's summary says of the group."""
        return {"elections": list(self.elections), "master": self.route_master}
