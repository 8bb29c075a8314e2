"""The writes of every watched topic's route register, as the history records them.

Each topic's route is a register (spark_jobs.checker). Its writes come from two places:

* **acknowledged writes**, recorded at their RPC: the harness sent them (a broker's
  registration or unregistration) and knows when it sent them and when the first node
  acknowledged them; the value is what a correct register holds after the write, the
  register's latest value with the broker's share added or removed;
* **reported writes**: a raft expiry, as the leader whose scan committed it reports it in
  NODE_STATUS (``ExperimentContext.collect_expiries``), with the scan's window;
* **inferred writes**, for what the system does on its own and nothing reports (eventual
  mode's expiries by each node's scan, a route a broker's heartbeat brings back after
  one): the prober sees a node change to
  a value no recorded write can explain, and the window opens at that node's previous
  probe (the change happened on that node after it last answered otherwise).

:class:`RegisterLog` keeps both, per topic, so the prober can tell an explained change
from one it must infer.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from experiment_history.schema import RouteItem, canonical_route, parse_route
from experiment_history.superseding import ABSENT, TIME_MAX_US, TimedWrite, TopicWrites

INITIAL = ABSENT
"""The value of a register no write has touched: the topic does not exist."""


@dataclass(frozen=True, slots=True)
class RecordedWrite:
    """One write of a register: its window in microseconds (``complete_us`` None:
    pending) and value."""

    invoke_us: int
    complete_us: int | None
    value: str


def with_broker(value: str, broker: str, item: RouteItem | None) -> str:
    """``value`` with ``broker``'s share replaced by ``item`` (None: removed)."""
    items = [i for i in parse_route(value) if i.broker != broker]
    if item is not None:
        items.append(item)
    return canonical_route(items)


class RegisterLog:
    """The recorded writes of every topic, in the order they were recorded."""

    def __init__(self) -> None:
        self._writes: dict[str, list[RecordedWrite]] = {}

    def clear(self) -> None:
        """Forget every write (the warm-up's are not part of the history)."""
        self._writes.clear()

    def record(self, topic: str, invoke_us: int, complete_us: int | None, value: str) -> int:
        """Add one write of ``topic`` (acknowledged, pending or inferred); returns its
        handle for :meth:`complete`."""
        writes = self._writes.setdefault(topic, [])
        writes.append(RecordedWrite(invoke_us, complete_us, value))
        return len(writes) - 1

    def complete(self, topic: str, handle: int, complete_us: int) -> None:
        """A pending write of ``topic`` was acknowledged at ``complete_us``."""
        writes = self._writes[topic]
        writes[handle] = dataclasses.replace(writes[handle], complete_us=complete_us)

    def latest(self, topic: str) -> str:
        """The value of the latest completed write (what a correct register holds now)."""
        done = [w for w in self._writes.get(topic, ()) if w.complete_us is not None]
        if not done:
            return INITIAL
        return max(done, key=lambda w: w.complete_us or 0).value

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
