"""Who may move a broker: which connection holds each broker entry on this node, and
the one rule saying who else may change it (docs/SECURITY.md, "Who may move a broker").

An *entry* is one slot of a broker group, (brokerName, brokerId), with the address
the route table names for it. On each node, the connection whose REGISTER_BROKER put
that address there *holds* the entry (after a restart of the node: the first
connection to register it again). The hold ends when that connection closes, or as
soon as the table no longer names that address in the slot (the entry expired, was
unregistered, or an allowed move replaced it): a hold is checked against the applied
table before it refuses anything.

The rule, decided on the node the request reached and before anything is proposed
(a refusal needs no replication, and raft-applied code never sees a connection):

1. A REGISTER_BROKER that would change an entry another open connection holds, by
   giving its slot another address or by registering the entry's address under another
   id of the same broker name (which drops the entry), is refused with NO_PERMISSION
   (16), unless it is signed by an account bound to that broker name (``brokerNames``
   in the accounts file).
2. An UNREGISTER_BROKER naming the address of an entry another open connection holds
   is refused on the same terms; an admin account may also unregister (the console's
   "unregister a broker").
3. Registering the held address again over another connection (a broker that
   reconnected while this node still sees its old connection) is accepted when it
   changes nothing but the entry's liveness: the same HA address, timeout, flags,
   DataVersion, topics and filter servers (offsets it reports are ignored). Anything
   more is refused with NO_PERMISSION naming what it would change, unless signed by an
   account bound to the broker name. An accepted one leaves the entry held by the old
   connection, and the command names that connection as the entry's channel, so the
   newcomer's close never unregisters it; when the old connection closes, the newest
   such connection still open takes the hold over instead of the broker being
   unregistered. (The Registrar applies this rule: :mod:`gateway.registration`.)
4. Raft failover groups: a registration as master (``enableRaftFailover``) while
   another live broker holds id 0 is answered by the table's own failover rule (take a
   slave id) and moves nothing, so it is not refused here.
5. BROKER_HEARTBEAT and QUERY_DATA_VERSION touch the live entry at their address
   (and report offsets): over another open connection than the holder's they are
   refused, unless signed by an account bound to the entry's broker name, or sent over
   a connection whose registration of the same address rule 3 accepted (which then
   refreshes liveness only; its offsets are ignored). An entry nobody holds on this
   node (the node restarted) may be touched by anyone, as upstream.

Which accounts may name which broker at all is the ACL's part
(:mod:`remoting.acl_policy`, ``brokerNames``); this module asks the ACL only who
validly signed a request it would otherwise refuse. Refusals are counted and logged at
most once per peer every 10 s and ten lines per 10 s in all; every master move the
table applies is logged at most ten lines per 10 s (:meth:`BrokerHolds.on_applied`).
"""

from __future__ import annotations

import enum
import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from raftstore.commands import Command, UnregisterRequest
from raftstore.replicator import Replicator
from raftstore.results import ApplyResult
from raftstore.route_table import RouteTable
from remoting.acl_policy import RemotingAcl
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.headers import header_bool
from remoting.limits import RefusalLog
from remoting.model import MASTER_ID
from remoting.register_request import RAFT_FAILOVER_FIELD

log = logging.getLogger(__name__)

HOLDS_MAX = 65_536
"""Entries one node tracks holds for; past it a new entry is served but not held (logged)."""
REASON_REGISTER = "register"
REASON_UNREGISTER = "unregister"
REASON_TOUCH = "touch"
PEERS_LOGGED_MAX = 4096
"""Peers whose last refusal time is remembered for the once-per-peer log."""
PEER_LOG_INTERVAL_S = 10.0
"""A peer's refusals are logged at most once per this many seconds."""

Slot = tuple[str, int]
"""(broker name, broker id)."""


def _code_name(request: RemotingCommand) -> str:
    try:
        return RequestCode(request.code).name
    except ValueError:
        return str(request.code)


@dataclass(slots=True)
class Hold:
    """One held entry: its address, the holding connection and who takes over from it."""

    cluster: str
    addr: str
    channel: str
    successor: str | None = None
    """The newest other open connection that registered the same address (rule 3)."""


@dataclass(frozen=True, slots=True)
class HoldRefusal:
    """A request refused because another connection holds the entry it would change."""

    reason: str
    remark: str


class Touch(enum.Enum):
    """What a BROKER_HEARTBEAT or QUERY_DATA_VERSION may do to the entry it names (rule 5)."""

    FULL = "full"
    """Refresh liveness and record the offsets it reports."""
    LIVENESS = "liveness"
    """Refresh liveness only: a non-holder connection that registered the same address."""


