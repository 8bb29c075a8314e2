"""The failover group's reader of the nodes' journals (experiments.failover has the whole story).

:class:`JournalElections` is one of ``NodeJournals.readers``: the context hands it each new
node journal entry before it records the entry's expiries (which leave the group's topic
alone: it is in ``truth_overrides``), and it finds there the elections of the group and an
expiry of its recorded master that elected nobody, for
:class:`~experiments.failover_history.FailoverHistory` to record.
"""

from __future__ import annotations

from typing import Any

from experiments.failover_history import FailoverHistory
from experiments.failover_members import GroupMembers
from experiments.node_changes import JOURNAL_RAFT_KEYS


class JournalElections:
    """Reads the group's elections and masterless expiries out of node journal entries."""

    def __init__(self, history: FailoverHistory, members: GroupMembers) -> None:
        self.history = history
        self.members = members

    def __call__(self, node: str, entry: dict[str, Any], offset_us: int) -> bool:
        """Record the elections of one node journal entry (NODE_STATUS, ``elections`` of an
        ``expire`` entry, ``gateway.expiry_reports``) of the run's failover group, with the
        entry's window moved onto the harness clock by ``offset_us`` (the wall clock's offset,
        ``experiments.journals.wall_offset_us``), and an expiry of the master that elected
        nobody; True when one was recorded."""
        history = self.history
        recorded = False
        elected = {e.get("broker_name") for e in entry.get("elections", [])}
        gone = {e.get("addr") for e in entry.get("expired", [])}
        source = {
            "reported_by": node,
            "scan_seq": int(entry["seq"]),
            "journal_kind": entry.get("kind", "expire"),
        } | {key: entry[key] for key in JOURNAL_RAFT_KEYS if key in entry}
        if history.route_master in gone and history.name not in elected:
            recorded |= history.record_expiry(
                node,
                gone,
                self.members.any_left(gone),
                int(entry["started_us"]) - offset_us,
                int(entry["committed_us"]) - offset_us,
                source,
            )
        for election in entry.get("elections", []):
            if election.get("broker_name") != history.name:
                continue
            recorded |= history.record_election(
                str(election["new_master_addr"]),
                node,
                int(entry["started_us"]) - offset_us,
                int(entry["committed_us"]) - offset_us,
                source,
            )
        return recorded
