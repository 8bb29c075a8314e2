"""The PySyncObj glue: the only place that touches PySyncObj's internals.

PySyncObj (pinned at 0.3.17) gives a replicated object, a TCP transport and a
journal, but a NameServer needs more than its public API: durable journals,
a commit announcement before applying, conflict-only truncation of re-sent
entries, authenticated peers before unpickling, per-node divergence alarms.
Everything that reaches below PySyncObj's public API is here, so an upgrade is
checked in one file. Private names used, each checked against 0.3.17:

* ``SyncObj._SyncObj__raftLog`` (the FileJournal: ``len``, indexing, ``flush``),
  ``SyncObj._SyncObj__raftCommitIndex``, ``SyncObj._SyncObj__sendAppendEntries``,
  ``SyncObj._isLeader``: in :class:`RouteLog` and :func:`journal_of` / :func:`is_leader`;
* ``SyncObj._SyncObj__transport`` (our :class:`RaftTransport`): in :func:`raft_port`;
* ``SyncObj._SyncObj__generateRaftTimeout`` (replaced), ``__selfNode``, ``__conf``:
  in :meth:`RouteLog._SyncObj__generateRaftTimeout`;
* ``SyncObj._SyncObj__raftState``, ``__otherNodes``, ``__lastResponseTime``,
  ``__raftLeader``, ``__raftElectionDeadline``: in :meth:`RouteLog.quorum_contact_at`;
* the transport (``raftstore.raft.transport``): ``TcpConnection._TcpConnection__processRead``,
  ``TcpConnection._TcpConnection__readBuffer``, ``TcpConnection.sendRandKey``,
  ``TCPTransport._unknownConnections``, ``TCPTransport._onNewIncomingConnection``,
  ``TCPTransport._onTick``, ``TCPTransport._onMessageReceived``;
* the log message texts of ``pysyncobj.syncobj`` that :class:`AlarmHandler` watches.

:data:`PRIVATE_METHODS` and :data:`SYNCOBJ_ATTRIBUTES` list the names as data: a node
refuses to start on another PySyncObj release, or on an object that lacks one of them
(:func:`check_pysyncobj`, :func:`missing_attributes`), and the suite checks them against
the installed package.

The transport's part lives in ``transport.py`` beside this module because it is a
security boundary with its own tests; nothing else in the project touches PySyncObj
below its public API.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import weakref
from collections.abc import Callable, Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from time import monotonic
from typing import Any

from pysyncobj import SyncObj, replicated
from pysyncobj.config import FAIL_REASON
from pysyncobj.journal import FileJournal
from pysyncobj.node import TCPNode
from pysyncobj.syncobj import _RAFT_STATE, SyncObjExceptionWrongVer
from pysyncobj.tcp_connection import TcpConnection
from pysyncobj.transport import TCPTransport

from raftstore.raft.append import PySyncObjLogView, trim_append_entries
from raftstore.raft.cipher import RaftCipher
from raftstore.raft.codec import FORMAT_JSON, FORMAT_MSGPACK
from raftstore.raft.settings import RaftSettings
from raftstore.raft.transport import PORT_LISTENING, PORT_NOT_LISTENING, RaftTransport

logger = logging.getLogger("raftstore.raft")

STATE_NAMES = {0: "follower", 1: "candidate", 2: "leader"}
RETRYABLE = frozenset(
    {
        FAIL_REASON.QUEUE_FULL,
        FAIL_REASON.MISSING_LEADER,
        FAIL_REASON.DISCARDED,
        FAIL_REASON.NOT_LEADER,
        FAIL_REASON.LEADER_CHANGED,
        FAIL_REASON.UNKNOWN_OUTCOME,
    }
)
FAIL_NAMES = {value: name for name, value in vars(FAIL_REASON).items() if name.isupper()}
# PySyncObj log lines that mean the state machine may have diverged.
ALARM_MARKERS = ("truncating already-applied", "exceeds journal end")


# ------------------------------------------------------------ the checked release

PYSYNCOBJ_CHECKED = "0.3.17"
"""The PySyncObj release every name below was read in."""

PRIVATE_METHODS: dict[type[Any], tuple[str, ...]] = {
    SyncObj: (
        "_SyncObj__applyLogEntries",
        "_SyncObj__doApplyCommand",
        "_SyncObj__generateRaftTimeout",
        "_SyncObj__getEntries",
        "_SyncObj__sendAppendEntries",
        "_isLeader",
        "_onTick",
        "_getEncryptor",
    ),
    TcpConnection: (
        "_TcpConnection__processRead",
        "_TcpConnection__trySendBuffer",
    ),
    TCPTransport: ("_onNewIncomingConnection", "_onTick", "_onMessageReceived"),
}
"""Methods the glue overrides or calls, by the class that defines them."""

SYNCOBJ_ATTRIBUTES = (
    "_SyncObj__raftLog",
    "_SyncObj__raftCommitIndex",
    "_SyncObj__raftLastApplied",
    "_SyncObj__raftState",
    "_SyncObj__raftLeader",
    "_SyncObj__raftElectionDeadline",
    "_SyncObj__commandsWaitingCommit",
    "_SyncObj__newAppendEntriesTime",
    "_SyncObj__lastResponseTime",
    "_SyncObj__otherNodes",
    "_SyncObj__selfNode",
    "_SyncObj__conf",
    "_SyncObj__transport",
    "_poller",
)
"""Attributes ``SyncObj.__init__`` sets on each object that the glue reads."""


class PySyncObjMismatch(RuntimeError):
    """The installed PySyncObj is not the one the glue was checked against."""


def installed_version() -> str | None:
    """The installed PySyncObj's version, or None when its metadata is missing."""
    try:
        return version("pysyncobj")
    except PackageNotFoundError:
        return None


