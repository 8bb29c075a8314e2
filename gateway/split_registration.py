"""Split registrations: the parts of one broker's table, merged before anything applies.

A RocketMQ 5.x broker with ``enableSplitRegistration`` sends its topic table in
REGISTER_BROKER requests of ``splitRegistrationSize`` topics each, all with the same
DataVersion, because the whole table no longer fits a 16 MiB frame (upstream issues
#5296, #7326). An upstream NameServer applies every part as a registration of its
own: a reader can see half a table, and ``deleteTopicWithBrokerRegistration`` makes
each part delete the topics of the others.

Our brokers also name each part, in two header fields that upstream NameServers
ignore: ``splitRegistrationPart`` (0-based) and ``splitRegistrationParts`` (how many).
The gateway holds the parts of one broker entry here, undecoded, and registers the
merged table once, when the last part arrives: in raft mode as one Raft entry, in
eventual mode as one apply, so no reader ever sees a table half registered, and a
topic missing from the merged table is missing from the broker. In raft mode each
part's table digest (``register_body.topics_digest``) is kept, and the parts' digests
together name the whole table (:attr:`SplitTable.digest`): a broker's periodic round
of an unchanged table is then answered by that digest, as an unsplit one is, without
decoding a part or logging the table again. Parts without the fields (a real
5.x broker) stay registrations of their own, as upstream treats them.

What a sender can make the gateway hold is bounded: at most ``PARTS_MAX`` parts per
table, ``HELD_BYTES_MAX`` bytes of bodies over all tables being assembled, and a
table whose next part is ``IDLE_S`` late is dropped. Parts must arrive in order, on
any connection; an out-of-order part drops its table with a clear error, and the
broker's next round starts over.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from remoting.command import RemotingCommand
from remoting.errors import BodyDecodeError
from remoting.model import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicQueueMappingInfo,
)
from remoting.register_body import SPLIT_PART_FIELD as PART_FIELD, SPLIT_PARTS_FIELD as PARTS_FIELD

PARTS_MAX = 4096
"""Parts per table: 3.2 million topics at upstream's 800 per part."""
HELD_BYTES_MAX = 256 * 1024 * 1024
"""Body bytes held over every table being assembled (decoded, about three times that)."""
TABLES_MAX = 1024
"""Tables being assembled at once (one per broker entry)."""
IDLE_S = 60.0
"""A table whose next part has not come for this long is dropped."""

EntryKey = tuple[str, str, str, int]
"""(clusterName, brokerAddr, brokerName, brokerId): whose table a part belongs to."""


@dataclass(frozen=True, slots=True)
class PartHeld:
    """A part taken and held; the table registers when part ``parts - 1`` comes."""

    index: int
    parts: int

    @property
    def remark(self) -> str:
        return (
            f"split registration part {self.index + 1} of {self.parts} held; "
            "the last part registers the whole table"
        )


@dataclass(frozen=True, slots=True)
class PartRefused:
    """A part that cannot belong to a table; nothing of its table is held any more."""

    remark: str


@dataclass(frozen=True, slots=True)
class Part:
    """One part as received: its request (body undecoded), the DataVersion it carries
    and, in raft mode, the digest of its table (None: not digestible, or eventual mode)."""

    request: RemotingCommand
    data_version: DataVersion
    digest: bytes | None
    decoded: RegisterBrokerBody | None = None
    """The body, when it was decoded on arrival (no digest could be cut from it)."""

    @property
    def body_bytes(self) -> int:
        return len(self.request.body or b"")


@dataclass(frozen=True, slots=True)
class SplitTable:
    """Every part of one table, in order, once the last has come."""

    data_version: DataVersion
    parts: tuple[Part, ...]

    @property
    def digest(self) -> bytes | None:
        """A digest of the whole table (the parts' digests in order, and how many), the
        same on every node the broker sent the same parts to; None when a part had none."""
        digests = [part.digest for part in self.parts]
        if any(d is None for d in digests):
            return None
        hasher = hashlib.sha256(b"split:%d:" % len(digests))
        for digest in digests:
            assert digest is not None
            hasher.update(digest)
        return hasher.digest()

    def merge(self, bodies: Sequence[RegisterBrokerBody]) -> RegisterBrokerBody:
        """The parts' decoded ``bodies`` (in the order of :attr:`parts`) as one: their
        topics (a later part wins a repeated name), static-topic mappings and filter
        servers. BodyDecodeError when a part carries another DataVersion than its digest
        said."""
        topics: dict[str, TopicConfig] = {}
        mappings: dict[str, TopicQueueMappingInfo] = {}
        details: dict[str, object] = {}
        mapping_version: DataVersion | None = None
        filters: list[str] = []
        assert len(bodies) == len(self.parts)
        for index, body in enumerate(bodies):
            wrapper = body.topic_config_wrapper
            if wrapper.data_version != self.data_version:
                raise BodyDecodeError(
                    f"split registration part {index + 1} of {len(self.parts)} decodes to "
                    "another DataVersion than the table's"
                )
            topics.update(wrapper.topic_config_table)
            mappings.update(wrapper.topic_queue_mapping_info_map)
            details.update(wrapper.topic_queue_mapping_detail_map)
            if wrapper.mapping_data_version is not None:
                mapping_version = wrapper.mapping_data_version
            filters = body.filter_server_list or filters
        merged = TopicConfigSerializeWrapper(
            data_version=self.data_version,
            topic_config_table=topics,
            mapping_data_version=mapping_version,
            topic_queue_mapping_info_map=mappings,
            topic_queue_mapping_detail_map=details,
        )
        return RegisterBrokerBody(topic_config_wrapper=merged, filter_server_list=filters)


