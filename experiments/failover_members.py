"""The broker processes of the failover group (experiments.failover has the whole story).

:class:`GroupMembers` runs the group's two simulated brokers over the wire: every
``heartbeat_ms`` each live member sends REGISTER_BROKER to every node with
``enableRaftFailover=true``, its offsets and its report of HA links; it takes the ids the
answers assign (a slave told id 0 was elected, a master told a slave id is a returning old
master), announces one more queue per topic once elected, and kills or starts a member for
the nemesis. What its rounds mean for the topic's history it tells
:class:`~experiments.failover_history.FailoverHistory`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from experiment_history.schema import (
    KIND_REGISTER,
    ORIGIN_CLIENT,
    OUTCOME_ERROR,
    OUTCOME_OK,
    OUTCOME_TIMEOUT,
)
from experiments.context import ExperimentContext
from experiments.failover_history import FAILOVER_BROKER, FailoverHistory
from experiments.workload import (
    BROKER_HOST,
    CLUSTER_NAME,
    KIND_HEARTBEAT,
    Ack,
    SimBroker,
    answer_log_place,
    now_us,
)
from remoting.client import RemotingClient, RemotingClientError
from remoting.codes import ResponseCode
from remoting.ha_report import HA_CLIENT_ADDR_FIELD, HA_SLAVE_ACKS_FIELD, encode_slave_acks
from remoting.model import MASTER_ID, DataVersion, TopicConfigSerializeWrapper
from remoting.register_body import register_broker_request
from remoting.register_request import ASSIGNED_BROKER_ID_FIELD, RAFT_FAILOVER_FIELD

FAILOVER_PORT = 10_800
"""The first member's broker port (its HA port the next); the second's is two above."""
FIRST_MASTER_ADDR = f"{BROKER_HOST}:{FAILOVER_PORT}"
"""The first member's address: the group's master when the run starts."""
HA_LINK_PORT = 51_800
"""The local port of each member's HA connection when it is the slave (as its master
sees the peer)."""
SLAVE_ID = 1
OFFSET_STEP = 4096
"""Bytes the master writes per registration round (its commit log grows; the slave keeps up)."""
SLAVE_TIMEOUT_FACTOR = 3
"""A slave registers with this many expiries as its heartbeat timeout: a skewed scan (the
nemesis draws at most two expiries of skew) can expire the master, never the slave, so
the group always keeps a member to elect and its topic never vanishes."""


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


class GroupMembers:
    """Runs the group's broker processes: their registration rounds, the ids the nodes
    assign them, the queues a new master announces, a hard kill and a restart."""

    name = FAILOVER_BROKER

    def __init__(self, ctx: ExperimentContext, history: FailoverHistory) -> None:
        self.ctx = ctx
        self.history = history
        self.topics = history.topics
        """The table the members announce (the history builds its route values from it)."""
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
        self.fresh_needed = False
        """The master's next round announces one more queue per topic (it was elected)."""
        self._retired: list[RemotingClient] = []

    def master(self) -> Member | None:
        """The live member that holds id 0, if any."""
        return next((m for m in self.members if m.alive and m.master), None)

    def slave(self) -> Member | None:
        """A live member that does not hold id 0, if any."""
        return next((m for m in self.members if m.alive and not m.master), None)

    def any_left(self, gone: set[str]) -> bool:
        """Whether a live member is not among the expired addresses ``gone``."""
        return any(m.addr not in gone and m.alive for m in self.members)

    # -- processes ----------------------------------------------------------------------

    def start(self, member: Member) -> None:
        """Start ``member``'s registration rounds (again, after a kill)."""
        member.alive = True
        member.task = asyncio.get_running_loop().create_task(self._beat(member))

    def kill(self, victim: Member) -> None:
        """Kill ``victim`` hard: its rounds stop, its connections stay open (no FIN) until
        :meth:`close`, the simulated broker's sends fail until the slave takes over."""
        victim.alive = False
        if victim.task is not None:
            victim.task.cancel()
        # No FIN: the connections stay open until the group closes.
        self._retired.append(victim.client)
        victim.client = RemotingClient()
        self.sim.alive = False  # sends fail until the slave takes over

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

    # -- registrations --------------------------------------------------------------

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

    async def _register_at(self, member: Member, node: str) -> tuple[Ack | None, int | None]:
        """One REGISTER_BROKER of ``member`` to ``node``, recorded as a heartbeat: (its
        acknowledgement when it succeeded, the id the answer assigned)."""
        request = self._request(member)
        invoke = now_us()
        assigned = None
        place = (0, 0)
        try:
            answer = await member.client.invoke(
                self.ctx.nodes[node], request, self.ctx.config.request_timeout_s
            )
            outcome = OUTCOME_OK if answer.code == ResponseCode.SUCCESS else OUTCOME_ERROR
            text = (answer.ext_fields or {}).get(ASSIGNED_BROKER_ID_FIELD, "")
            assigned = int(text) if text.isdigit() else None
            place = answer_log_place(answer)
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
        return (Ack(node, done, *place) if outcome == OUTCOME_OK else None), assigned

    async def _send(self, member: Member) -> list[tuple[Ack, int | None]]:
        """One round of ``member`` to every node: (ack, assigned id) of each ack."""
        nodes = list(self.ctx.cluster.node_ids)
        answers = await asyncio.gather(*(self._register_at(member, n) for n in nodes))
        return [(ack, a) for ack, a in answers if ack is not None]

    async def _round(self, member: Member) -> None:
        """One registration round. The master's is a write when the recorded route names
        it as the master but it was just elected, or the route lacks it (an expiry): it
        announces one more queue per topic first, so the route it writes is one no
        earlier write had. A member that believes it is the master while the route names
        another is a returning old master, told its slave id: no write."""
        history = self.history
        if member.master:
            self.offset += OFFSET_STEP
        if (
            member.master
            and self.ctx.recorder.recording
            and history.route_master == member.addr
            and (
                self.fresh_needed
                or self.ctx.registers.latest(history.topic) != history.value(member.addr)
            )
        ):
            self.fresh_needed = False
            self._fresh_queues()
            await self._write_round(member, history.value(member.addr))
            return
        acks = await self._send(member)
        self._heard(member, acks)

    async def _write_round(self, member: Member, value: str) -> None:
        """A master's round that changes the topic's route to ``value``, recorded at its
        RPC (``ExperimentContext.sent``), true from its first ack."""
        heard: list[tuple[Ack, int | None]] = []

        async def call() -> list[Ack]:
            heard.extend(await self._send(member))
            # An answer assigning it a slave id stored nothing: no ack of the write.
            return [ack for ack, a in heard if a is None or a == MASTER_ID]

        self.history.write_called()
        acks = await self.ctx.sent(
            f"{self.name}@{member.addr}",
            KIND_REGISTER,
            [(self.history.topic, value)],
            call,
            broker=self.name,
            origin=ORIGIN_CLIENT,
        )
        if acks:
            self.history.master_written(member.addr, value, min(ack.at_us for ack in acks))
        self._heard(member, heard)

    def _heard(self, member: Member, acks: list[tuple[Ack, int | None]]) -> None:
        """Take the ids the nodes assigned: a slave told id 0 was elected; a master told
        a slave id is a returning old master."""
        for ack, assigned in sorted(acks, key=lambda a: a[0].at_us):
            if assigned is None or assigned == member.broker_id:
                continue
            if assigned == MASTER_ID:
                self._elected(member, ack.node, ack.at_us)
            elif member.master:
                member.broker_id = assigned
                self.ctx.progress.line(
                    f"failover: {member.addr} came back as slave id {assigned} of {self.name}"
                )
            return

    def _elected(self, member: Member, node: str, ack_us: int) -> None:
        """``member`` heard from ``node`` (at ``ack_us``) that it holds id 0."""
        if not self.history.journal_fed:
            self.history.record_election(
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
