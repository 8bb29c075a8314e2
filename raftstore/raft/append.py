"""Follower-side trimming of AppendEntries, so that only a real conflict truncates.

Raft (section 5.3) truncates a follower's log only where an incoming entry
*conflicts* with an existing one (same index, different term). PySyncObj 0.3.17
truncates everything after ``prevLogIdx`` whenever the follower holds more
entries, conflict or not. Its leader also moves a follower's next index
*backwards* when the answer to an earlier batch arrives after later batches were
sent, so under load it routinely re-sends entries the follower already has. The
follower then deletes entries it has already applied (PySyncObj logs "truncating
already-applied log entries ... state machine may have diverged") and writes the
same entries again. The content is the same, but the journal is rewritten under
applied state, and a crash in between would lose acknowledged entries.

:func:`trim_append_entries` rewrites such a message before PySyncObj sees it:

* entries the follower already holds with the same term are dropped from the
  front, and ``prevLogIdx`` moves past them (they match, so Raft keeps them);
* if every sent entry matched and the follower holds more entries, it keeps and
  acknowledges the longest run of them that is known to be in the sender's log:
  entries at or below the follower's own commit point (committed entries are in
  every later leader's log), and entries carrying the sender's term (a term has
  one leader and a leader only appends, so they are that leader's own entries);
  only the uncommitted rest after that run may be truncated, and none of it has
  been applied;
* anything else (a conflict, a gap, a snapshot transfer) is left to PySyncObj.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

LogEntry = tuple[Any, int, int]
"""PySyncObj's log entry: (command, index, term)."""


class LogView(Protocol):
    """Read access to a follower's log by Raft index."""

    def first_index(self) -> int:
        """Index of the oldest entry kept (after compaction)."""

    def last_index(self) -> int:
        """Index of the newest entry."""

    def term_at(self, index: int) -> int:
        """Term of the entry at ``index`` (first_index <= index <= last_index)."""

    def committed_index(self) -> int:
        """The highest index this follower knows to be committed (or has applied)."""


def trim_append_entries(log: LogView, message: Mapping[str, Any]) -> Mapping[str, Any]:
    """Return ``message`` with already-held entries removed (or ``message`` itself)."""
    if message.get("type") != "append_entries" or "prevLogIdx" not in message:
        return message
    if message.get("transmission") is not None:
        return message
    entries: list[LogEntry] = list(message.get("entries") or [])
    prev_index: int = message["prevLogIdx"]
    first, last = log.first_index(), log.last_index()
    if prev_index >= last or prev_index < first:
        return message
    if log.term_at(prev_index) != message["prevLogTerm"]:
        return message
    held = 0
    while held < len(entries) and entries[held][1] <= last:
        _, index, term = entries[held]
        if log.term_at(index) != term:
            break
        held += 1
    if held == len(entries):
        return _acknowledge_held_tail(log, message, entries, prev_index, last)
    if held == 0:
        return message
    _, index, term = entries[held - 1]
    return {**message, "prevLogIdx": index, "prevLogTerm": term, "entries": entries[held:]}


def _acknowledge_held_tail(
    log: LogView,
    message: Mapping[str, Any],
    entries: list[LogEntry],
    prev_index: int,
    last: int,
) -> Mapping[str, Any]:
    """Every sent entry is held: point past the part of the tail the sender must hold."""
    matched = entries[-1][1] if entries else prev_index
    sender_term: int = message["term"]
    committed = log.committed_index()
    known = matched
    while known < last and (known + 1 <= committed or log.term_at(known + 1) == sender_term):
        known += 1
    if known == prev_index and not entries:
        return message
    return {**message, "prevLogIdx": known, "prevLogTerm": log.term_at(known), "entries": []}


class PySyncObjLogView:
    """A :class:`LogView` over PySyncObj's journal (entries are (command, index, term))."""

    def __init__(self, journal: Any, committed: Callable[[], int]) -> None:
        self._journal = journal
        self._committed = committed

    def first_index(self) -> int:
        """Index of the journal's first entry."""
        return int(self._journal[0][1])

    def last_index(self) -> int:
        """Index of the journal's last entry."""
        return int(self._journal[-1][1])

    def term_at(self, index: int) -> int:
        """Term of the entry at ``index``."""
        return int(self._journal[index - self.first_index()][2])

    def committed_index(self) -> int:
        """The follower's commit index or last applied index, whichever is higher."""
        return self._committed()