@dataclass(slots=True)
class _Table:
    parts: int
    data_version: DataVersion
    held: list[Part] = field(default_factory=list)
    held_bytes: int = 0
    last_part_at: float = 0.0


def split_fields(ext_fields: dict[str, str] | None) -> tuple[int, int] | PartRefused | None:
    """(index, parts) when the header names a part of a split table, None when it
    does not, PartRefused when its two fields are not a part's."""
    ext = ext_fields or {}
    index_text, parts_text = ext.get(PART_FIELD), ext.get(PARTS_FIELD)
    if index_text is None and parts_text is None:
        return None
    if index_text is None or parts_text is None:
        return PartRefused(f"a split registration names both {PART_FIELD} and {PARTS_FIELD}")
    if not (index_text.isdigit() and parts_text.isdigit()):
        return PartRefused(f"{PART_FIELD} and {PARTS_FIELD} are decimal numbers")
    index, parts = int(index_text), int(parts_text)
    if not 1 <= parts <= PARTS_MAX or index >= parts:
        return PartRefused(
            f"split registration part {index} of {parts}: "
            f"a table has 1 to {PARTS_MAX} parts, numbered from 0"
        )
    return index, parts


class SplitTables:
    """The tables being assembled, one per broker entry."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        held_bytes_max: int = HELD_BYTES_MAX,
        idle_s: float = IDLE_S,
    ) -> None:
        self._clock = clock
        self._held_bytes_max = held_bytes_max
        self._idle_s = idle_s
        self._tables: dict[EntryKey, _Table] = {}
        self.held_bytes = 0
        self.merged = 0
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._tables)

    def add(
        self, key: EntryKey, index: int, parts: int, part: Part
    ) -> SplitTable | PartHeld | PartRefused:
        """Take ``part``, number ``index`` of ``parts`` of ``key``'s table: the whole
        table once it is the last, PartHeld before, PartRefused when it does not follow."""
        now = self._clock()
        self._drop_idle(now)
        table = self._tables.get(key)
        if index == 0:
            if table is not None:
                self._drop(key)  # the broker started over: its last round was cut short
            table = _Table(parts=parts, data_version=part.data_version)
        elif table is None or len(table.held) != index or table.parts != parts:
            expected = (
                "no part of it is held"
                if table is None
                else f"part {len(table.held) + 1} of {table.parts} was expected"
            )
            self._drop(key)
            return PartRefused(
                f"split registration part {index + 1} of {parts} out of order: {expected}; "
                "the table is dropped, register it again from its first part"
            )
        elif part.data_version != table.data_version:
            self._drop(key)
            return PartRefused(
                f"split registration part {index + 1} of {parts} carries another "
                "DataVersion than part 1; the table is dropped"
            )
        full = self.held_bytes + part.body_bytes > self._held_bytes_max
        if full or (key not in self._tables and len(self._tables) >= TABLES_MAX):
            self._drop(key)
            return PartRefused(
                f"split registrations being assembled hold {self.held_bytes} bytes of "
                f"{len(self._tables)} tables, the most this node holds; the table is "
                "dropped, register it again later"
            )
        self._tables[key] = table
        table.held.append(part)
        table.held_bytes += part.body_bytes
        self.held_bytes += part.body_bytes
        table.last_part_at = now
        if len(table.held) < parts:
            return PartHeld(index, parts)
        del self._tables[key]
        self.held_bytes -= table.held_bytes
        self.merged += 1
        return SplitTable(table.data_version, tuple(table.held))

    def _drop(self, key: EntryKey) -> None:
        table = self._tables.pop(key, None)
        if table is not None:
            self.held_bytes -= table.held_bytes
            self.dropped += 1

    def _drop_idle(self, now: float) -> None:
        late = [k for k, t in self._tables.items() if now - t.last_part_at > self._idle_s]
        for key in late:
            self._drop(key)
