"""Talking to the NameServers: REGISTER_BROKER, QUERY_DATA_VERSION, UNREGISTER_BROKER, heartbeats.

Plays RocketMQ's ``BrokerOuterAPI`` plus the ``needRegister`` decision of
``BrokerController.registerBrokerAll``:

* a forced round registers with every NameServer in parallel (the periodic round
  is forced unless ``forceRegister`` is off, as upstream);
* an unforced round first asks every NameServer QUERY_DATA_VERSION with the
  broker's topic DataVersion and registers (with all of them) only if one
  says ``changed``, answers a different version, or fails (``BrokerController.needRegister``);
* the body is a RegisterBrokerBody, zlib-compressed (header ``compressed=true``)
  when its JSON form exceeds the configured size; ``bodyCrc32`` is
  ``zlib.crc32(body) & 0x7FFFFFFF``; the version is ``CURRENT_VERSION``;
* the first answer carrying ``masterAddr`` tells a slave whom to follow;
* with ``enableSplitRegistration``, a table of more than ``splitRegistrationSize``
  topics goes in parts of that many, one after the other to each NameServer, every
  part with the same DataVersion and naming its place (``splitRegistrationPart`` of
  ``splitRegistrationParts``, :mod:`gateway.split_registration`); the last part's
  answer is the registration's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from remoting.bodies import decode_data_version, decode_kv_table, encode_data_version
from remoting.client import RemotingClient, RemotingClientError
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import BodyDecodeError
from remoting.headers import header_bool
from remoting.model import DataVersion, KVTable, TopicConfigSerializeWrapper
from remoting.register_body import SPLIT_PART_FIELD, SPLIT_PARTS_FIELD, register_broker_request
from remoting.register_request import ASSIGNED_BROKER_ID_FIELD, RAFT_FAILOVER_FIELD

log = logging.getLogger(__name__)

"""Request header field opting the broker's group into raft failover."""

FailoverFields = Callable[[], dict[str, str]]
"""The raft-failover header fields of this moment: the 5.x ``maxOffset`` /
``confirmOffset`` and our report of the broker's HA links (:mod:`remoting.ha_report`)."""


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    """Who a broker says it is in every NameServer request."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    ha_server_addr: str

    def fields(self) -> dict[str, str]:
        """The four identity header fields shared by 104, 322 and 904."""
        return {
            "brokerAddr": self.broker_addr,
            "brokerId": str(self.broker_id),
            "brokerName": self.broker_name,
            "clusterName": self.cluster_name,
        }


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """What one NameServer answered to REGISTER_BROKER."""

    namesrv_addr: str
    ok: bool
    master_addr: str | None = None
    ha_server_addr: str | None = None
    kv_table: KVTable | None = None
    error: str | None = None
    assigned_broker_id: int | None = None


def build_register_request(
    identity: BrokerIdentity,
    wrapper: TopicConfigSerializeWrapper,
    *,
    compress_over_bytes: int,
    heartbeat_timeout_ms: int | None = None,
    extra_fields: dict[str, str] | None = None,
) -> RemotingCommand:
    """REGISTER_BROKER (103) with a RegisterBrokerBody, compressed when large.

    ``extra_fields`` (raft failover: offsets and the opt-in flag) join the header.
    """
    return register_broker_request(
        cluster_name=identity.cluster_name,
        broker_name=identity.broker_name,
        broker_id=identity.broker_id,
        broker_addr=identity.broker_addr,
        ha_server_addr=identity.ha_server_addr,
        wrapper=wrapper,
        compress_over_bytes=compress_over_bytes,
        heartbeat_timeout_ms=heartbeat_timeout_ms,
        extra_fields=extra_fields,
    )


def build_query_data_version_request(
    identity: BrokerIdentity, version: DataVersion, extra_fields: dict[str, str] | None = None
) -> RemotingCommand:
    """QUERY_DATA_VERSION (322) carrying the broker's topic DataVersion."""
    fields = identity.fields()
    fields.update(extra_fields or {})
    return RemotingCommand.request(
        RequestCode.QUERY_DATA_VERSION, fields, encode_data_version(version)
    )


