"""The nodes' own journals, read for the history: :class:`NodeJournals`.

Every change a node makes that no client asked for (a scan's expiry, eventual mode's
unregistration when a broker connection closed) is in that node's journal
(``gateway.expiry_reports``), and so is when its gateway started. This module reads the
journals and hands each new entry, once, to whoever records it
(``ExperimentContext``); what an entry is worth to the registers is not its business.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from experiments.faults import NODE_STATUS_CODE, ClusterHandle
from experiments.workload import now_us
from experiments.write_order import FreshRound
from gateway.internal import JOURNAL_FIELD, JOURNAL_ONLY
from remoting.client import RemotingClientError
from remoting.codes import ResponseCode

JOURNAL_TIMEOUT_S = 0.3
"""How long a journal read waits for a node (:meth:`NodeJournals.journal`): a loopback
answer takes about a millisecond, and a write waits for the read."""

EntryReader = Callable[[str, dict[str, Any], int], object]
"""Called with (node, entry, wall offset µs) for each new journal entry."""


def wall_us() -> int:
    """This host's wall clock in µs: the clock the gateways stamp the scans they report in
    NODE_STATUS with (``gateway.expiry_reports``)."""
    return time.time_ns() // 1_000


SAME_CLOCK_US = 1_000
"""A node whose measured clock offset is within this (beyond the measure's uncertainty)
of this host's runs on this host's clock (:meth:`NodeJournals._clock`)."""


def wall_offset_us() -> int:
    """This host's wall clock minus the harness's clock (:func:`now_us`), in µs, now.

    :func:`now_us` is the monotonic clock anchored to the wall clock when the harness
    started, so the offset is 0 at the start and then follows whatever the wall clock
    does that the monotonic clock does not (NTP slewing, a step). The harness clock is
    read on both sides of the wall clock and the midpoint taken, so reading the two
    clocks one after the other adds at most half that gap (a few µs)."""
    before = now_us()
    wall = wall_us()
    after = now_us()
    return wall - (before + after) // 2


@dataclass(slots=True)
class NodeJournals:
    """Reads every node's journal and passes each entry on once.

    Each new entry goes to ``readers``, in order (the nemesis' failover group records
    its elections there: experiments.failover), then to ``on_entry`` (the context
    records the entry's writes). ``on_start`` is called once per eventual-mode gateway
    that started during the recording (its journal began then)."""

    cluster: ClusterHandle
    raft: bool
    since_us: Callable[[], int]
    """When the recording started (harness clock, µs): entries stamped before it are
    ignored. Asked at each read: the journals exist before the recording starts."""
    on_start: Callable[[str], object]
    on_entry: EntryReader
    readers: list[EntryReader] = field(default_factory=list)
    _entries_seen: set[tuple[str, int, int]] = field(default_factory=set)
    _starts_seen: set[tuple[str, int]] = field(default_factory=set)
    _read_us: dict[str, int] = field(default_factory=dict)
    _clocks: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    """Per (node, started_us): the best measure of that process's clock, (offset,
    uncertainty) µs (:meth:`_clock`)."""
    _round: FreshRound | None = None

    async def journal(self, node: str) -> dict[str, Any] | None:
        """``node``'s journal of its own changes (NODE_STATUS ``journal=only``, which
        computes no digest: ``gateway.expiry_reports``): ``expiries`` (the entries) and
        ``started_us`` (when the gateway started); None when it did not answer in
        :data:`JOURNAL_TIMEOUT_S` (a paused or cut-off node must not hold up a write)."""
        try:
            answer = await self.cluster.internal(
                node, NODE_STATUS_CODE, {JOURNAL_FIELD: JOURNAL_ONLY}, JOURNAL_TIMEOUT_S
            )
        except RemotingClientError:
            return None
        if answer.code != ResponseCode.SUCCESS:
            return None
        journal: dict[str, Any] = json.loads(answer.body or b"{}")
        return journal

    async def collect(self) -> None:
        """:meth:`read_all`, shared by everyone who asks while one is under way
        (:class:`~experiments.write_order.FreshRound`): each caller returns after a
        read that began after it asked, and the writes that wait at once cost one read
        of every node, not one each."""
        if self._round is None:
            self._round = FreshRound(self.read_all)
        await self._round()

    async def read_all(self) -> None:
        """Pass on the entries of every node's journal (:meth:`journal`) that are new
        since the last call, in both modes.

        The node stamps those on its wall clock (µs), and every other row of the history
        is on the harness's clock (:func:`now_us`), so each stamp is moved onto it by
        the node's clock offset (:meth:`_clock`): this host's (:func:`wall_offset_us`,
        exact to µs while the wall clock does not slew or step between the stamp and the
        read) for a gateway on this host's clock, and for one whose clock is off (the
        nemesis' libfaketime restarts) its own, measured from the ``now_us`` of its
        answers, with each entry's window widened by that measure's uncertainty."""
        nodes = list(self.cluster.remoting_addrs())
        answers = await asyncio.gather(*(self._timed_journal(node) for node in nodes))
        host_us = wall_offset_us()
        since_us = self.since_us()
        for node, (journal, asked_us, answered_us) in zip(nodes, answers, strict=True):
            if journal is None:
                continue
            self._read_us[node] = asked_us
            started_us = int(journal.get("started_us", 0))
            offset_us, slack_us = self._clock(node, journal, host_us, asked_us, answered_us)
            if not self.raft and started_us - offset_us >= since_us:
                self._started(node, started_us)
            for entry in journal.get("expiries", []):
                # Keyed by the node's own stamp, which is the same in every status.
                key = (node, int(entry["seq"]), int(entry["started_us"]))
                if key in self._entries_seen or key[2] - offset_us < since_us:
                    continue
                self._entries_seen.add(key)
                if slack_us:
                    entry = {
                        **entry,
                        "started_us": int(entry["started_us"]) - slack_us,
                        "committed_us": int(entry["committed_us"]) + slack_us,
                    }
                for reader in (*self.readers, self.on_entry):
                    reader(node, entry, offset_us)

    async def _timed_journal(self, node: str) -> tuple[dict[str, Any] | None, int, int]:
        asked_us = now_us()
        journal = await self.journal(node)
        return journal, asked_us, now_us()

    def _clock(
        self, node: str, journal: dict[str, Any], host_us: int, asked_us: int, answered_us: int
    ) -> tuple[int, int]:
        """``node``'s wall clock against the harness clock, (offset, slack) in µs, for the
        gateway process that answered (one per ``started_us``): the node's ``now_us``
        less the middle of the call, as NTP reads a server, uncertain by half the call
        (the smallest seen is kept). Within that uncertainty (and
        :data:`SAME_CLOCK_US`) of this host's offset, the node runs on this host's clock:
        the host's exact offset, no slack. Otherwise the measured offset, with its
        uncertainty as the slack."""
        if "now_us" not in journal:
            return host_us, 0
        measured_us = int(journal["now_us"]) - (asked_us + answered_us) // 2
        uncertainty_us = (answered_us - asked_us + 1) // 2
        process = (node, int(journal.get("started_us", 0)))
        best = self._clocks.get(process)
        if best is None or uncertainty_us < best[1]:
            best = self._clocks[process] = (measured_us, uncertainty_us)
        measured_us, uncertainty_us = best
        if abs(measured_us - host_us) <= uncertainty_us + SAME_CLOCK_US:
            return host_us, 0
        return measured_us, uncertainty_us

    def read_since(self, node: str, since_us: int) -> bool:
        """True when a read of ``node``'s journal that was sent after ``since_us`` (the
        harness clock) came back: every change the node made before then is known."""
        return self._read_us.get(node, -1) > since_us

    def _started(self, node: str, started_us: int) -> None:
        if (node, started_us) not in self._starts_seen:
            self._starts_seen.add((node, started_us))
            self.on_start(node)
