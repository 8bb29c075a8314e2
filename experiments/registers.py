"""The writes of every watched topic's route register, as the history records them.

Each topic's route is a register (spark_jobs.checker). Its writes come from two places:

* **acknowledged writes**, recorded at their RPC: the harness sent them (a broker's
  registration or unregistration) and knows when it sent them and when the first node
  acknowledged them; the value is what a correct register holds after the write, the
  register's latest value with the broker's share added or removed (a broker that
  stopped starts again with one more queue, ``SimBroker.next_incarnation``, so the share
  a start brings back is one no earlier write had);
* **reported writes**: a change a node made that no client asked for (a scan's expiry in
  either mode, eventual mode's unregistration when a broker connection closed), as the
  node's journal reports it (``NodeJournals.collect``), with its window;
* **inferred writes**, for what the system does on its own and nothing reports: the
  prober sees a node change to a value no recorded write can explain, and the window
  opens at that node's previous probe (the change happened on that node after it last
  answered otherwise). With the journals and fresh shares (the nemesis) nothing is left
  for it in a correct run: it stays as a detector, so the count shows an unreported
  change. A value no write had but made of shares and absences recorded writes had
  (:meth:`RegisterLog.shares_written`) is a node that applied them in another order: a
  read, not a write.

:class:`RegisterLog` keeps them, per topic, so the prober can tell an explained change
from one it must infer. It also keeps each broker's last few **quiet shares**: an
acknowledged registration that changed no register the harness knew of is no write when
it is sent, but if a raft expiry of that broker is reported later and the registration
may have come after it (its ack is not before the scan began), it put the broker's share
back, and the expiry's recorder restores it as a write (``ExperimentContext``).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from experiment_history.schema import RouteItem, canonical_route, parse_route
from experiment_history.superseding import ABSENT, TIME_MAX_US, TimedWrite, TopicWrites

INITIAL = ABSENT
"""The value of a register no write has touched: the topic does not exist."""


@dataclass(frozen=True, slots=True)
class RecordedWrite:
    """One write of a register: its window in microseconds (``complete_us`` None:
    pending), value and, in raft mode, its place in the log's order: the table version
    its command left (``position``, the same on every node; 0: unknown)."""

    invoke_us: int
    complete_us: int | None
    value: str
    position: int = 0


def with_broker(value: str, broker: str, item: RouteItem | None) -> str:
    """``value`` with ``broker``'s share replaced by ``item`` (None: removed)."""
    items = [i for i in parse_route(value) if i.broker != broker]
    if item is not None:
        items.append(item)
    return canonical_route(items)


@dataclass(frozen=True, slots=True)
class QuietShare:
    """An acknowledged registration of ``broker`` that changed no register when sent:
    its window in microseconds, the node that acknowledged it first, every node that did,
    and the broker's share of each watched topic it carried."""

    broker: str
    invoke_us: int
    complete_us: int
    node: str
    acked_by: tuple[str, ...]
    items: tuple[tuple[str, RouteItem], ...]
    position: int = 0
    """Raft mode: the table version the registration's command left (0: none named)."""


QUIET_SHARES_KEPT = 16
"""Quiet shares kept per broker: a periodic registration a second apart covers the few
seconds a raft expiry takes to be reported (the prober collects reports every round)."""