def build_unregister_request(identity: BrokerIdentity) -> RemotingCommand:
    """UNREGISTER_BROKER (104)."""
    return RemotingCommand.request(RequestCode.UNREGISTER_BROKER, identity.fields())


def build_heartbeat_request(
    identity: BrokerIdentity, timeout_ms: int, extra_fields: dict[str, str] | None = None
) -> RemotingCommand:
    """BROKER_HEARTBEAT (904), sent one-way; the header field is spelled ``...Mills`` upstream.

    ``extra_fields`` carries the 5.x ``maxOffset`` / ``confirmOffset`` in raft failover.
    """
    fields = identity.fields()
    fields["heartbeatTimeoutMills"] = str(timeout_ms)
    fields.update(extra_fields or {})
    return RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, fields)


def parse_register_response(namesrv_addr: str, response: RemotingCommand) -> RegisterResult:
    """The RegisterBrokerResult of one answer (a failure code gives ``ok=False``)."""
    if response.code != ResponseCode.SUCCESS:
        return RegisterResult(namesrv_addr, False, error=f"code {response.code}: {response.remark}")
    ext = response.ext_fields or {}
    kv_table = None
    if response.body:
        try:
            kv_table = decode_kv_table(response.body)
        except BodyDecodeError as exc:
            log.warning("namesrv %s answered an unreadable KVTable: %s", namesrv_addr, exc)
    assigned = ext.get(ASSIGNED_BROKER_ID_FIELD, "")
    return RegisterResult(
        namesrv_addr,
        True,
        ext.get("masterAddr") or None,
        ext.get("haServerAddr") or None,
        kv_table,
        assigned_broker_id=int(assigned) if assigned.isdigit() else None,
    )


