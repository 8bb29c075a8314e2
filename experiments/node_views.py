"""Eventual mode's model of each node's own table: what a node's own change leaves it at.

An eventual node holds what the brokers it heard from registered with it, nothing more:
a registration only some nodes acknowledged (a cut link, a paused node) is in their
tables and not in the others'. So the value an eventual node's journaled expiry (or a
closed connection's unregistration) leaves a topic at is *that node's* route less the
removed brokers, not the register's latest value less them (which would keep shares the
node never had, and make every later answer of the node look like a write nobody made).

:class:`NodeViews` keeps, per (node, topic), each broker's share as the node last held it
and since when (harness µs):

* an acknowledged registration puts the broker's shares in (stamped with the answer:
  the node applied it before answering), an acknowledged unregistration takes them out;
* the node's own removal (:meth:`removed`) takes them out at the change's end;
* a node's answer to a read sent at ``invoke_us`` is its table then: it replaces every
  share not changed since (a share an answer came back with after the read was sent is
  newer than what the read saw);
* a restarted eventual node starts empty (:meth:`restarted`).

The prober takes an eventual node's answer equal to its modelled table as a read (a
stale or divergent one, for the checker), never as a write nobody reported: the node is
where its own recorded changes left it.

Raft mode needs none of it: every node applies the one log, whose order the register
follows (``RegisterLog.latest``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from experiment_history.schema import RouteItem, canonical_route, parse_route


@dataclass(frozen=True, slots=True)
class _Held:
    item: RouteItem | None
    """None: the node holds nothing of the broker for this topic."""
    since_us: int


class NodeViews:
    """Each node's table, per watched topic, as far as the harness saw it change."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, str], dict[str, _Held]] = {}

    def acked(
        self, node: str, broker: str, items: Mapping[str, RouteItem | None], at_us: int
    ) -> None:
        """``node`` acknowledged at ``at_us`` a write setting ``broker``'s share of each
        topic of ``items`` (None: removed)."""
        for topic, item in items.items():
            self._held.setdefault((node, topic), {})[broker] = _Held(item, at_us)

    def answered(self, node: str, topic: str, value: str, invoke_us: int) -> None:
        """``node`` answered ``value`` for ``topic`` to a read sent at ``invoke_us``."""
        held = self._held.setdefault((node, topic), {})
        present = {item.broker: item for item in parse_route(value)}
        for broker in set(held) | set(present):
            known = held.get(broker)
            if known is None or known.since_us < invoke_us:
                held[broker] = _Held(present.get(broker), invoke_us)

    def removed(self, node: str, brokers: Iterable[str], at_us: int) -> None:
        """``node`` itself removed ``brokers`` from its table, done at ``at_us``."""
        gone = set(brokers)
        for (holder, _), held in self._held.items():
            if holder == node:
                for broker in gone & set(held):
                    held[broker] = _Held(None, at_us)

    def restarted(self, node: str) -> None:
        """``node`` started again with an empty table."""
        for key in [k for k in self._held if k[0] == node]:
            del self._held[key]

    def value(self, node: str, topic: str) -> str:
        """The route ``node`` holds for ``topic``, canonical (``""``: none)."""
        held = self._held.get((node, topic), {})
        return canonical_route(h.item for h in held.values() if h.item is not None)