class RegisterLog:
    """The recorded writes of every topic, in the order they were recorded."""

    def __init__(self) -> None:
        self._writes: dict[str, list[RecordedWrite]] = {}
        self._quiet: dict[str, deque[QuietShare]] = {}
        self._read: dict[str, tuple[int, str]] = {}
        self._values: dict[str, dict[str, int]] = {}
        """Per topic: each written value and how many writes had it."""
        self._restarted: set[str] = set()
        self._reached: dict[tuple[str, str], str] = {}
        """Per (node, topic): the value an eventual node's journal said its own change left
        it at, when an earlier write already had that value (:meth:`note_reached`)."""
        self._order: dict[str, dict[str, int]] = {}
        """Per topic: each written value and the number of its (last) write."""
        self._shares: dict[str, dict[tuple[str, RouteItem], int]] = {}
        """Per topic: every (broker, share) a write's value held, and the number of the
        first write that held it."""
        self._naming: dict[str, dict[str, int]] = {}
        """Per topic: how many writes' values name each broker (fewer than all: some
        write's value lacks it)."""

    def clear(self) -> None:
        """Forget every write (the warm-up's are not part of the history)."""
        self._writes.clear()
        self._quiet.clear()
        self._read.clear()
        self._values.clear()
        self._restarted.clear()
        self._reached.clear()
        self._order.clear()
        self._shares.clear()
        self._naming.clear()

    def note_quiet(self, share: QuietShare) -> None:
        """Keep ``share`` (the broker's oldest kept one goes)."""
        self._quiet.setdefault(share.broker, deque(maxlen=QUIET_SHARES_KEPT)).append(share)

    def quiet_since(self, brokers: Sequence[str], since_us: int) -> list[QuietShare]:
        """The kept quiet shares of ``brokers`` acknowledged at or after ``since_us``, in
        the order of their acks; each is returned once."""
        found: list[QuietShare] = []
        for broker in brokers:
            kept = self._quiet.get(broker)
            if not kept:
                continue
            found.extend(q for q in kept if q.complete_us >= since_us)
            self._quiet[broker] = deque(
                (q for q in kept if q.complete_us < since_us), maxlen=QUIET_SHARES_KEPT
            )
        return sorted(found, key=lambda q: (q.complete_us, q.broker))

    def record(
        self, topic: str, invoke_us: int, complete_us: int | None, value: str, position: int = 0
    ) -> int:
        """Add one write of ``topic`` (acknowledged, pending or inferred; ``position``: its
        place in the raft log's order when known, :class:`RecordedWrite`); returns its
        handle for :meth:`complete`."""
        writes = self._writes.setdefault(topic, [])
        writes.append(RecordedWrite(invoke_us, complete_us, value, position))
        self._index(topic, len(writes) - 1, value)
        return len(writes) - 1

    def _index(self, topic: str, handle: int, value: str, count: int = 1) -> None:
        """Count write ``handle``'s ``value`` in (``count`` 1) or out (-1) of the indexes
        :meth:`shares_written` and :meth:`moved_on` read."""
        values = self._values.setdefault(topic, {})
        values[value] = values.get(value, 0) + count
        order = self._order.setdefault(topic, {})
        if count > 0:
            order[value] = max(order.get(value, handle), handle)
            shares = self._shares.setdefault(topic, {})
            for item in parse_route(value):
                key = (item.broker, item)
                shares[key] = min(shares.get(key, handle), handle)
        elif not values[value]:
            del values[value]
            order.pop(value, None)
        naming = self._naming.setdefault(topic, {})
        for item in parse_route(value):
            naming[item.broker] = naming.get(item.broker, 0) + count

    def revalue(self, topic: str, handle: int, value: str) -> None:
        """The pending write ``handle`` of ``topic`` turned out to leave ``value``: raft
        mode, where the log put an expiry reported after the write was sent before it
        (``ExperimentContext.sent``)."""
        writes = self._writes[topic]
        old = writes[handle].value
        if old == value:
            return
        self._index(topic, handle, old, -1)
        writes[handle] = dataclasses.replace(writes[handle], value=value)
        self._index(topic, handle, value)

    def complete(self, topic: str, handle: int, complete_us: int, position: int = 0) -> None:
        """A pending write of ``topic`` was acknowledged at ``complete_us`` (``position``:
        the place in the raft log its answers named, 0: none)."""
        writes = self._writes[topic]
        writes[handle] = dataclasses.replace(
            writes[handle], complete_us=complete_us, position=position
        )

    def note_read(self, topic: str, value: str, invoke_us: int) -> None:
        """A node answered ``value`` to a read of ``topic`` sent at ``invoke_us`` (the
        prober's and the follow-up reader's reads): what :meth:`latest` may settle on."""
        seen = self._read.get(topic)
        if seen is None or invoke_us >= seen[0]:
            self._read[topic] = (invoke_us, value)

    def latest(self, topic: str, before: int = 0, excluding: int = -1) -> str:
        """What a correct register holds now, as far as the history can tell: the value of
        the latest completed write, unless writes overlapped so that more than one value
        is still possible and a read sent after every write was invoked returned one of
        them (a read sent before one of them was acknowledged says nothing: that one may
        have landed after it). The next write's value is built on this one, so it must
        be the value the system settled on: an expiry the leader committed while a
        registration of another broker was on its way can end after it or before it,
        and only a read tells.

        In raft mode the writes whose places in the log are known (``position``) are
        ordered by the log, not by when their answers came: an expiry reported by a node
        that applied it late ends after a registration the log put after it. The latest such
        write is the latest write when the latest answer was one of them. ``before``
        (a place in the log): what the register held just before it, leaving out the
        writes the log put at or after it; ``excluding``: the handle of a write left
        out altogether (the one being valued: :meth:`revalue`)."""
        writes = self._writes.get(topic, [])
        if excluding >= 0:
            writes = writes[:excluding] + writes[excluding + 1 :]
        done = [
            w for w in writes if w.complete_us is not None and not (before and w.position >= before)
        ]
        if not done:
            return INITIAL
        last = max(done, key=lambda w: w.complete_us or 0)
        if last.position:
            last = max(
                (w for w in done if w.position), key=lambda w: (w.position, w.complete_us or 0)
            )
        newest = last.value
        seen = self._read.get(topic)
        if seen is None or seen[1] == newest:
            return newest
        read_us, value = seen
        # Sent after every write was sent and every acknowledged one came back: a write
        # still on its way when the read was sent may have landed after it.
        horizon = max(max(w.invoke_us for w in writes), max(w.complete_us or 0 for w in done))
        if read_us < horizon:
            return newest  # a write may have landed since that read
        if value in self.candidates(topic, read_us, read_us):
            return value
        return newest

    def shares_written(self, topic: str, value: str, node: str = "") -> bool:
        """True when every broker's part of ``value`` is one a recorded write of ``topic``
        left it in: each share in ``value`` is the share of its broker in some write's
        value, and each broker some write named but ``value`` lacks is absent from some
        write's value (any broker, when ``node``, whose answer it is, restarted:
        :meth:`note_restart`), and ``value`` itself is no write's: a node back at a
        value a write had, past the writes that superseded it, is a change nobody
        reported (a broker's unchanged registration after an expiry), unless ``node``
        restarted (it may answer any earlier value while the brokers fill it again).

        Such a value needs no write of its own to explain it: it is the recorded writes'
        changes put together in an order no single register went through (a node that
        missed one broker's round and got the next of another: eventual mode's
        divergence), a read the checker judges. A value with a share or an absence no
        write had is a change nobody reported."""
        total = len(self._writes.get(topic, []))
        restarted = node in self._restarted
        if not total or (value in self._values.get(topic, ()) and not restarted):
            return False
        shares = self._shares.get(topic, {})
        naming = self._naming.get(topic, {})
        items = {i.broker: i for i in parse_route(value)}
        return all((b, i) in shares for b, i in items.items()) and all(
            restarted or count < total for b, count in naming.items() if b not in items
        )

    def written(self, topic: str, value: str) -> bool:
        """True when a recorded write of ``topic`` had ``value``."""
        return value in self._values.get(topic, ())

    def moved_on(self, topic: str, old: str, new: str) -> bool:
        """True when ``new`` is a value a recorded write of ``topic`` had, recorded after
        every write ``old`` needs (:meth:`_position`): a node that goes from one to the
        other applied later writes, even if others superseded them since (a lagging node
        catching up part of the way: a stale read, not a write). ``old`` may be a value
        no write had, the recorded writes' shares put together (eventual mode: a node
        that never heard of a broker the others hold). Going the other way, back to an
        earlier write's value, is a change nobody reported."""
        order = self._order.get(topic, {})
        since = self._position(topic, old)
        return new in order and since is not None and order[new] > since

    def _position(self, topic: str, value: str) -> int | None:
        """The number of the last write ``value`` needs: its own (last) write's when a
        write had it, else the latest of the first writes that held each of its shares;
        None when a share of it is one no write had."""
        order = self._order.get(topic, {})
        if value in order:
            return order[value]
        shares = self._shares.get(topic, {})
        last = -1
        for item in parse_route(value):
            first = shares.get((item.broker, item))
            if first is None:
                return None
            last = max(last, first)
        return last

    def note_reached(self, node: str, topic: str, value: str) -> None:
        """An eventual ``node``'s journal reported a change of its own that left
        ``topic`` at ``value``, a value an earlier write already had (often the empty
        route: every broker of the topic expired there, as on another node before), so
        no write of its own is recorded (its value would repeat). Until ``node`` answers
        another value, its reads of ``value`` are that earlier write's, for the checker
        to judge, not a change nobody reported (:meth:`journal_reached`)."""
        self._reached[(node, topic)] = value

    def journal_reached(self, node: str, topic: str, value: str) -> bool:
        """True when ``node``'s answer ``value`` for ``topic`` is the one its journal last
        reported reaching (:meth:`note_reached`); any other answer ends that report's
        reach, so a later return to ``value`` that no journal reports is a change."""
        reached = self._reached.get((node, topic))
        if reached is None:
            return False
        if reached != value:
            del self._reached[(node, topic)]
            return False
        return True

    def note_restart(self, node: str) -> None:
        """``node`` started again (its journal says so, or the harness restarted it):
        eventual mode's table starts empty and a raft node catches up from the state it
        reloaded, so from now on any broker may be missing from its answer for any topic
        (:meth:`shares_written`)."""
        self._restarted.add(node)

    def candidates(self, topic: str, invoke_us: int, complete_us: int) -> set[str]:
        """Every value a linearizable register could return to a read in
        [``invoke_us``, ``complete_us``] (:mod:`experiment_history.superseding`, the
        rule the anomaly classes read the history with); a pending write may land any
        time after its call."""
        writes = TopicWrites(
            TimedWrite(
                w.value, w.invoke_us, TIME_MAX_US if w.complete_us is None else w.complete_us
            )
            for w in self._writes.get(topic, [])
        )
        return writes.possible_values(invoke_us, complete_us)