class Registrar:
    """Registers one broker with a list of NameServers.

    ``identity`` and ``wrapper`` are callables so each round sends the current
    addresses and topic table. ``offsets`` (raft failover) makes every
    registration, QUERY_DATA_VERSION and heartbeat carry ``maxOffset`` and
    ``confirmOffset``, and registrations ``enableRaftFailover=true``.
    """

    def __init__(
        self,
        client: RemotingClient,
        namesrv_addrs: tuple[str, ...],
        identity: Callable[[], BrokerIdentity],
        wrapper: Callable[[], TopicConfigSerializeWrapper],
        *,
        timeout_s: float,
        compress_over_bytes: int,
        split_size: int | None = None,
        heartbeat_timeout_ms: int | None = None,
        failover_fields: FailoverFields | None = None,
    ) -> None:
        self.client = client
        self.split_size = split_size
        self.failover_fields = failover_fields
        self.namesrv_addrs = namesrv_addrs
        self.identity = identity
        self.wrapper = wrapper
        self.timeout_s = timeout_s
        self.compress_over_bytes = compress_over_bytes
        self.heartbeat_timeout_ms = heartbeat_timeout_ms
        self.rounds = 0
        self.skipped_rounds = 0

    async def register_all(self, *, force: bool) -> list[RegisterResult]:
        """One registration round; an empty list when no NameServer needed it."""
        self.rounds += 1
        if not force and not await self.need_register():
            self.skipped_rounds += 1
            return []
        return await self.register_with(self.wrapper())

    async def register_with(self, wrapper: TopicConfigSerializeWrapper) -> list[RegisterResult]:
        """Send ``wrapper`` (a full or a one-topic table) to every NameServer in parallel,
        in parts when it is larger than the split size."""
        extra = self._failover_fields()
        if self.failover_fields is not None:
            extra[RAFT_FAILOVER_FIELD] = "true"
        identity = self.identity()
        requests = [
            build_register_request(
                identity,
                part,
                compress_over_bytes=self.compress_over_bytes,
                heartbeat_timeout_ms=self.heartbeat_timeout_ms,
                extra_fields={**extra, **fields},
            )
            for part, fields in split_table(wrapper, self.split_size)
        ]
        return list(
            await asyncio.gather(
                *(self._register_parts(addr, requests) for addr in self.namesrv_addrs)
            )
        )

    async def _register_parts(self, addr: str, requests: list[RemotingCommand]) -> RegisterResult:
        """The parts in order to one NameServer; the first refusal ends the round there."""
        for request in requests[:-1]:
            result = await self._register_one(addr, request)
            if not result.ok:
                return result
        return await self._register_one(addr, requests[-1])

    async def _register_one(self, addr: str, request: RemotingCommand) -> RegisterResult:
        try:
            response = await self.client.invoke(addr, request, self.timeout_s)
        except RemotingClientError as exc:
            log.warning("register to namesrv %s failed: %s", addr, exc)
            return RegisterResult(addr, False, error=str(exc))
        result = parse_register_response(addr, response)
        if not result.ok:
            log.warning("namesrv %s refused the registration: %s", addr, result.error)
        return result

    async def need_register(self) -> bool:
        """``needRegister``: True when any NameServer's view differs from ours."""
        version = self.wrapper().data_version
        request = build_query_data_version_request(
            self.identity(), version, self._failover_fields()
        )
        answers = await asyncio.gather(
            *(self._changed(addr, request, version) for addr in self.namesrv_addrs)
        )
        return any(answers)

    async def _changed(self, addr: str, request: RemotingCommand, version: DataVersion) -> bool:
        try:
            response = await self.client.invoke(addr, request, self.timeout_s)
            if response.code != ResponseCode.SUCCESS:
                return True
            changed = header_bool(response, "changed") is True
            return changed or decode_data_version(response.body) != version
        except (RemotingClientError, BodyDecodeError) as exc:
            log.info("query data version at %s failed (%s); registering", addr, exc)
            return True

    def _failover_fields(self) -> dict[str, str]:
        return {} if self.failover_fields is None else self.failover_fields()

    async def unregister_all(self) -> None:
        """UNREGISTER_BROKER to every NameServer (graceful shutdown)."""
        request = build_unregister_request(self.identity())
        results = await asyncio.gather(
            *(self.client.invoke(addr, request, self.timeout_s) for addr in self.namesrv_addrs),
            return_exceptions=True,
        )
        for addr, result in zip(self.namesrv_addrs, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("unregister from namesrv %s failed: %s", addr, result)

    async def heartbeat_all(self, timeout_ms: int) -> None:
        """One-way BROKER_HEARTBEAT to every NameServer; failures are only logged."""
        request = build_heartbeat_request(self.identity(), timeout_ms, self._failover_fields())
        for addr in self.namesrv_addrs:
            try:
                await asyncio.wait_for(self.client.invoke_oneway(addr, request), self.timeout_s)
            except (RemotingClientError, TimeoutError) as exc:
                log.debug("heartbeat to namesrv %s failed: %s", addr, exc)


def split_table(
    wrapper: TopicConfigSerializeWrapper, size: int | None
) -> list[tuple[TopicConfigSerializeWrapper, dict[str, str]]]:
    """The table as it is sent: whole (no header fields) when ``size`` is None or it
    has at most ``size`` topics, else parts of ``size`` topics, each with the table's
    DataVersion and its place; the static-topic mappings ride on the last part."""
    topics = list(wrapper.topic_config_table.items())
    if size is None or len(topics) <= size:
        return [(wrapper, {})]
    count = -(-len(topics) // size)
    parts = []
    for index in range(count):
        last = index == count - 1
        part = TopicConfigSerializeWrapper(
            data_version=wrapper.data_version,
            topic_config_table=dict(topics[index * size : (index + 1) * size]),
            mapping_data_version=wrapper.mapping_data_version if last else None,
            topic_queue_mapping_info_map=wrapper.topic_queue_mapping_info_map if last else {},
            topic_queue_mapping_detail_map=(wrapper.topic_queue_mapping_detail_map if last else {}),
        )
        fields = {SPLIT_PART_FIELD: str(index), SPLIT_PARTS_FIELD: str(count)}
        parts.append((part, fields))
    return parts


def first_assignment(results: list[RegisterResult]) -> RegisterResult | None:
    """The first successful answer assigning this broker a new id (raft failover)."""
    for result in results:
        if result.ok and result.assigned_broker_id is not None:
            return result
    return None


def first_master(results: list[RegisterResult]) -> RegisterResult | None:
    """The first successful answer naming a master (what a slave follows)."""
    for result in results:
        if result.ok and result.master_addr:
            return result
    return None
