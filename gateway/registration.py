"""One REGISTER_BROKER request, decided once: what it is, and so how it is answered.

The dispatcher reads the frame once (:class:`remoting.register_request.
RegisterBrokerRequest`); the :class:`Registrar` runs the checks that are about the
connection (CRC, holds, split parts) and then makes one call into the service
(:meth:`gateway.service_registration.Registrations.register_request`), which checks the
quorum once and decides the kind (:class:`~gateway.service_registration.Kind`).

A broker sends the same registration to every member every 30 s. Raft mode tells
four kinds apart, cheapest first, and each is answered one way:

* ``SEEN``: the request (header fields and body, by digest) is one already applied,
  the broker's last one or, on a follower, the leader's copy: answered from the
  applied state without decoding the body.
* ``LIVENESS_ONLY``: its plan on the applied state holds only liveness edits
  (:func:`raftstore.registration.liveness_only`): answered from
  the state, liveness refreshed as a heartbeat.
* ``TOPICS_UNCHANGED``: the topic table of the broker's last registration with a new
  DataVersion: logged without the table, and not decoded.
* ``FULL``: decoded and logged whole (always, in eventual mode).
* ``SPLIT``: the last part of a table a broker split (:mod:`gateway.split_registration`):
  the parts merged and registered whole; the parts before it are held, not applied.

Before any of them, a request whose body fails its ``bodyCrc32``, or that would move a
broker entry another open connection holds (:mod:`gateway.broker_holds`), is
:class:`Refused`; the entry an accepted one names is then held for its connection. A
request over another connection than the holder's at the held address (a *guest*:
``broker_holds`` rule 3) may change nothing but the entry's liveness: its offsets are
ignored, it is never TOPICS_UNCHANGED (a new DataVersion is a change), and a FULL or
SPLIT one whose plan changes anything more is refused, naming what it would change
(``RouteTable.registration_changes``), unless an account bound to the broker name
signed it. So is one whose body, when it comes to be decoded, is one no broker writes
(``register_body.RegisterBodyRefused``: the limits of docs/SECURITY.md, "Hostile
clients"), logged at most ten lines every 10 s; nothing of it is proposed or held.
Bodies are decoded by :class:`gateway.registration_bodies.BodyDecoder`: large ones in
a worker process, off the event loop.
In raft mode a node without contact with a quorum answers every kind with
NoQuorumError (the service checks, docs/RAFT.md "A node without a quorum says so").
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.broker_holds import HoldRefusal
from gateway.registration_bodies import BodyDecoder
from gateway.service_registration import Kind, Registered
from gateway.services import NameServerService
from gateway.split_registration import Part, PartHeld, PartRefused, SplitTables, split_fields
from raftstore.commands import RegisterBroker
from raftstore.results import Replication
from remoting import register_body
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.ha_report import read_ha_report
from remoting.limits import RefusalLog
from remoting.model import RegisterBrokerBody
from remoting.register_body import BodyDigest, RegisterBodyRefused
from remoting.register_request import BrokerRegistration, RegisterBrokerRequest

log = logging.getLogger(__name__)


def replication_of(request: RemotingCommand) -> Replication | None:
    """What ``request`` reports of its broker's HA links (:mod:`remoting.ha_report`),
    None when it reports nothing; HeaderFieldError for a malformed report."""
    return Replication.reported(*read_ha_report(request))


@dataclass(frozen=True, slots=True)
class Refused:
    """A REGISTER_BROKER answered ``code`` with ``remark`` before anything was proposed."""

    code: ResponseCode
    remark: str


REMARK_CRC_MISMATCH = "crc32 not match"


class _ChangeRefused(Exception):
    """A guest's registration would change more than liveness (caught in ``register``)."""

    def __init__(self, refusal: HoldRefusal) -> None:
        super().__init__(refusal.remark)
        self.refusal = refusal


@dataclass(frozen=True, slots=True)
class _Sender:
    """Who sent a registration, as the decision needs it."""

    broker: BrokerRegistration
    """As the command names it: a guest's without its reports."""
    channel: str | None
    """The channel the command names: the holder's for a guest (rule 3), else its own."""
    guest: bool
    """Over another connection than the holder's, and not signed by a bound account."""
    peer_host: str


