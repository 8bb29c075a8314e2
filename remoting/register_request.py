"""One REGISTER_BROKER (103) request, read from its frame once.

:class:`RegisterBrokerRequest` is what the gateway's Registrar receives: the header's
fields, typed (:class:`BrokerRegistration`), with the frame they came from, whose body
is read only when the registration needs it (its digests and its decode, in
:mod:`remoting.register_body`). :class:`BrokerRegistration` is also the one argument
type of a registration everywhere above the wire: the service builds its Raft command
from it, and the console and the tests register a broker with one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from remoting.command import RemotingCommand
from remoting.ha_report import SlaveAcks, read_ha_report
from remoting.headers import header_bool, header_int, header_str, require_int, require_str

ZONE_NAME_EXT_FIELD = "__ZONE_NAME"
"""The ext field a 5.x broker names its zone in (upstream's ``MixAll.ZONE_NAME``)."""
MAX_OFFSET_FIELD = "maxOffset"
"""Raft failover: the broker's commit-log offset (5.x spells it so)."""
CONFIRM_OFFSET_FIELD = "confirmOffset"
"""Raft failover: the broker's confirmed offset (5.x spells it so)."""
RAFT_FAILOVER_FIELD = "enableRaftFailover"
"""Header field of a broker whose master the NameServer elects."""

# The answer's ext fields this NameServer adds to 5.x's (haServerAddr, masterAddr).
ASSIGNED_BROKER_ID_FIELD = "assignedBrokerId"
"""Raft failover: the broker id the NameServers ask the registrant to take."""
RAFT_LOG_INDEX_FIELD = "raftLogIndex"
"""Raft mode: the index of the log entry that applied the registration, when one did."""
APPLIED_VERSION_FIELD = "appliedVersion"
"""Raft mode, beside ``raftLogIndex``: the table version that command left, the same on
every node; it orders the commands of one entry (a batch) too."""


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """What a REGISTER_BROKER says of its broker, without its topic table.

    The four first fields name the broker entry (required on the wire); the rest are
    None when the request leaves them out. Nothing here is checked beyond its type:
    the service checks names and numbers when it builds the command.
    """

    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int
    ha_server_addr: str | None = None
    zone_name: str | None = None
    heartbeat_timeout_ms: int | None = None
    enable_acting_master: bool | None = None
    """None: the field is absent, as from brokers before 5.0 (treated as old)."""
    enable_raft_failover: bool | None = None
    max_offset: int | None = None
    confirm_offset: int | None = None
    ha_client_addr: str | None = None
    """A slave's local address of its HA connection (:mod:`remoting.ha_report`)."""
    slave_acks: SlaveAcks | None = None
    """A master's authenticated HA links and their acknowledged offsets."""

    @classmethod
    def read(cls, frame: RemotingCommand) -> BrokerRegistration:
        """The registration ``frame``'s header names; :class:`~remoting.errors.
        HeaderFieldError` naming the field when one is missing or malformed."""
        client, acks = read_ha_report(frame)
        return cls(
            cluster_name=require_str(frame, "clusterName"),
            broker_addr=require_str(frame, "brokerAddr"),
            broker_name=require_str(frame, "brokerName"),
            broker_id=require_int(frame, "brokerId"),
            ha_server_addr=header_str(frame, "haServerAddr"),
            zone_name=header_str(frame, ZONE_NAME_EXT_FIELD),
            heartbeat_timeout_ms=header_int(frame, "heartbeatTimeoutMillis"),
            enable_acting_master=header_bool(frame, "enableActingMaster"),
            enable_raft_failover=header_bool(frame, RAFT_FAILOVER_FIELD),
            max_offset=header_int(frame, MAX_OFFSET_FIELD),
            confirm_offset=header_int(frame, CONFIRM_OFFSET_FIELD),
            ha_client_addr=client,
            slave_acks=acks,
        )

    def without_reports(self) -> BrokerRegistration:
        """This registration without its offsets and HA links: what a registration sent
        for another connection's entry may say (those reports are the holder's)."""
        return dataclasses.replace(
            self, max_offset=None, confirm_offset=None, ha_client_addr=None, slave_acks=None
        )


@dataclass(frozen=True, slots=True)
class RegisterBrokerRequest:
    """A REGISTER_BROKER frame and its header, read once."""

    frame: RemotingCommand
    """The request as received: its body, read when the registration needs it, and the
    fields a signature or a split table's part is checked on."""
    broker: BrokerRegistration

    @classmethod
    def read(cls, frame: RemotingCommand) -> RegisterBrokerRequest:
        """``frame`` read; HeaderFieldError as :meth:`BrokerRegistration.read`."""
        return cls(frame, BrokerRegistration.read(frame))
