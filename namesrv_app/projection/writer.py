"""The projection writer: one thread that keeps the node's Django tables equal to its table.

The apply thread merges each command's changed keys into one waiting
:class:`~namesrv_app.projection.delta.Delta` (:meth:`ProjectionWriter.on_applied`); this
thread takes it whole, fills in the topics and wire routes it moved, and writes it in one
transaction (:mod:`namesrv_app.projection.rows`), at its share of a core
(:mod:`namesrv_app.projection.pacing`), with a digest when one is due
(:mod:`namesrv_app.projection.digest`). The package docstring tells the whole trip.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.db import close_old_connections, connections

from namesrv_app.db_router import PROJECTION_DB
from namesrv_app.events import ChangeEvent, EventPublisher, null_publisher, publish_safely
from namesrv_app.projection.delta import (
    Delta,
    moved_routes,
    read_delta,
    read_full_state,
    read_topics,
)
from namesrv_app.projection.digest import (
    DIGEST_INTERVAL_S,
    LIVENESS_DIGEST_INTERVAL_S,
    DigestSchedule,
)
from namesrv_app.projection.pacing import DutyCycle, pace_this_thread
from namesrv_app.projection.rows import write_delta, write_full_state
from raftstore.commands import Command
from raftstore.replicator import Replicator
from raftstore.results import ApplyResult

log = logging.getLogger(__name__)

LIVENESS_LINGER_S = 1.0
"""A batch of liveness-only deltas (heartbeats: live-broker rows) waits this long for
more before it is written, so 1k brokers re-registering every 30 s cost about one
transaction a second instead of 33. Any other delta, a flush or a stop ends the wait."""
IDLE_POLL_S = 0.5
"""How long the writer waits for work before it counts as idle (and catches up the
digest that busy batches skipped)."""
FAILURE_BACKOFF_S = 1.0
"""Pause after a failed write so a broken database is retried, not hammered."""


@dataclass(frozen=True, slots=True)
class _Marker:
    """A flush request: set once everything applied before it is written."""

    done: threading.Event


_STOP = object()


class ProjectionWriter:
    """Subscribes to a replicator and mirrors its table into the node's Django tables."""

    def __init__(
        self,
        replicator: Replicator,
        *,
        node_id: str | None = None,
        publisher: EventPublisher = null_publisher,
        digest_interval_s: float = DIGEST_INTERVAL_S,
        liveness_digest_interval_s: float = LIVENESS_DIGEST_INTERVAL_S,
        liveness_linger_s: float = LIVENESS_LINGER_S,
        idle_poll_s: float = IDLE_POLL_S,
    ) -> None:
        self.replicator = replicator
        self.node_id = node_id or replicator.node_id
        self.publisher = publisher
        self.liveness_linger_s = liveness_linger_s
        self.idle_poll_s = idle_poll_s
        self._digests = DigestSchedule(
            replicator,
            digest_interval_s=digest_interval_s,
            liveness_digest_interval_s=liveness_digest_interval_s,
        )
        self._duty = DutyCycle()
        self._awaited = False
        # What the writer has still to do: the merged delta and the flush and stop
        # requests made since it last looked, guarded by one condition.
        self._wake = threading.Condition()
        self._pending: Delta | None = None
        self._controls: list[object] = []
        self._rebuild_needed = threading.Event()
        self._skip_through_version = -1
        self._thread: threading.Thread | None = None
        self._attached = False
        self._routes_version_written = -1
        """The routes version the stored wire routes reflect (-1: none yet)."""
        self._version_seen = 0
        self._version_written = 0
        self.batches_written = 0
        self.rebuilds = 0

    @property
    def digests_computed(self) -> int:
        """How many state digests this writer has taken (rebuilds' included)."""
        return self._digests.computed

    # -- apply-thread side --------------------------------------------------------

    def on_applied(self, command: Command, result: ApplyResult) -> None:
        """The replicator's listener: merge the changed keys into the waiting delta;
        never touch the DB here."""
        if result.changes.empty or self._rebuild_needed.is_set():
            # A pending rebuild reads the table later and covers this command too.
            return
        self._version_seen = max(self._version_seen, result.applied_version)
        delta = self.replicator.read(lambda table: read_delta(table, result))
        with self._wake:
            if self._pending is None:
                self._pending = delta
            else:
                self._pending.merge(delta)
            self._wake.notify()

    # -- lifecycle ----------------------------------------------------------------

    def attach(self) -> None:
        """Subscribe to the replicator (once); changes wait, merged, until :meth:`start`."""
        if not self._attached:
            self.replicator.subscribe(self.on_applied)
            self._attached = True

    def start(self, *, rebuild: bool = True) -> None:
        """Subscribe, optionally rebuild everything first, and start the writer thread."""
        self.attach()
        if rebuild:
            self._rebuild_needed.set()
        self._thread = threading.Thread(
            target=self._run, name=f"projection-{self.node_id}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Write what is waiting, then stop the writer thread."""
        thread = self._thread
        if thread is None:
            return
        self._control(_STOP)
        thread.join(timeout_s)
        self._thread = None

    def lag_versions(self) -> int:
        """Changes applied to the table but not yet written to the rows (the metrics'
        ``namesrv_projection_lag_versions``; 0 when the copy is current)."""
        return max(0, self._version_seen - self._version_written)

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every change applied before the call is committed; False on timeout."""
        if self._thread is None or not self._thread.is_alive():
            return False
        done = threading.Event()
        self._control(_Marker(done))
        return done.wait(timeout_s)

    def _control(self, item: object) -> None:
        with self._wake:
            self._controls.append(item)
            self._wake.notify()

    def request_rebuild(self) -> None:
        """Rewrite everything at the writer's next step (any thread, never blocks).

        Raft mode calls this when a snapshot replaced the whole table: the waiting
        delta describes the old table, and the rebuild's read skips it.
        """
        self._rebuild_needed.set()

    def rebuild(self) -> None:
        """Rewrite every row from the table now, on the caller's thread."""
        self._rebuild_needed.clear()
        state = self.replicator.read(read_full_state)
        write_full_state(state, self.node_id, self.replicator.mode)
        self._skip_through_version = state.applied_version
        self._digests.taken_by_rebuild(state.routes_version)
        self._routes_version_written = state.routes_version
        self._version_written = max(self._version_written, state.applied_version)
        self.rebuilds += 1
        publish_safely(
            self.publisher,
            ChangeEvent(
                node_id=self.node_id,
                applied_version=state.applied_version,
                routes_version=state.routes_version,
                rebuilt=True,
            ),
        )

    # -- writer thread ------------------------------------------------------------

    def _run(self) -> None:
        pace_this_thread(self._pace)
        self._duty.charge_from_now()
        try:
            while self._step():
                pass
        finally:
            connections[PROJECTION_DB].close()

    def _step(self) -> bool:
        """One round of the writer loop; False once told to stop."""
        if self._rebuild_needed.is_set():
            self._guarded(self.rebuild)
        taken = self._take(self.idle_poll_s)
        if taken is None:
            if self._digests.stale:
                # Idle now: catch the digest up that busy batches skipped.
                self._guarded(self._refresh_digest)
            return True
        self._duty.charge_from_now()
        keep_running = self._process(*taken)
        if keep_running:
            self._pace()
        return keep_running

    def _pace(self) -> None:
        """Keep to the writer's share of a core, unless a flush or a stop waits.
        Writer thread only (see pacing.keep_pace)."""
        self._duty.pace(awaited=self._awaited or bool(self._controls))

    def _take(self, wait_s: float) -> tuple[Delta | None, list[object]] | None:
        """The waiting delta and requests, taken away; None after ``wait_s`` of nothing.

        While the delta holds liveness-only changes and no request waits, wait up
        to ``liveness_linger_s`` for more (see LIVENESS_LINGER_S).
        """
        with self._wake:
            if self._pending is None and not self._controls:
                self._wake.wait(wait_s)
                if self._pending is None and not self._controls:
                    return None
            deadline_s = time.monotonic() + self.liveness_linger_s
            while (
                self._pending is not None
                and self._pending.liveness_only
                and not self._controls
                and (remaining_s := deadline_s - time.monotonic()) > 0
            ):
                self._wake.wait(remaining_s)
            taken = (self._pending, self._controls)
            self._pending, self._controls = None, []
            return taken

    def _process(self, delta: Delta | None, controls: list[object]) -> bool:
        """Write ``delta`` (unless a rebuild covered it), then answer ``controls``
        (flushes, stop) in order; False once told to stop."""
        # Requests taken with the delta wait for it: it is written at full speed.
        self._awaited = bool(controls)
        if delta is not None and delta.applied_version > self._skip_through_version:
            self._guarded(lambda: self._commit(delta))
        keep_running = True
        for item in controls:
            if isinstance(item, _Marker):
                if self._rebuild_needed.is_set():
                    self._guarded(self.rebuild)
                self._guarded(self._refresh_digest)
                item.done.set()
            elif item is _STOP:
                keep_running = False
        return keep_running

    def _guarded(self, action: Any) -> None:
        close_old_connections()
        try:
            action()
        except Exception:
            # The rows may now miss this batch; a rebuild puts everything right.
            log.exception("projection write failed; rebuilding")
            self._rebuild_needed.set()
            time.sleep(FAILURE_BACKOFF_S)

    def _commit(self, delta: Delta) -> None:
        read_topics(self.replicator, delta)
        digest = self._digests.due(delta.applied_version, delta.routes_version)
        routes = moved_routes(self.replicator, delta, self._routes_version_written)
        write_delta(delta, self.node_id, self.replicator.mode, digest, routes)
        self._routes_version_written = max(self._routes_version_written, delta.routes_version)
        self._version_written = max(self._version_written, delta.applied_version)
        self._digests.stale = digest is None
        self.batches_written += 1
        publish_safely(self.publisher, delta.event(self.node_id))

    def _refresh_digest(self) -> None:
        self._digests.refresh(self.node_id)
