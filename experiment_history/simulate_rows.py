"""The history rows the model of :mod:`experiment_history.simulate` writes, in the run
schema's columns (:mod:`experiment_history.schema`)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from experiment_history.runs import HistoryWriter
from experiment_history.schema import (
    KIND_CONSUME_ALLOC,
    KIND_ROUTE_READ,
    KIND_SEND,
    NO_VERSION,
    OUTCOME_ERROR,
    OUTCOME_OK,
    canonical_queues,
)


class HistoryRows:
    """Lays out each kind of row the model writes (a node's change, a route read, a send,
    a consumer's allocation, a sampled node state, a true write, a fault) and numbers the
    operations in the order they are written.

    Operations other than writes get no ``origin`` column (the writer leaves it null).
    """

    def __init__(self, out: HistoryWriter) -> None:
        self._out = out
        self._op_id = 0

    def _next_op(self) -> int:
        self._op_id += 1
        return self._op_id

    def change(
        self,
        process: str,
        kind: str,
        node: str,
        topic: str,
        invoke_ms: int,
        complete_ms: int,
        value: str,
        version: int,
        broker: str,
        origin: str,
    ) -> None:
        """A register or expiry of ``topic``'s route, made by ``process`` on ``node``."""
        self._out.operation(
            (
                self._next_op(),
                process,
                kind,
                node,
                topic,
                invoke_ms,
                complete_ms,
                OUTCOME_OK,
                value,
                version,
                broker,
                "{}",
                invoke_ms * 1_000,
                complete_ms * 1_000,
                origin,
            )
        )

    def route_read(
        self,
        client: str,
        node: str,
        topic: str,
        invoke_ms: int,
        complete_ms: int,
        outcome: str,
        value: str,
        version: int,
    ) -> None:
        """A client's route query of ``topic`` at ``node`` and what it returned."""
        self._out.operation(
            (
                self._next_op(),
                client,
                KIND_ROUTE_READ,
                node,
                topic,
                invoke_ms,
                complete_ms,
                outcome,
                value,
                version,
                "",
                "{}",
                invoke_ms * 1_000,
                complete_ms * 1_000,
            )
        )

    def send(
        self,
        client: str,
        topic: str,
        invoke_ms: int,
        complete_ms: int,
        ok: bool,
        broker: str,
        queue_id: int,
        attempt: int,
    ) -> None:
        """One attempt of a producer's send to ``broker``'s queue ``queue_id``."""
        self._out.operation(
            (
                self._next_op(),
                client,
                KIND_SEND,
                "",
                topic,
                invoke_ms,
                complete_ms,
                OUTCOME_OK if ok else OUTCOME_ERROR,
                str(queue_id),
                NO_VERSION,
                broker,
                json.dumps({"attempt": attempt}),
                invoke_ms * 1_000,
                complete_ms * 1_000,
            )
        )

    def allocation(
        self, client: str, topic: str, at_ms: int, group: str, queues: Iterable[tuple[str, int]]
    ) -> None:
        """The queues (broker name, queue id) a consumer of ``group`` took on a rebalance."""
        self._out.operation(
            (
                self._next_op(),
                client,
                KIND_CONSUME_ALLOC,
                "",
                topic,
                at_ms,
                at_ms,
                OUTCOME_OK,
                canonical_queues(queues),
                NO_VERSION,
                "",
                json.dumps({"group": group}),
                at_ms * 1_000,
                at_ms * 1_000,
            )
        )

    def node_state(self, at_ms: int, node: str, topic: str, value: str, version: int) -> None:
        """The route ``node`` would answer for ``topic`` at a sampling instant."""
        self._out.node_state((at_ms, node, topic, value, version))

    def true_write(self, at_ms: int, topic: str, broker: str, kind: str, value: str) -> None:
        """A change of ``topic``'s real route (the value it must have from then on)."""
        self._out.write((at_ms, topic, broker, kind, value, NO_VERSION))

    def fault(self, start_ms: int, end_ms: int, kind: str, target: str, detail: str) -> None:
        """A fault the scenario injects; ``end_ms`` -1 when it never ends."""
        self._out.fault((start_ms, end_ms, kind, target, detail))