class PeerLog:
    """Refusal lines at most once per peer every :data:`PEER_LOG_INTERVAL_S`, and within
    the global allowance of a :class:`~remoting.limits.RefusalLog`: one hostile peer
    cannot fill the log, nor hide another's refusals behind its own."""

    def __init__(self) -> None:
        self._log = RefusalLog(logger=log)
        self._last_s: OrderedDict[str, float] = OrderedDict()

    def warning(self, peer: str, message: str, *args: object) -> None:
        """Log ``message % args`` for ``peer`` unless its line is too recent."""
        now_s = time.monotonic()
        last_s = self._last_s.get(peer)
        if last_s is not None and now_s - last_s < PEER_LOG_INTERVAL_S:
            return
        self._last_s[peer] = now_s
        self._last_s.move_to_end(peer)
        while len(self._last_s) > PEERS_LOGGED_MAX:
            self._last_s.popitem(last=False)
        self._log.warning(now_s, message, *args)


@dataclass(frozen=True, slots=True)
class Released:
    """What a closed connection held: entries a successor took over, and the others."""

    handed_over: tuple[Slot, ...] = ()
    dropped: tuple[UnregisterRequest, ...] = ()


def _move_hint(name: str) -> str:
    return (
        f"It moves only over that connection, after that connection closes or the entry "
        f"expires or is unregistered, or signed by an account bound to {name!r} "
        f"(brokerNames in the accounts file)."
    )


def _group_addrs(table: RouteTable, name: str) -> tuple[dict[int, str], bool]:
    """The group's addresses by broker id, and whether its master is live."""
    data = table.broker_data(name)
    if data is None:
        return {}, False
    master = data.broker_addrs.get(MASTER_ID)
    live = master is not None and table.live_broker(data.cluster, master) is not None
    return dict(data.broker_addrs), live


