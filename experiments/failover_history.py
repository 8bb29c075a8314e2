"""The history rows of the failover group's topic (experiments.failover has the whole story).

:class:`FailoverHistory` keeps what the history knows of :data:`FAILOVER_TOPIC`: the master
its latest recorded write names, the call of that write, the election a kill left pending,
and the elections seen. It writes the rows no client sends (an election, an expiry that
elected nobody, an election that never showed), completes the register writes they are,
and moves the harness's truth of the topic (``ExperimentContext.truth_overrides``) with
every recorded write, the members' client writes included. It sends nothing: the members
(experiments.failover_members) register, the journal reader
(experiments.failover_journal) tells it what the nodes reported.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from experiment_history.schema import (
    KIND_EXPIRE,
    KIND_REGISTER,
    NO_MASTER_ADDR,
    ORIGIN_NODE,
    OUTCOME_OK,
    OUTCOME_TIMEOUT,
    PROCESS_RAFT,
    RouteItem,
    canonical_route,
)
from experiments.context import ExperimentContext
from experiments.workload import CLUSTER_NAME, now_us
from localcluster.demo import topic_table
from remoting.model import TopicConfig

FAILOVER_BROKER = "broker-failover"
FAILOVER_TOPIC = "failover-000"


@dataclass(slots=True)
class PendingElection:
    """The election a kill started: the register handle of its pending write."""

    killed_addr: str
    new_addr: str
    value: str
    invoke_us: int
    handle: int
    done: asyncio.Event = field(default_factory=asyncio.Event)


class FailoverHistory:
    """Records the writes of the group's topic: the route values, elections, expiries and
    the pending election of a kill, and the truth each recorded write sets."""

    name = FAILOVER_BROKER
    topic = FAILOVER_TOPIC

    def __init__(self, ctx: ExperimentContext, first_master: str) -> None:
        self.ctx = ctx
        self.topics: dict[str, TopicConfig] = topic_table(
            [FAILOVER_BROKER, CLUSTER_NAME, FAILOVER_TOPIC], ctx.config.queues
        )
        """The group's topic table: the members announce it (and grow it when one is
        elected), the route values recorded here are built from it."""
        self.route_master = first_master
        """The master the latest recorded write of the topic names."""
        self.last_invoke_us = 0
        """The call of the latest write of the topic recorded here (0: none yet)."""
        self.journal_fed = False
        """The nodes' journals reach the journal reader: the election is recorded from
        the journal entry that reports it (else from the first registration answer that
        tells the slave it holds id 0)."""
        self.pending: PendingElection | None = None
        self.elections: list[dict[str, Any]] = []

    def value(self, master: str) -> str:
        """The topic's route with ``master`` as the group's master and today's queues."""
        config = self.topics[self.topic]
        item = RouteItem(
            self.name, master, config.write_queue_nums, config.read_queue_nums, config.perm
        )
        return canonical_route([item])

    # -- the members' own writes ------------------------------------------------------

    def write_called(self) -> None:
        """A master's registration round that changes the route is being sent now."""
        self.last_invoke_us = now_us()

    def master_written(self, addr: str, value: str, ack_us: int) -> None:
        """The master at ``addr`` wrote ``value``, first acknowledged at ``ack_us``."""
        self.route_master = addr
        self._truth(value, ack_us, KIND_REGISTER)

    # -- the election as a write ------------------------------------------------------

    def start_election(self, killed_addr: str, new_addr: str) -> PendingElection:
        """A kill of the master at ``killed_addr`` starts now: the election of
        ``new_addr`` is a pending write of the register from now on (so the prober never
        infers it) until a node reports it or :meth:`give_up` says it never showed."""
        kill_us = now_us()
        value = self.value(new_addr)
        handle = self.ctx.registers.record(self.topic, kill_us, None, value)
        election = PendingElection(killed_addr, new_addr, value, kill_us, handle)
        self.pending = election
        return election

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

    def record_expiry(
        self,
        node: str,
        gone: set[str],
        left: bool,
        invoke_us: int,
        complete_us: int,
        extra: dict[str, Any],
    ) -> bool:
        """A reported scan expired the recorded master without electing anyone: the route
        keeps the group with no master, or loses the topic when no member is ``left`` (a
        slave's longer timeout makes that all but impossible,
        ``experiments.failover_members.SLAVE_TIMEOUT_FACTOR``)."""
        value = self.value(NO_MASTER_ADDR) if left else ""
        if value == self.ctx.registers.latest(self.topic):
            return False
        self.ctx.registers.record(self.topic, invoke_us, complete_us, value)
        self._node_write(
            node, value, invoke_us, complete_us, {"expired": sorted(a for a in gone if a)} | extra
        )
        self._truth(value, complete_us, KIND_EXPIRE)
        return True

    def give_up(self, election: PendingElection) -> None:
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

    def notes(self) -> dict[str, Any]:
        """What the run's summary says of the group."""
        return {"elections": list(self.elections), "master": self.route_master}

    # -- rows and truth -----------------------------------------------------------------

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

    def _previous_call_us(self, before_us: int) -> int:
        """The call of the latest write of the topic (an election no kill caused happened
        after the write it replaced was sent, at the earliest; before any, the warm-up's
        agreed route, which the recording's start completes)."""
        known = self.last_invoke_us or self.ctx.recorder.started_ms * 1_000
        return min(before_us, known)

    def _truth(self, value: str, at_us: int, kind: str) -> None:
        self.ctx.truth_overrides[self.topic] = value
        self.ctx.record_truth(self.name, kind, at_us // 1_000)