def missing_methods() -> list[str]:
    """``Class.name`` of every private method in :data:`PRIVATE_METHODS` not found."""
    return [
        f"{cls.__name__}.{name}"
        for cls, names in PRIVATE_METHODS.items()
        for name in names
        if not callable(getattr(cls, name, None))
    ]


def missing_attributes(sync: Any) -> list[str]:
    """Every name of :data:`SYNCOBJ_ATTRIBUTES` (and the journal's file) ``sync`` lacks."""
    missing = [name for name in SYNCOBJ_ATTRIBUTES if not hasattr(sync, name)]
    journal = getattr(sync, "_SyncObj__raftLog", None)
    if isinstance(journal, FileJournal):
        handle = getattr(journal, "_FileJournal__journalFile", None)
        if handle is None or not hasattr(handle, "_ResizableFile__f"):
            missing.append("FileJournal._FileJournal__journalFile._ResizableFile__f")
    return missing


def check_pysyncobj() -> None:
    """Refuse to start on a PySyncObj other than :data:`PYSYNCOBJ_CHECKED`, or one
    whose private methods moved."""
    found = installed_version()
    if found != PYSYNCOBJ_CHECKED:
        raise PySyncObjMismatch(
            f"PySyncObj {found or 'of unknown version'} is installed, but this NameServer's "
            f"Raft glue (raftstore/raft/glue.py, transport.py) was checked against "
            f"{PYSYNCOBJ_CHECKED} only: it overrides private PySyncObj methods that another "
            f"release may rename without an error. Install pysyncobj=={PYSYNCOBJ_CHECKED} "
            f"(requirements.lock pins it)."
        )
    missing = missing_methods()
    if missing:
        raise PySyncObjMismatch(
            f"PySyncObj {found} lacks private methods the Raft glue relies on: "
            + ", ".join(missing)
        )


# ------------------------------------------------------------------ PySyncObj glue


# A newly committed run is announced to the followers before the leader applies it
# only when applying it takes a while: more than one entry, a batch or compressed
# entry, or a plain one this big.
ANNOUNCE_MIN_BYTES = 32 * 1024
PLAIN_FORMATS = (FORMAT_MSGPACK, FORMAT_JSON)  # one uncompressed command


# Dial overrides are per process: PySyncObj pickles node objects into membership
# log entries, so the node class must be importable, not a closure.
DIAL: dict[str, str] = {}


class DialNode(TCPNode):  # type: ignore[misc]
    """A TCPNode whose identity is its address but which may be dialled elsewhere
    (a fault proxy in tests, a NAT port in production)."""

    @property
    def ip(self) -> Any:
        """The IP to dial (resolved from the override, if any)."""
        host = self._dialled().rsplit(":", 1)[0]
        return TCPNode(f"{host}:0").ip

    @property
    def port(self) -> int:
        """The port to dial."""
        return int(self._dialled().rsplit(":", 1)[1])

    def _dialled(self) -> str:
        own = str(self.address)
        return DIAL.get(own, own)