class BrokerHolds:
    """The holds of this node's connections and the rule of the module docstring.

    ``failover``: raft failover runs on this node (the table answers a returning master
    itself). ``acl`` (set by the gateway) tells who signed; without one nobody is bound.
    Used from the gateway's event loop, except :meth:`on_applied` (the apply thread).
    """

    def __init__(self, replicator: Replicator, *, failover: bool = False) -> None:
        self._replicator = replicator
        self._failover = failover
        self.acl: RemotingAcl | None = None
        self._holds: dict[str, dict[int, Hold]] = {}
        self._channels: dict[str, set[Slot]] = {}
        self._at: dict[tuple[str, str], set[Slot]] = {}
        """The held slots at each (cluster, address): what a touch names."""
        self._held = 0
        self.refused: Counter[str] = Counter()
        """Refusals by kind (``register``, ``unregister``), for tests and metrics."""
        self._refusal_log = PeerLog()
        self._move_log = RefusalLog(logger=log)
        self._capacity_log = RefusalLog(logger=log)

    # ------------------------------------------------------------ the rule

    def check_register(
        self,
        request: RemotingCommand,
        *,
        channel: str | None,
        peer_host: str,
        name: str,
        broker_id: int,
        addr: str,
        peer_subject: str | None = None,
    ) -> HoldRefusal | None:
        """Rule 1 (and 4) for a REGISTER_BROKER of ``name`` id ``broker_id`` at ``addr``."""
        held = self._holds.get(name)
        if not held:
            return None
        # Its own slot at another address, or its address under another id.
        conflicts = [
            (bid, hold)
            for bid, hold in held.items()
            if hold.channel != channel
            and (hold.addr != addr if bid == broker_id else hold.addr == addr)
        ]
        if not conflicts:
            return None
        returning_master = (
            self._failover
            and broker_id == MASTER_ID
            and bool(header_bool(request, RAFT_FAILOVER_FIELD))
        )
        standing = self._standing(name, conflicts, returning_master=returning_master)
        if not standing or self._authorized(request, peer_host, peer_subject, {name}, admin=False):
            return None
        bid, hold = standing[0]
        if bid == broker_id:
            what = f"that entry is at {hold.addr}"
        else:
            what = f"{addr} is {name} id {bid}, which it would drop"
        return self._refuse(
            REASON_REGISTER,
            f"REGISTER_BROKER of {name} id {broker_id} at {addr} refused: {what} "
            f"({hold.cluster}), held by the open connection {hold.channel} on this node. "
            + _move_hint(name),
            peer_host,
        )

    def check_unregister(
        self,
        request: RemotingCommand,
        *,
        channel: str | None,
        peer_host: str,
        cluster: str,
        name: str,
        addr: str,
        peer_subject: str | None = None,
    ) -> HoldRefusal | None:
        """Rule 2: UNREGISTER_BROKER removes ``addr`` from ``name``'s group and the live
        entry (``cluster``, ``addr``), so every entry held at that address counts."""
        standing: list[tuple[str, int, Hold]] = []
        for held_name, held in sorted(self._holds.items()):
            conflicts = [
                (bid, hold)
                for bid, hold in held.items()
                if hold.channel != channel
                and hold.addr == addr
                and (held_name == name or hold.cluster == cluster)
            ]
            if conflicts:
                standing += [
                    (held_name, bid, hold)
                    for bid, hold in self._standing(held_name, conflicts, returning_master=False)
                ]
        names = {held_name for held_name, _, _ in standing}
        if not standing or self._authorized(request, peer_host, peer_subject, names, admin=True):
            return None
        held_name, bid, hold = standing[0]
        return self._refuse(
            REASON_UNREGISTER,
            f"UNREGISTER_BROKER of {addr} ({name}) refused: {addr} is {held_name} id {bid} "
            f"({hold.cluster}), held by the open connection {hold.channel} on this node. "
            f"It is unregistered only over that connection, or signed by an account bound "
            f"to {held_name!r} or an admin account; it goes anyway when that connection "
            f"closes or the entry expires.",
            peer_host,
        )

    def _standing(
        self, name: str, conflicts: list[tuple[int, Hold]], *, returning_master: bool
    ) -> list[tuple[int, Hold]]:
        """The conflicting holds the applied table still backs; stale ones are dropped."""
        addrs, master_live = self._replicator.read(lambda table: _group_addrs(table, name))
        standing = []
        for bid, hold in conflicts:
            if addrs.get(bid) != hold.addr:
                self._drop(name, bid, hold)
            elif not (returning_master and bid == MASTER_ID and master_live):
                standing.append((bid, hold))
        return standing

    def bound_signer(
        self, request: RemotingCommand, peer_host: str, name: str, peer_subject: str | None = None
    ) -> bool:
        """Whether ``request`` is validly signed by an account bound to ``name``, or comes
        with the TLS client certificate of one (``peer_subject``): the broker's own
        identity, which may change its entry from any connection."""
        return self._authorized(request, peer_host, peer_subject, (name,), admin=False)

    def check_touch(
        self,
        request: RemotingCommand,
        *,
        channel: str | None,
        peer_host: str,
        cluster: str,
        addr: str,
        name: str,
        peer_subject: str | None = None,
    ) -> Touch | HoldRefusal:
        """Rule 5 for a BROKER_HEARTBEAT or QUERY_DATA_VERSION of (``cluster``, ``addr``),
        naming broker ``name``, over ``channel``: what it may do, or its refusal. While
        the accounts file binds broker names, ``name`` must be the broker at that
        address: the ACL checked the signature against the name, not the address."""
        if self.acl is not None and self.acl.config.bindings:
            data = self._replicator.read(lambda table: table.broker_data(name))
            if data is None or data.cluster != cluster or addr not in data.broker_addrs.values():
                return self._refuse(
                    REASON_TOUCH,
                    f"{_code_name(request)} naming {name!r} refused: {addr} ({cluster}) is "
                    f"not an address of {name!r} (broker names are bound to accounts here)",
                    peer_host,
                )
        slots = self._at.get((cluster, addr))
        if not slots or channel is None:
            return Touch.FULL
        mine = self._channels.get(channel, set())
        guest = False
        for held_name, bid in sorted(slots):
            hold = self._holds[held_name][bid]
            if hold.channel == channel:
                continue
            if self.bound_signer(request, peer_host, held_name, peer_subject):
                continue
            if (held_name, bid) in mine:
                guest = True  # rule 3 accepted its registration of this address
                continue
            return self._refuse(
                REASON_TOUCH,
                f"{_code_name(request)} of {addr} ({cluster}) refused: {addr} is "
                f"{held_name} id {bid}, held by the open connection {hold.channel} on this "
                "node, which alone keeps it alive (or a connection whose registration of "
                f"it was accepted, or an account bound to {held_name!r}).",
                peer_host,
            )
        return Touch.LIVENESS if guest else Touch.FULL

    def _authorized(
        self,
        request: RemotingCommand,
        peer_host: str,
        peer_subject: str | None,
        names: Iterable[str],
        *,
        admin: bool,
    ) -> bool:
        acl = self.acl
        account = None if acl is None else acl.signer(request, peer_host, peer_subject)
        if account is None:
            return False
        return (admin and account.admin) or all(account.binds(name) for name in names)

    def _refuse(self, reason: str, remark: str, peer_host: str) -> HoldRefusal:
        self.refused[reason] += 1
        self._refusal_log.warning(
            peer_host, "refused a broker change from %s: %s", peer_host, remark
        )
        return HoldRefusal(reason, remark)

    def refuse_change(
        self, name: str, broker_id: int, addr: str, changes: list[str], peer_host: str
    ) -> HoldRefusal:
        """Rule 3's refusal: a registration over a non-holder connection that would
        change ``changes`` of the held entry ``name`` id ``broker_id`` at ``addr``."""
        hold = self._holds.get(name, {}).get(broker_id)
        holder = (
            "another open connection" if hold is None else f"the open connection {hold.channel}"
        )
        return self._refuse(
            REASON_REGISTER,
            f"REGISTER_BROKER of {name} id {broker_id} at {addr} refused: it would change "
            f"{', '.join(changes)} of that entry, held by {holder} on this node; over another "
            "connection only the same registration is accepted (liveness). " + _move_hint(name),
            peer_host,
        )

    # ------------------------------------------------------------ keeping track

    def channel_for(self, name: str, broker_id: int, addr: str, channel: str | None) -> str | None:
        """The channel a registration's command names: the holder's when ``addr`` is the
        held address (rule 3), else ``channel`` itself."""
        hold = self._holds.get(name, {}).get(broker_id)
        if channel is None or hold is None or hold.addr != addr:
            return channel
        return hold.channel

    def registered(
        self, *, cluster: str, name: str, broker_id: int, addr: str, channel: str | None
    ) -> None:
        """A registration over ``channel`` succeeded: it holds the entry, follows its
        holder (same address), or changes nothing here."""
        if channel is None:
            return
        held = self._holds.get(name, {})
        hold = held.get(broker_id)
        slot = (name, broker_id)
        if hold is not None and hold.channel == channel:
            if hold.addr != addr:
                hold.successor = None  # it followed the old address
            self._unindex(slot, hold)
            hold.cluster, hold.addr = cluster, addr
            self._index(slot, hold)
            return
        if hold is not None and hold.addr == addr:
            hold.successor = channel
            self._channels.setdefault(channel, set()).add(slot)
            return
        if hold is None and self._held >= HOLDS_MAX:
            self._capacity_log.warning(
                time.monotonic(),
                "%d broker entries held: %s id %d is served but not held",
                HOLDS_MAX,
                name,
                broker_id,
            )
            return
        if hold is None:
            self._held += 1
        else:
            self._unindex(slot, hold)
        new = self._holds.setdefault(name, held)[broker_id] = Hold(cluster, addr, channel)
        self._index(slot, new)
        self._channels.setdefault(channel, set()).add(slot)

    def release(self, channel: str) -> Released:
        """``channel`` closed: hand its entries to their successors, drop the rest."""
        handed: list[Slot] = []
        dropped: list[UnregisterRequest] = []
        for name, bid in sorted(self._channels.pop(channel, ())):
            hold = self._holds.get(name, {}).get(bid)
            if hold is None:
                continue
            if hold.channel == channel and hold.successor is not None:
                hold.channel, hold.successor = hold.successor, None
                handed.append((name, bid))
            elif hold.channel == channel:
                self._drop(name, bid, hold)
                dropped.append(UnregisterRequest(hold.cluster, hold.addr, name, bid))
            elif hold.successor == channel:
                hold.successor = None
        return Released(tuple(handed), tuple(dropped))

    def unregistered(self, *, cluster: str, name: str, addr: str) -> None:
        """An UNREGISTER_BROKER was applied: the entries it removed are held no longer
        (the table removes ``addr`` from ``name``'s group and the live entry
        (``cluster``, ``addr``))."""
        for held_name, held in list(self._holds.items()):
            for bid, hold in list(held.items()):
                if hold.addr == addr and (held_name == name or hold.cluster == cluster):
                    self._drop(held_name, bid, hold)

    def holder(self, name: str, broker_id: int) -> str | None:
        """The connection holding ``name`` id ``broker_id`` here (None: nobody)."""
        hold = self._holds.get(name, {}).get(broker_id)
        return None if hold is None else hold.channel

    def _drop(self, name: str, bid: int, hold: Hold) -> None:
        held = self._holds.get(name)
        if held is None or held.get(bid) is not hold:
            return
        del held[bid]
        self._held -= 1
        self._unindex((name, bid), hold)
        if not held:
            del self._holds[name]

    def _index(self, slot: Slot, hold: Hold) -> None:
        self._at.setdefault((hold.cluster, hold.addr), set()).add(slot)

    def _unindex(self, slot: Slot, hold: Hold) -> None:
        key = (hold.cluster, hold.addr)
        slots = self._at.get(key)
        if slots is not None:
            slots.discard(slot)
            if not slots:
                del self._at[key]

    # ------------------------------------------------------------ master moves

    def on_applied(self, command: Command, result: ApplyResult) -> None:
        """Apply listener: log every master move (at most ten lines per 10 s)."""
        for move in result.changes.master_moves:
            self._move_log.warning(
                time.monotonic(),
                "%s's master moved from %s to %s (cluster %s)",
                move.broker_name,
                move.old_addr,
                move.new_addr,
                move.cluster_name,
            )