class Registrar:
    """Decides what each REGISTER_BROKER is and answers it accordingly."""

    def __init__(self, service: NameServerService, bodies: BodyDecoder | None = None) -> None:
        self.service = service
        self.bodies = BodyDecoder() if bodies is None else bodies
        self.splits = SplitTables()
        self._refused_bodies = RefusalLog(logger=log)

    async def register(
        self,
        request: RegisterBrokerRequest,
        *,
        channel: str | None,
        peer_host: str,
        peer_subject: str | None = None,
    ) -> Registered | Refused | PartHeld:
        """Decide what ``request``, received over ``channel`` from ``peer_host`` (with
        the TLS client certificate ``peer_subject``), is and answer it that way; an
        accepted entry is then held for ``channel``."""
        frame, entry = request.frame, request.broker
        if not register_body.crc_matches(frame):
            return Refused(ResponseCode.SYSTEM_ERROR, REMARK_CRC_MISMATCH)
        holds = self.service.holds
        refusal = holds.check_register(
            frame,
            channel=channel,
            peer_host=peer_host,
            name=entry.broker_name,
            broker_id=entry.broker_id,
            addr=entry.broker_addr,
            peer_subject=peer_subject,
        )
        if refusal is not None:
            return Refused(ResponseCode.NO_PERMISSION, refusal.remark)
        # Another connection's registration of the held address names the holder.
        holder = holds.channel_for(entry.broker_name, entry.broker_id, entry.broker_addr, channel)
        guest = holder != channel and not holds.bound_signer(
            frame, peer_host, entry.broker_name, peer_subject
        )
        sender = _Sender(entry.without_reports() if guest else entry, holder, guest, peer_host)
        split = split_fields(frame.ext_fields)
        if isinstance(split, PartRefused):
            return Refused(ResponseCode.SYSTEM_ERROR, split.remark)
        try:
            if split is None:
                registered = await self._decide(frame, sender)
            else:
                part = await self._split_part(frame, sender, *split)
                if not isinstance(part, Registered):
                    return part
                registered = part
        except _ChangeRefused as exc:
            return Refused(ResponseCode.NO_PERMISSION, exc.refusal.remark)
        except RegisterBodyRefused as exc:
            self._refused_bodies.warning(
                time.monotonic(),
                "refused a REGISTER_BROKER body from %s (%s id %d at %s): %s",
                peer_host,
                entry.broker_name,
                entry.broker_id,
                entry.broker_addr,
                exc,
            )
            return Refused(ResponseCode.SYSTEM_ERROR, str(exc))
        if not registered.outcome.failed:
            assigned = registered.outcome.assigned_broker_id
            holds.registered(
                cluster=entry.cluster_name,
                name=entry.broker_name,
                addr=entry.broker_addr,
                channel=channel,
                broker_id=entry.broker_id if assigned is None else assigned,
            )
        return registered

    async def _decide(self, frame: RemotingCommand, sender: _Sender) -> Registered:
        """An unsplit request: its digests (raft mode), then one call into the service."""
        raft = self.service.raft
        topics = register_body.topics_digest(frame) if raft else None
        return await self.service.register_request(
            sender.broker,
            functools.partial(self.bodies.decode, frame),
            channel=sender.channel,
            request_digest=register_body.registration_digest(frame, topics) if raft else None,
            topics=topics,
            vet=self._vet(sender),
        )

    async def _split_part(
        self, frame: RemotingCommand, sender: _Sender, index: int, parts: int
    ) -> Registered | Refused | PartHeld:
        """SPLIT: part ``index`` of ``parts`` held, or the last one and the whole table
        registered. In raft mode the parts are held undecoded with their digests, and a
        table whose digest is the broker's last one is answered as TOPICS_UNCHANGED
        (or from state), without decoding a part or logging the table again."""
        cut = register_body.topics_digest(frame) if self.service.raft else None
        if cut is not None:
            part = Part(frame, cut.data_version, cut.topics)
        else:
            body = await self.bodies.decode(frame)
            part = Part(frame, body.topic_config_wrapper.data_version, None, body)
        entry = sender.broker
        key = (entry.cluster_name, entry.broker_addr, entry.broker_name, entry.broker_id)
        taken = self.splits.add(key, index, parts, part)
        if isinstance(taken, PartRefused):
            return Refused(ResponseCode.SYSTEM_ERROR, taken.remark)
        if isinstance(taken, PartHeld):
            return taken

        async def merged() -> RegisterBrokerBody:
            return taken.merge(
                [
                    p.decoded if p.decoded is not None else await self.bodies.decode(p.request)
                    for p in taken.parts
                ]
            )

        digest = taken.digest
        return await self.service.register_request(
            sender.broker,
            merged,
            channel=sender.channel,
            topics=None if digest is None else BodyDigest(digest, taken.data_version, b""),
            vet=self._vet(sender),
            whole=Kind.SPLIT,
        )

    def _vet(self, sender: _Sender) -> Callable[[RegisterBroker], None] | None:
        """A guest's check (None for any other sender): :class:`_ChangeRefused` when its
        command would change more than liveness."""
        if not sender.guest:
            return None

        def vet(command: RegisterBroker) -> None:
            changes = self.service.registration_changes(command)
            if changes:
                entry = sender.broker
                raise _ChangeRefused(
                    self.service.holds.refuse_change(
                        entry.broker_name,
                        entry.broker_id,
                        entry.broker_addr,
                        changes,
                        sender.peer_host,
                    )
                )

        return vet