class Durability:
    """Flushes of PySyncObj's mmap journal and fsync of its metadata; tick thread only.

    The journal is written through a shared mapping of its file, and made durable
    with ``fdatasync`` of the file, not ``mmap.flush``: both write back the same dirty
    pages of the page cache (on Linux ``msync(MS_SYNC)`` is an fsync of the mapped
    range), but CPython's ``mmap.flush`` keeps the interpreter lock for the whole
    disk wait, stalling the event loop; ``os.fdatasync`` releases it (see
    docs/BENCHMARKS.md, "Reads first, the writer's share held, fewer Raft messages")."""

    def __init__(self, journal_path: Path, enabled: bool) -> None:
        self._journal_path = journal_path
        self._enabled = enabled
        self._journal: Any = None
        self._flushed_mark: tuple[int, Any] | None = None
        self.dir_dirty = False
        self.flushes = 0

    def bind(self, journal: Any) -> None:
        """Attach PySyncObj's FileJournal (private attributes, checked here)."""
        assert hasattr(journal, "flush"), "PySyncObj journal without flush()"
        assert _journal_file(journal).fileno() >= 0, "PySyncObj journal without a file"
        self._journal = journal

    def flush_journal(self) -> None:
        """Make the journal durable if it changed since the last flush."""
        if not self._enabled or self._journal is None or len(self._journal) == 0:
            return
        mark = (len(self._journal), self._journal[-1][1:])
        if mark == self._flushed_mark and not self.dir_dirty:
            return
        # Looked up every time: PySyncObj reopens the file when it cannot grow the
        # mapping in place.
        os.fdatasync(_journal_file(self._journal).fileno())
        if self.dir_dirty:
            _fsync_dir(self._journal_path.parent)
            self.dir_dirty = False
        self._flushed_mark = mark
        self.flushes += 1

    def sync_meta(self) -> None:
        """fsync the term/vote file PySyncObj just rewrote (votes must survive)."""
        if not self._enabled:
            return
        meta = Path(f"{self._journal_path}.meta")
        if meta.exists():
            fd = os.open(meta, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            _fsync_dir(meta.parent)


def _journal_file(journal: Any) -> Any:
    """The open file behind PySyncObj's FileJournal mapping (private attributes)."""
    return journal._FileJournal__journalFile._ResizableFile__f


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class RouteLog(SyncObj):  # type: ignore[misc]
    """The one PySyncObj object of a node; its replicated method only delegates to
    ``apply(entry, index, term)``, which returns True when this node proposed the entry."""

    def __init__(
        self,
        apply: Callable[[bytes, int, int], bool],
        settings: RaftSettings,
        self_addr: str,
        peers: list[str],
        conf: Any,
        node_class: type[Any],
        durability: Durability,
    ) -> None:
        check_pysyncobj()
        # Set before SyncObj.__init__: its tick thread may apply at once.
        self._apply_to_state = apply
        self._applying_term = 0
        self.durability = durability
        self.resends_trimmed = 0
        self.announce_commit_first = settings.announce_commit_first
        # Mid-apply heartbeats only once the normal one is a third of the shortest
        # election timeout late: ordinary applies keep PySyncObj's own timing (see
        # docs/BENCHMARKS.md, "The read front, registrations known by digest").
        self._apply_heartbeat_slack_s = settings.raft_min_timeout_s / 3
        self._announced_commit = 0
        self.tick_started_s = 0.0
        # The commit notice (see _SyncObj__sendAppendEntries): ticks are numbered;
        # a notice may wait when this tick applied only the leader's own entries.
        self._tick_no = 0
        self._notice_may_wait_tick = -1
        self._foreign_applied_tick = -1
        self._notice_held_tick: int | None = None
        self.notices_held = 0
        # Bounded applies (see _SyncObj__applyLogEntries): committed entries left for
        # the next tick, which then polls without waiting.
        self._apply_slice_s = settings.apply_slice_s
        self._apply_backlog = False
        self.apply_slices_cut = 0
        # Our cipher in place of the Fernet PySyncObj would make from the password
        # (raftstore.raft.cipher); with no password PySyncObj makes none, and every
        # use of it goes through the ``encryptor`` property below.
        self._cipher = RaftCipher.from_secret(conf.password) if conf.password else None
        conf.password = None
        super().__init__(self_addr, peers, conf, nodeClass=node_class, transportClass=RaftTransport)
        missing = missing_attributes(self)
        if missing:
            self.destroy()
            raise PySyncObjMismatch(
                "PySyncObj's SyncObj lacks attributes the Raft glue reads: " + ", ".join(missing)
            )
        # A tick that left committed entries unapplied polls its sockets without
        # waiting, then applies the rest: the backlog costs no idle tick period.
        poller = self._poller
        wait = poller.poll

        def poll(timeout: float) -> None:
            wait(0.0 if self._apply_backlog else timeout)

        poller.poll = poll

    @property
    def encryptor(self) -> RaftCipher | None:
        """What PySyncObj's transport seals and opens every message with."""
        return self._cipher

    def _SyncObj__generateRaftTimeout(self) -> float:
        """An election timeout within this member's own part of the range.

        PySyncObj draws every member's timeout from the whole range
        [``raftMinTimeout``, ``raftMaxTimeout``], so two followers that heard the
        leader's last heartbeat together may both time out within a vote's round trip
        of each other, both vote for themselves, and the election takes a second
        round (0.6 s more). Here the members, ordered by address, each draw from the
        first half of their own equal slot of the range: the next member's candidacy
        comes at least half a slot (40 ms of the 0.25 s range among three) after this
        one's, and the earlier candidate's RequestVote reaches it first. The order
        only decides who usually stands first; any member still stands when the
        others are silent, and safety never depends on timing."""
        conf = self._SyncObj__conf
        me = self._SyncObj__selfNode
        if me is None:
            return float(conf.raftMinTimeout)
        members = sorted([me.address, *(node.address for node in self._SyncObj__otherNodes)])
        slot = (conf.raftMaxTimeout - conf.raftMinTimeout) / len(members)
        rank = members.index(me.address)
        return float(conf.raftMinTimeout + slot * (rank + random.random() / 2))

    def _getEncryptor(self) -> RaftCipher | None:
        return self._cipher

    def _onTick(self, timeToWait: float = 0.0) -> None:
        """Flush the journal before PySyncObj's tick counts a commit.

        A leader sends new entries before it flushes them (the replicator's tick
        callback flushes right after the sends, before the poll), so its own msync
        overlaps the followers' write and acknowledgement instead of preceding them,
        as etcd's leader writes its WAL in parallel with replication. The leader
        counts itself toward a majority at the start of the next tick; this flush
        (a no-op when the callback already made everything durable) makes sure no
        entry is committed while the leader's copy is not on disk."""
        # What the quorum contact is judged by (QuorumContact.observe): the previous
        # tick read the sockets just before this one began.
        self.tick_started_s = monotonic()
        self.durability.flush_journal()
        self._tick_no += 1
        if (
            self._SyncObj__raftState != _RAFT_STATE.LEADER
            and self._SyncObj__raftElectionDeadline < monotonic()
        ):
            # PySyncObj judges the leader before it reads its sockets. After a tick
            # that took long here (a large entry applied, or no core to run on), the
            # leader's heartbeats may be waiting in them: read them first, so only a
            # silent leader, not this node's own stall, starts an election.
            self._poller.poll(0)
        super()._onTick(timeToWait)

    def _SyncObj__applyLogEntries(self) -> bool:
        """PySyncObj's apply loop (its private method's name, so its tick lands here),
        with a time slice: once ``apply_slice_s`` has gone by, the committed entries
        left wait for the next tick.

        PySyncObj applies every newly committed entry in one tick, and the tick is
        also what sends a leader's heartbeats and reads a follower's sockets: a tick
        that found several large registrations committed held them all (see
        docs/BENCHMARKS.md, "Shorter Raft ticks in the large-table phase"). Sliced, a
        tick applies for about one heartbeat period plus at most one entry, sends its
        round and reads its sockets, and carries on at once (the poll does not wait
        while a backlog is left). Which entries apply, and in which order, is
        unchanged; only the tick they apply in moves."""
        commit = self._SyncObj__raftCommitIndex
        applied = self._SyncObj__raftLastApplied
        self._apply_backlog = False
        if commit <= applied:
            return False
        waiting = self._SyncObj__commandsWaitingCommit
        until = monotonic() + self._apply_slice_s
        entries = self._SyncObj__getEntries(applied + 1, commit - applied)
        for done, entry in enumerate(entries, start=1):
            command, index, term = entry[0], entry[1], entry[2]
            # apply_entry hands the entry's term on with its index (PySyncObj calls the
            # replicated method with the command's own arguments only).
            self._applying_term = term
            try:
                subscribers = waiting.pop(index, [])
                result = self._SyncObj__doApplyCommand(command)
                for subscribed_term, callback in subscribers:
                    if subscribed_term == term:
                        callback(result, FAIL_REASON.SUCCESS)
                    else:
                        callback(None, FAIL_REASON.DISCARDED)
                self._SyncObj__raftLastApplied += 1
            except SyncObjExceptionWrongVer as exc:
                # Not applied: stop here and retry it next tick (PySyncObj would go on
                # to the next entry with this one's index still unapplied).
                logger.error("entry %d needs code version %d, unsupported here", index, exc.ver)
                break
            if done < len(entries) and monotonic() > until:
                self._apply_backlog = True
                self.apply_slices_cut += 1
                break
        # PySyncObj sends the new commit index at once unless it batches rounds.
        return not self._SyncObj__conf.appendEntriesUseBatch

    def _SyncObj__sendAppendEntries(self) -> None:
        """Every AppendEntries round PySyncObj sends passes here (the name is its
        private method's, so its own calls land here too).

        Right after applying, PySyncObj sends a round whose only news is the commit
        index. When everything applied in that tick was this leader's own proposal
        (a broker's registration, which the followers only wait for to answer their
        copy; nobody else waits on it), that notice is held: the next round carries
        the commit index anyway, whether it brings the next entries or is released by
        :meth:`release_commit_notice` at the end of the following tick, at most one
        tick period later (a notice per entry doubled the rounds; see docs/BENCHMARKS.md,
        "Reads first, the writer's share held, fewer Raft messages"). An entry a
        follower proposed (its proposer waits for it there) gets its notice at once,
        and so does any round due as a heartbeat. Only when a message leaves changes,
        never what it says."""
        if (
            self._notice_may_wait_tick == self._tick_no
            and monotonic() <= self._SyncObj__newAppendEntriesTime
        ):
            self._notice_may_wait_tick = -1
            self._notice_held_tick = self._tick_no
            self.notices_held += 1
            return
        self._send_round()

    def _send_round(self) -> None:
        self._notice_held_tick = None
        SyncObj._SyncObj__sendAppendEntries(self)

    def release_commit_notice(self) -> None:
        """End of a tick: send a commit notice held in an earlier tick (and not
        carried by a round since)."""
        held = self._notice_held_tick
        if held is not None and held < self._tick_no:
            if self._isLeader():
                self._send_round()
            else:
                self._notice_held_tick = None

    def trim_append_entries(self, message: Mapping[str, Any]) -> Mapping[str, Any]:
        """Apply the conflict-only truncation rule before PySyncObj handles ``message``."""
        journal = self._SyncObj__raftLog
        if len(journal) == 0:
            return message
        view = PySyncObjLogView(
            journal, lambda: max(self._SyncObj__raftCommitIndex, self.raftLastApplied)
        )
        trimmed = trim_append_entries(view, message)
        if trimmed is not message:
            self.resends_trimmed += 1
        return trimmed

    @replicated  # type: ignore[untyped-decorator]
    def apply_entry(self, entry: bytes) -> None:
        """Apply one log entry (runs on every node, in log order)."""
        if self.announce_commit_first and (
            entry[2:3] not in PLAIN_FORMATS
            or len(entry) >= ANNOUNCE_MIN_BYTES
            or self._SyncObj__raftCommitIndex > self.raftLastApplied + 1
        ):
            self._announce_commit()
        own = self._apply_to_state(entry, self.raftLastApplied + 1, self._applying_term)
        if not own:
            # Its proposer (or nobody we know of) waits elsewhere: no holding this tick.
            self._foreign_applied_tick = self._tick_no
            self._notice_may_wait_tick = -1
        elif self._foreign_applied_tick != self._tick_no and self._isLeader():
            self._notice_may_wait_tick = self._tick_no

    def quorum_contact_at(self) -> float | None:
        """Tick thread: the monotonic time at which this node last knew it was in
        contact with a quorum, or None when it is not now.

        A leader: the time by which a majority (itself included) had last answered
        its AppendEntries. A follower: now, while it knows a leader whose messages
        keep its election deadline ahead (an isolated follower keeps naming its old
        leader, but its deadline passes). A candidate: None."""
        state = self._SyncObj__raftState
        now = monotonic()
        if state == _RAFT_STATE.LEADER:
            others = self._SyncObj__otherNodes
            needed = (len(others) + 1) // 2
            if needed == 0:
                return now
            answered = self._SyncObj__lastResponseTime
            times = sorted((answered.get(node, 0.0) for node in others), reverse=True)
            return float(times[needed - 1])
        if (
            state == _RAFT_STATE.FOLLOWER
            and self._SyncObj__raftLeader is not None
            and self._SyncObj__raftElectionDeadline > now
        ):
            return now
        return None

    def heartbeat_if_due(self) -> None:
        """Leader, inside a long apply: send the AppendEntries round that is due.

        PySyncObj sends heartbeats from its tick, after applying every newly committed
        entry. On a busy machine applying a batch of registrations can outlast the
        followers' election timeout, and they would start elections against a live
        leader (see docs/BENCHMARKS.md, "registration storm").
        Called between the commands of an entry; due means PySyncObj's own heartbeat
        time has passed, so the rounds are those it would have sent. The clock decides
        only when a message leaves, never what is applied."""
        due = self._SyncObj__newAppendEntriesTime + self._apply_heartbeat_slack_s
        if monotonic() > due and self._isLeader():
            self._send_round()

    def _announce_commit(self) -> None:
        """Leader, first entry of a newly committed run: send the commit index now
        (an AppendEntries round, as PySyncObj sends after applying) so the followers
        apply these entries while the leader does. Runs on the tick thread, between
        PySyncObj's commit-index update and its apply loop."""
        commit = self._SyncObj__raftCommitIndex
        if commit > self._announced_commit and self._isLeader():
            self._announced_commit = commit
            self._send_round()


# ------------------------------------------------------------------ log alarms


class AlarmHandler(logging.Handler):
    """Routes PySyncObj's divergence warnings to the node whose tick thread logged
    them (several nodes may share a process in tests)."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.by_thread: dict[int, weakref.WeakMethod[Callable[[str], None]]] = {}

    def register(self, raise_alarm: Callable[[str], None]) -> None:
        """Tick thread: route this thread's warnings to ``raise_alarm`` (a bound
        method, held weakly: a stopped node is not kept alive)."""
        self.by_thread[threading.get_ident()] = weakref.WeakMethod(raise_alarm)

    def emit(self, record: logging.LogRecord) -> None:
        """Record the message on the owning node's alarms, if any."""
        message = record.getMessage()
        if not any(marker in message for marker in ALARM_MARKERS):
            return
        ref = self.by_thread.get(record.thread or 0)
        raise_alarm = ref() if ref is not None else None
        if raise_alarm is not None:
            raise_alarm(message)


