"""Liveness in raft mode: which member proposes a broker's heartbeat or registration.

Brokers heartbeat and register with every NameServer at about the same moment.
In raft mode each copy would be a log entry on every node:

* :class:`TouchCoalescer` lets one designated member (rendezvous hash) propose a
  touch once per interval and the others only when the designated one is silent;
* :class:`RegistrationDeduper` lets the leader propose a registration; a follower
  first waits briefly for it and, when the registration's plan on the applied state
  holds only liveness edits, answers from it and refreshes liveness as a heartbeat
  does. Such a registration is answered that way on every member, leader included.

Eventual mode proposes every touch and every registration (each is a local apply).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import threading
from dataclasses import dataclass

from raftstore.commands import BrokerHeartbeat, Command, QueryDataVersion, RegisterBroker
from raftstore.raft import RaftReplicator
from raftstore.replicator import Replicator
from raftstore.results import ApplyResult, QueryDataVersionOutcome, RegisterBrokerOutcome
from raftstore.route_table import RouteTable
from remoting.model import DataVersion

DEFAULT_TOUCH_INTERVAL_MS = 15_000
DEFAULT_BACKUP_TOUCH_INTERVAL_MS = 45_000
DESIGNATED_TOUCH_TIMEOUT_DIVISOR = 4
BACKUP_TOUCH_TIMEOUT_DIVISOR = 2
"""A broker with a short heartbeat timeout (fast detection, failover) is touched at least
every timeout/4 by its designated member and every timeout/2 by the others, so coalescing
never lets it expire between two touches."""

Touch = BrokerHeartbeat | QueryDataVersion


class TouchCoalescer:
    """Proposes a broker's liveness touch at most once per interval, cluster-wide.

    Each broker has one designated member (rendezvous hash over the members),
    which proposes a touch when the replicated ``last_update_ms`` is older than
    ``touch_interval_ms``; the other members propose only when it is older than
    ``backup_touch_interval_ms`` (the designated one cannot hear the broker).
    Brokers heartbeat every member at about the same moment, so without a
    designated member every node would see the same stale time and propose.
    Both intervals are capped by a fraction of the broker's own heartbeat timeout.
    A touch whose report of the broker's HA links names other links than the stored
    one is proposed at once (raft failover elects on it).
    """

    def __init__(
        self,
        replicator: Replicator,
        *,
        touch_interval_ms: int = DEFAULT_TOUCH_INTERVAL_MS,
        backup_touch_interval_ms: int = DEFAULT_BACKUP_TOUCH_INTERVAL_MS,
    ) -> None:
        assert backup_touch_interval_ms >= touch_interval_ms
        self._replicator = replicator
        self._interval_ms = touch_interval_ms
        self._backup_interval_ms = backup_touch_interval_ms
        self._in_flight: set[tuple[str, str]] = set()
        self.proposed = 0
        self.skipped = 0

    async def touch(self, command: Touch) -> ApplyResult:
        """Apply or skip ``command``; QUERY_DATA_VERSION still gets its answer."""
        applied = await self.refresh(command)
        if applied is not None:
            return applied
        return self._replicator.read(lambda table: _local_answer(table, command))

    async def refresh(self, command: Touch) -> ApplyResult | None:
        """:meth:`touch` for a caller that needs no answer: the result of the touch
        when it was proposed, else None (skipped, nothing read)."""
        if self._should_propose(command):
            key = (command.cluster_name, command.broker_addr)
            self._in_flight.add(key)
            try:
                self.proposed += 1
                return await self._replicator.propose(command, linger_for=command.broker_addr)
            finally:
                self._in_flight.discard(key)
        self.skipped += 1
        return None

    def _should_propose(self, command: Touch) -> bool:
        if not isinstance(self._replicator, RaftReplicator):
            return True
        key = (command.cluster_name, command.broker_addr)
        entry = self._replicator.read(lambda table: table.live_broker(*key))
        if entry is None or key in self._in_flight:
            # No live entry: a touch changes nothing (QDV answers "changed").
            return False
        if isinstance(command, QueryDataVersion) and entry.data_version != command.data_version:
            return False
        reported = command.replication
        if reported is not None and (
            entry.replication is None or entry.replication.links() != reported.links()
        ):
            # A slave joined or left its master's HA links: raft failover elects on the
            # replicated report, so it goes out now, not at the next interval.
            return True
        designated = (
            designated_member(self._replicator.members(), key) == self._replicator.self_addr
        )
        interval, divisor = (
            (self._interval_ms, DESIGNATED_TOUCH_TIMEOUT_DIVISOR)
            if designated
            else (self._backup_interval_ms, BACKUP_TOUCH_TIMEOUT_DIVISOR)
        )
        interval = min(interval, entry.heartbeat_timeout_ms // divisor)
        return entry.last_update_ms < command.now_ms - interval


@functools.lru_cache(maxsize=65536)
def designated_member(members: tuple[str, ...], key: tuple[str, str]) -> str:
    """Rendezvous hash: the member that touches broker ``key`` first. Remembered (by
    members and broker): asked for every copy of every registration a member answers."""

    def weight(member: str) -> bytes:
        return hashlib.sha256(f"{member}|{key[0]}|{key[1]}".encode()).digest()

    return max(members, key=weight)


def _local_answer(table: RouteTable, command: Touch) -> ApplyResult:
    """The answer a skipped touch gets: what the applied state says, nothing changed."""
    if isinstance(command, QueryDataVersion):
        entry = table.live_broker(command.cluster_name, command.broker_addr)
        changed = entry is None or entry.data_version != command.data_version
        outcome = QueryDataVersionOutcome(
            changed=changed, data_version=None if entry is None else entry.data_version
        )
        return ApplyResult(applied_version=table.applied_version, outcome=outcome)
    return ApplyResult(applied_version=table.applied_version)


REGISTRATION_WAIT_MIN_S = 0.015
REGISTRATION_WAIT_MAX_S = 3.0
REGISTRATION_WAIT_DEVIATIONS = 8.0
"""A follower waits for the leader's copy of a registration the recent commit latency
plus this many times its recent deviation (within the bounds above) before it
proposes its own: a few ms on a quiet cluster, where latencies hardly vary, and
seconds under an overload, whose latencies have a long tail. The upper bound is the
default propose timeout, since extra copies deepen an overload (see
docs/BENCHMARKS.md, "registration storm")."""
BUSY_WAIT_S = 0.1
"""A wait this long or longer means a busy cluster (see :attr:`RegistrationDeduper.busy`):
a quiet one waits the floor, 15-20 ms."""
BUSY_WAIT_FACTOR = 4.0
"""On a busy cluster a follower waits at least this many times the mean latency."""
_LATENCY_WEIGHT = 0.125
_DEVIATION_WEIGHT = 0.25


class RegistrationDeduper:
    """Raft mode: one log entry per broker registration, not one per member, and none
    for a registration whose plan holds only liveness edits (answered from the applied
    state, liveness refreshed as a heartbeat). A broker sends the same request to every
    member: the leader proposes its copy, a follower waits briefly for it to be applied
    (known by its DataVersion, or undecoded by its digest) and answers from the state.
    Skipping is safe: the answer comes from committed state, and what the skipped entry
    would have changed, liveness, the touch refreshes; the service gives such an answer
    only while the node has contact with a quorum (docs/RAFT.md, "A node without a
    quorum says so"). Why each shortcut exists, with its
    figures: docs/BENCHMARKS.md, "registration storm"; the rules: docs/RAFT.md.
    """

    def __init__(self, replicator: RaftReplicator, touches: TouchCoalescer) -> None:
        self._replicator = replicator
        self._touches = touches
        self._lock = threading.Lock()
        self._watching: dict[tuple[str, str], list[_Watch]] = {}
        # (cluster, addr) -> the broker's last applied registration. Written by the apply
        # listener, read on the loop without a lock: a hint, never the decision.
        self._last_applied: dict[tuple[str, str], RegisterBroker] = {}
        self._latency_s = REGISTRATION_WAIT_MIN_S  # a guess until commits are seen
        self._deviation_s = REGISTRATION_WAIT_MIN_S / 2
        # Watches to wake, filled on the apply thread and drained on their loop by
        # one call_soon_threadsafe per batch (each call writes the loop's wake-up pipe).
        self._to_wake: list[tuple[_Watch, ApplyResult | None]] = []
        self.proposed = 0
        self.proposed_elided = 0
        self.answered_as_touch = 0
        self.answered_undecoded = 0
        self.waits_timed_out = 0
        replicator.subscribe(self._applied)

    @property
    def wait_s(self) -> float:
        """How long a follower waits for the leader's copy now."""
        wait_s = self._latency_s + REGISTRATION_WAIT_DEVIATIONS * self._deviation_s
        if wait_s >= BUSY_WAIT_S:
            # A busy cluster's delays have a long tail: at least a few times their mean.
            wait_s = max(wait_s, BUSY_WAIT_FACTOR * self._latency_s)
        return min(REGISTRATION_WAIT_MAX_S, max(REGISTRATION_WAIT_MIN_S, wait_s))

    @property
    def busy(self) -> bool:
        """Whether commits are slow enough here (:attr:`wait_s` of
        :data:`BUSY_WAIT_S` or more) that a follower's copy waits twice."""
        return self.wait_s >= BUSY_WAIT_S

    async def answer_from_state(
        self, command: RegisterBroker, *, waited: bool = False
    ) -> ApplyResult | None:
        """The answer to ``command`` from the applied state when its plan there holds only
        liveness edits (followers first give the leader's copy a chance), liveness
        refreshed as a heartbeat does; None: propose it. ``waited``: this registration
        already waited for the leader's copy once (:meth:`register_seen`); it waits a
        second time only on a busy cluster (:attr:`busy`), where a copy's delay has a
        long tail and every extra copy deepens the load."""
        wait = not waited or self.busy
        answer = await self._settle(command, asyncio.get_running_loop(), wait)
        if answer is None:
            return None
        self.answered_as_touch += 1
        await self._touches.refresh(command.heartbeat())
        return answer

    async def propose(self, command: RegisterBroker) -> ApplyResult:
        """Propose ``command``; a command with its table elided comes from :meth:`elided`,
        and apply answers ``needs_full`` when the state no longer holds that table."""
        self.proposed += 1
        if command.topics_elided:
            self.proposed_elided += 1
        loop = asyncio.get_running_loop()
        proposed_at = loop.time()
        result = await self._replicator.propose(command, linger_for=command.broker_addr)
        self._observe(loop.time() - proposed_at)
        return result

    def elided(self, command: RegisterBroker) -> RegisterBroker | None:
        """``command`` (its table elided) with the filter servers of the broker's last
        applied registration of the same table (``topics_digest``), or None when there
        is none here: decode the body and send the table."""
        last = self._last_applied.get((command.cluster_name, command.broker_addr))
        if (
            last is None
            or command.topics_digest is None
            or last.topics_digest != command.topics_digest
            or last.broker_name != command.broker_name
            or last.broker_id != command.broker_id
        ):
            return None
        return dataclasses.replace(command, filter_server_list=last.filter_server_list)

    async def register_seen(self, digest: bytes, heartbeat: BrokerHeartbeat) -> ApplyResult | None:
        """The answer to a REGISTER_BROKER known by its digest, without decoding it:
        the broker's last applied registration had the same digest (or, on a
        follower, the leader's entry with it is applied within the wait) and still
        changes nothing but liveness. None: decode it and call :meth:`register`."""
        key = (heartbeat.cluster_name, heartbeat.broker_addr)
        loop = asyncio.get_running_loop()
        applied = self._last_applied.get(key)
        answer: ApplyResult | None = None
        if applied is not None and applied.request_digest == digest:
            answer = self._unchanged(applied)
        else:
            leader, _ = self._replicator.leadership()
            if leader is not None and not self._replicator.is_leader():
                answer = await self._wait_for(key, _Watch(loop, loop.create_future(), None, digest))
        if answer is None:
            return None
        self.answered_undecoded += 1
        await self._touches.refresh(heartbeat)
        return answer

    async def _wait_for(self, key: tuple[str, str], watch: _Watch) -> ApplyResult | None:
        """Wait (bounded) for the listener to answer ``watch``; None on timeout."""
        with self._lock:
            self._watching.setdefault(key, []).append(watch)
        try:
            # The copy may have been applied just before the watch was in place.
            applied = self._last_applied.get(key)
            if applied is not None and watch.matches(applied):
                return self._unchanged(watch.command or applied)
            started = watch.loop.time()
            # A timer that answers None, not asyncio.wait_for: that wraps the future
            # in a task of its own, for every copy a follower waits for.
            expired: list[bool] = []

            def expire() -> None:
                if not watch.answer.done():
                    expired.append(True)
                    watch.answer.set_result(None)

            timer = watch.loop.call_later(self.wait_s, expire)
            try:
                answer = await watch.answer
            finally:
                timer.cancel()
            if expired:
                self.waits_timed_out += 1
                return None
            self._observe(watch.loop.time() - started)
            return answer
        finally:
            self._unwatch(key, watch)

    async def _settle(
        self, command: RegisterBroker, loop: asyncio.AbstractEventLoop, wait: bool
    ) -> ApplyResult | None:
        """The answer from applied state, or None: propose."""
        wrapper = command.topic_config_wrapper
        if wrapper is None:
            return None
        key = (command.cluster_name, command.broker_addr)
        applied = self._last_applied.get(key)
        if applied is not None and _data_version(applied) == wrapper.data_version:
            return self._unchanged(command)
        leader, _ = self._replicator.leadership()
        if not wait or leader is None or self._replicator.is_leader():
            return None
        return await self._wait_for(key, _Watch(loop, loop.create_future(), command, None))

    def _unchanged(self, command: RegisterBroker) -> ApplyResult | None:
        return self._replicator.read(lambda table: _unchanged_answer(table, command))

    def _observe(self, seconds: float) -> None:
        # As TCP estimates its retransmission timeout (RFC 6298): a smoothed mean and
        # a smoothed mean deviation.
        error = seconds - self._latency_s
        self._deviation_s += _DEVIATION_WEIGHT * (abs(error) - self._deviation_s)
        self._latency_s += _LATENCY_WEIGHT * error

    def _unwatch(self, key: tuple[str, str], watch: _Watch) -> None:
        with self._lock:
            watches = self._watching.get(key)
            if watches is None:
                return
            watches[:] = [w for w in watches if w is not watch]
            if not watches:
                del self._watching[key]

    def _applied(self, command: Command, result: ApplyResult) -> None:
        """Apply listener (apply thread, under the apply lock): remember the command,
        answer the followers waiting for this copy."""
        if not isinstance(command, RegisterBroker):
            return
        outcome = result.outcome
        if isinstance(outcome, RegisterBrokerOutcome) and outcome.needs_full:
            return  # changed nothing; its whole copy follows
        key = (command.cluster_name, command.broker_addr)
        self._last_applied[key] = command
        if not self._watching:
            return
        with self._lock:
            matching = [w for w in self._watching.get(key, ()) if w.matches(command)]
        if not matching:
            return
        answers = self._replicator.read(
            lambda table: [(w, _unchanged_answer(table, w.command or command)) for w in matching]
        )
        with self._lock:
            drain_scheduled = bool(self._to_wake)
            self._to_wake.extend(answers)
        if not drain_scheduled:
            matching[0].loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        with self._lock:
            woken, self._to_wake = self._to_wake, []
        running = asyncio.get_running_loop()
        for watch, answer in woken:
            if watch.loop is running:
                _answer(watch.answer, answer)
            else:  # a member served from another loop (tests): answer it there
                watch.loop.call_soon_threadsafe(_answer, watch.answer, answer)


@dataclass(slots=True, eq=False)
class _Watch:
    """A follower waiting for the leader's copy of ``command`` (decoded: known by its
    DataVersion) or of the request with ``digest`` (not decoded)."""

    loop: asyncio.AbstractEventLoop
    answer: asyncio.Future[ApplyResult | None]
    command: RegisterBroker | None
    digest: bytes | None

    def matches(self, applied: RegisterBroker) -> bool:
        """True when ``applied`` is the copy this watch waits for."""
        if self.digest is not None:
            return applied.request_digest == self.digest
        assert self.command is not None
        wrapper = self.command.topic_config_wrapper
        return wrapper is not None and wrapper.data_version == _data_version(applied)


def _data_version(command: RegisterBroker) -> DataVersion | None:
    wrapper = command.topic_config_wrapper
    return None if wrapper is None else wrapper.data_version


def _unchanged_answer(table: RouteTable, command: RegisterBroker) -> ApplyResult | None:
    """The answer of ``command`` when applying it would change only liveness, else None."""
    outcome = table.liveness_only_answer(command)
    if outcome is None:
        return None
    return ApplyResult(applied_version=table.applied_version, outcome=outcome)


def _answer(future: asyncio.Future[ApplyResult | None], answer: ApplyResult | None) -> None:
    if not future.done():
        future.set_result(answer)
