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
  entry that reports it (:class:`~experiments.failover_journal.JournalElections`, when
  the context hands the journals to it: the scan's window, ``reported_by``, ``scan_seq``
  and the Raft position), else from the first registration answer that tells the slave
  ``assignedBrokerId=0`` (window: from the kill, no scan can expire the master
  earlier, to that answer). It is a pending write of the register from the kill on,
  so the prober never infers it;
- an expiry of the master that elected nobody (journal only): the route keeps the
  group with no master (``-``);
- the new master's registration with its fresh queues, origin ``client``, and any
  master registration that puts the master back in a route that lacks it (after such
  an expiry), with fresh queues too.

A slave registers with :data:`~experiments.failover_members.SLAVE_TIMEOUT_FACTOR`
expiries as its heartbeat timeout, so a skewed scan (a nemesis ``clock_skew``) may expire
a live master, and elect the slave, but never both: the topic never vanishes, and its
absent value is never written twice.

In eventual mode the group is the master alone, an ordinary broker of the fleet (its
heartbeat, expiries and writes are the fleet's): no slave, no failover, no
``kill_master`` (the nemesis skips it).

The group is cut by job: :class:`~experiments.failover_members.GroupMembers` runs the
broker processes (registration rounds, assigned ids, kill and restart),
:class:`~experiments.failover_history.FailoverHistory` writes the topic's history rows
and truth, :class:`~experiments.failover_journal.JournalElections` reads the elections
out of the node journals; :class:`FailoverGroup` joins them to the run and plays the
nemesis step. The group's name and topic are re-exported here, the group's one entry
point for the scenario, the nemesis and the tests.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from experiments.context import ExperimentContext
from experiments.failover_history import (
    FAILOVER_BROKER as FAILOVER_BROKER,
    FAILOVER_TOPIC as FAILOVER_TOPIC,
    FailoverHistory,
)
from experiments.failover_journal import JournalElections
from experiments.failover_members import FIRST_MASTER_ADDR, GroupMembers

ELECTION_WAIT_S = 5.0
"""How long past its planned end a ``kill_master`` step waits for the election before the
old master starts again (after that the election write stays pending)."""


class FailoverGroup:
    """The failover group of one run: joins its members, history and journal reader to
    the run and plays the nemesis' ``kill_master`` step (see the module doc)."""

    name = FAILOVER_BROKER
    topic = FAILOVER_TOPIC

    def __init__(self, ctx: ExperimentContext) -> None:
        self.ctx = ctx
        self.failover = ctx.raft
        self.history = FailoverHistory(ctx, FIRST_MASTER_ADDR)
        self.members = GroupMembers(ctx, self.history)

    def join(self) -> None:
        """Add the group to the run (before the warm-up): raft mode, its topic is the
        harness's own (``truth_overrides``) and the members' registrations start; eventual
        mode, the master joins the fleet as an ordinary broker."""
        fleet = self.ctx.fleet
        fleet.brokers[self.name] = self.members.sim
        if not self.failover:
            return  # the fleet heartbeats it like any broker
        self.members.sim.heartbeating = False  # the members register themselves
        first_master = self.members.members[0].addr
        self.ctx.truth_overrides[self.topic] = self.history.value(first_master)
        self.ctx.closers.append(self.close)
        # The context hands each node journal entry to its readers before recording it
        # (``NodeJournals.readers``).
        self.ctx.journals.readers.append(JournalElections(self.history, self.members))
        self.history.journal_fed = True
        for member in self.members.members:
            self.members.start(member)

    async def kill_master(self) -> tuple[Callable[[], Awaitable[None]], dict[str, Any]]:
        """Kill the master hard; returns how the step ends (wait for the election, then
        start the old master again, to rejoin as the slave) and the fault row's detail."""
        victim = self.members.master()
        slave = self.members.slave()
        if victim is None or slave is None:
            raise RuntimeError(f"{self.name} has no live master and slave to fail over")
        self.members.kill(victim)
        election = self.history.start_election(victim.addr, slave.addr)
        detail = {"killed": victim.addr, "slave": slave.addr, "no_fin": True}

        async def restart_old_master() -> None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(election.done.wait(), ELECTION_WAIT_S)
            if self.history.pending is election:
                self.history.give_up(election)
            self.members.start(victim)

        return restart_old_master, detail

    async def close(self) -> None:
        """Stop every member and close every connection (killed members' too)."""
        await self.members.close()

    def notes(self) -> dict[str, Any]:
        """What the run's summary says of the group."""
        return self.history.notes()