ALARMS = AlarmHandler()
logging.getLogger("pysyncobj.syncobj").addHandler(ALARMS)


# PySyncObj pickles node objects into membership log entries; journals written
# before this module existed name the class raftstore.raft.DialNode, and so must
# every new entry, or an older node could not read it.
DialNode.__module__ = "raftstore.raft"


def journal_of(sync: SyncObj) -> Any:
    """PySyncObj's FileJournal of ``sync`` (a private attribute)."""
    return sync._SyncObj__raftLog


def raft_port(sync: SyncObj | None, self_addr: str) -> tuple[str, int, tuple[str, ...]]:
    """The Raft port of ``sync`` (None: a stopped node, nothing to say): its state
    (``listening``, ``paused`` or ``not listening``), the times it paused accepting,
    and an alarm unless it listens. From the transport, a private attribute of SyncObj."""
    transport = None if sync is None else getattr(sync, "_SyncObj__transport", None)
    if not isinstance(transport, RaftTransport):
        return PORT_LISTENING if sync is None else PORT_NOT_LISTENING, 0, ()
    state = transport.port_state
    alarms: tuple[str, ...] = ()
    if state != PORT_LISTENING:
        alarms = (
            f"the Raft port {self_addr} is {state}: a peer that loses its connection "
            "cannot connect again until it listens",
        )
    return state, transport.accept_pauses, alarms


def is_leader(sync: SyncObj) -> bool:
    """``SyncObj._isLeader`` (private; the public status call costs a dict build)."""
    return bool(sync._isLeader())
