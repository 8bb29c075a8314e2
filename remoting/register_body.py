"""The REGISTER_BROKER body: ``RegisterBrokerBody`` as JSON or in its compressed binary form.

A 4.x/5.x broker sends its topic table either as the JSON of
``TopicConfigSerializeWrapper`` plus the filter server list, or, with header
``compressed=true``, as ``RegisterBrokerBody.encode(true)``: a deflated stream of
length-prefixed parts. Decoding is bounded (:data:`REGISTER_BODY_INFLATED_BYTES_MAX`)
because a compressed body is a zip bomb waiting to happen.

REGISTER_BROKER is admitted unsigned from white-listed addresses and its body is decoded
on the event loop, so before a body is decoded a few passes of C string operations
refuse what no broker writes (:func:`check_json_body`; for a compressed body
:func:`inflated_bytes_max`, :data:`REGISTER_BODY_BLOCKS_FREE`,
:data:`REGISTER_BODY_LENIENT_PARTS_MAX` and the limits of each part, checked before
the part is decoded: a topic's text, name and attributes, a static topic's mapping, the
DataVersion and the filter server list): :class:`RegisterBodyRefused`, a
:class:`BodyDecodeError` whose message names the limit. The numbers are in
:mod:`remoting.body_limits`, with those of every other body kind.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from remoting import body_limits, fastjson
from remoting.bodies import (
    _INT32,
    AttributesSeen,
    _as_object,
    _data_version_from,
    _data_version_json,
    _list,
    _load_object,
    _mapping_info_from,
    _mapping_info_json,
    _str_list,
    _utf8,
    _wrapper_from,
    _wrapper_json,
    encode_topic_config_text,
    topic_config_text,
)
from remoting.body_limits import (
    MAPPING_BLOCK_BYTES_MAX,
    REGISTER_BROKER,
    REGISTER_BROKER_COMPRESSED,
    TOPIC_TEXT_BYTES_MAX,
    PartRefused,
    refusing,
)
from remoting.codes import CURRENT_VERSION, MQVersion, RequestCode
from remoting.command import RemotingCommand
from remoting.errors import BodyDecodeError, BodyRefused, RegisterBodyRefused as RegisterBodyRefused
from remoting.headers import header_bool, header_int
from remoting.model import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicQueueMappingInfo,
)

SPLIT_PART_FIELD = "splitRegistrationPart"
"""REGISTER_BROKER header field: which part of a split table this is, from 0."""
SPLIT_PARTS_FIELD = "splitRegistrationParts"
"""REGISTER_BROKER header field: how many parts the split table has."""

# ------------------------------------------------------------ what a body may hold
#
# What a body costs to decode grows with the values it makes, not with its bytes: each
# value costs a few hundred nanoseconds, each topic or static-topic entry a few
# microseconds, whatever their length. Real bodies are sparse (a topic is ~170 bytes of
# JSON with ~19 separators and 2 objects); the costly hostile ones are dense (millions of
# one-byte values, or of tiny topic entries) or hold one huge part (a topic's attributes).
# The numbers are set in remoting.body_limits (REGISTER_BROKER and the kinds of the
# compressed body's parts), from the densest bodies brokers write with a margin of about
# two or more; they hold the costliest body within all of them to a few times what a
# real table of its length costs (docs/BENCHMARKS.md, "hostile clients and TLS" and "one
# hostile body of every kind"; tests/remoting/test_register_body_limits.py and
# test_register_body_parts.py). The names below are this module's: the compressed form's
# decoder reads its numbers here, where bench/header_decode.py turns them off to measure
# what they save; the JSON form's are those of the REGISTER_BROKER budget, named again.

REGISTER_BODY_INFLATED_BYTES_MAX = body_limits.REGISTER_BODY_INFLATED_BYTES_MAX
"""A compressed REGISTER_BROKER body may not inflate beyond this (zip-bomb guard)."""
REGISTER_BODY_UNCHECKED_BYTES_MAX = body_limits.REGISTER_BROKER.unchecked_bytes_max
"""A JSON body this short is not counted for density, digits and nesting."""
REGISTER_BODY_BYTES_PER_SEPARATOR_MIN = body_limits.REGISTER_BROKER.bytes_per_separator_min
"""At most one of ``{ [ , :`` outside strings per this many bytes (brokers: 6.2 or more)."""
REGISTER_BODY_BYTES_PER_OPENER_MIN = body_limits.REGISTER_BROKER.bytes_per_opener_min
"""At most one ``{`` or ``[`` outside strings per this many bytes (brokers: 69 or more)."""
REGISTER_BODY_DIGITS_MAX = body_limits.REGISTER_BROKER.int_digits_max
"""Longest run of digits outside strings (a long has 19)."""
REGISTER_BODY_DEPTH_MAX = body_limits.REGISTER_BROKER.depth_max
"""Deepest nesting of objects and arrays (brokers nest 7)."""
REGISTER_BODY_INFLATION_MAX = body_limits.REGISTER_BODY_INFLATION_MAX
"""A compressed body inflates to at most this many times its length (brokers: 10 to 69)."""
REGISTER_BODY_INFLATED_FREE_BYTES = body_limits.REGISTER_BODY_INFLATED_FREE_BYTES
"""Any compressed body may inflate this far."""
REGISTER_BODY_JSON_BLOCK_BYTES_MAX = body_limits.REGISTER_BODY_JSON_BLOCK_BYTES_MAX
"""Longest filter server list in a compressed body."""
REGISTER_BODY_LENIENT_PARTS_MAX = body_limits.REGISTER_BODY_LENIENT_PARTS_MAX
"""Most parts of a compressed body that are not standard JSON."""
REGISTER_BODY_BLOCKS_FREE = body_limits.REGISTER_BODY_BLOCKS_FREE
"""A compressed body holds at most one topic or static-topic mapping per byte, plus this."""


def check_json_body(data: bytes | bytearray) -> None:
    """Refuse (:class:`RegisterBodyRefused`) a JSON REGISTER_BROKER body no broker writes:
    past :data:`remoting.body_limits.REGISTER_BROKER` (a string longer than the longest
    topic name; single-quoted strings in a body longer than that; and in a body over
    :data:`REGISTER_BODY_UNCHECKED_BYTES_MAX` bytes, more separators or more objects and
    arrays than its length allows, a number of more than :data:`REGISTER_BODY_DIGITS_MAX`
    digits, nesting deeper than :data:`REGISTER_BODY_DEPTH_MAX`).

    Linear, in a few C passes over the body (under a nanosecond a byte, a few percent of
    decoding a real table); :func:`remoting.body_limits.check_json` says how."""
    body_limits.check_json(bytes(data), body_limits.REGISTER_BROKER)


def inflated_bytes_max(compressed_bytes: int) -> int:
    """How far a compressed body of ``compressed_bytes`` may inflate:
    :data:`REGISTER_BODY_INFLATION_MAX` times its length or
    :data:`REGISTER_BODY_INFLATED_FREE_BYTES`, whichever is more, and never past
    :data:`REGISTER_BODY_INFLATED_BYTES_MAX`."""
    allowed = max(REGISTER_BODY_INFLATION_MAX * compressed_bytes, REGISTER_BODY_INFLATED_FREE_BYTES)
    return min(allowed, REGISTER_BODY_INFLATED_BYTES_MAX)


# -------------------------------------------------------------- RegisterBrokerBody


def _register_body_json(body: RegisterBrokerBody, standard: bool) -> str:
    return (
        '{"filterServerList":'
        + fastjson.dumps(body.filter_server_list, standard=standard)
        + ',"topicConfigSerializeWrapper":'
        + _wrapper_json(body.topic_config_wrapper, standard)
        + "}"
    )


def _length_prefixed(chunks: list[bytes], raw: bytes) -> None:
    chunks.append(_INT32.pack(len(raw)))
    chunks.append(raw)


def _compressed_payload(body: RegisterBrokerBody, version: int) -> bytes:
    wrapper = body.topic_config_wrapper
    chunks: list[bytes] = []
    _length_prefixed(chunks, _data_version_json(wrapper.data_version).encode("ascii"))
    table = wrapper.topic_config_table
    chunks.append(_INT32.pack(len(table)))
    for topic in fastjson.sorted_keys(table):
        _length_prefixed(chunks, _utf8(encode_topic_config_text(table[topic])))
    _length_prefixed(chunks, _utf8(fastjson.dumps(body.filter_server_list)))
    if version >= MQVersion.V5_0_0:
        infos = wrapper.topic_queue_mapping_info_map
        chunks.append(_INT32.pack(len(infos)))
        for key in fastjson.sorted_keys(infos):
            _length_prefixed(chunks, _utf8(_mapping_info_json(infos[key], False)))
    return b"".join(chunks)


def encode_register_broker_body(
    body: RegisterBrokerBody, *, compressed: bool, version: int = CURRENT_VERSION
) -> bytes:
    """``RegisterBrokerBody.encode(compressed)``: plain JSON, or the zlib binary form.

    The compressed form carries the mapping block only for ``version >= 413``.
    """
    if not compressed:
        return _utf8(_register_body_json(body, False))
    return zlib.compress(_compressed_payload(body, version), zlib.Z_BEST_COMPRESSION)


_INFLATE_CHUNK_BYTES = 1024 * 1024
"""A compressed body is inflated this much at a time, as its parts are read: a part past
its limit is refused after at most this much more of the body is inflated (about a
millisecond of zlib), not after all of it (60 MB: 90 ms)."""


class _PayloadReader:
    """Reads the length-prefixed blocks of a compressed register body, inflating it as
    they are read, never past :func:`inflated_bytes_max` (:meth:`finish` inflates what
    is left, so a body is refused for its length however much of it was read)."""

    def __init__(self, data: bytes) -> None:
        self._data_bytes = len(data)
        self._limit = inflated_bytes_max(len(data))
        self._inflater = zlib.decompressobj()
        self._input = data
        self._inflated = 0
        self._buffer = b""
        self._position = 0

    def _inflate(self) -> bytes:
        """The next chunk of the payload; b"" once the stream (or its input) ends. Called
        with no input left too: zlib may hold output it had no room for."""
        if self._inflater.eof:
            return b""
        want = min(_INFLATE_CHUNK_BYTES, self._limit + 1 - self._inflated)
        try:
            chunk = self._inflater.decompress(self._input, want)
        except zlib.error as exc:
            raise BodyDecodeError(f"compressed register body is not zlib: {exc}") from exc
        self._input = self._inflater.unconsumed_tail
        self._inflated += len(chunk)
        if self._inflated > self._limit:
            why = (
                ""
                if self._limit == REGISTER_BODY_INFLATED_BYTES_MAX
                else f" ({REGISTER_BODY_INFLATION_MAX} times its length; broker tables inflate "
                "10 to 70 times)"
            )
            raise RegisterBodyRefused(
                f"compressed register body of {self._data_bytes} bytes inflates beyond the "
                f"limit of {self._limit} bytes{why}"
            )
        return chunk

    def _has(self, size: int) -> bool:
        """Whether ``size`` more bytes can be read, inflating as much as that needs."""
        while len(self._buffer) - self._position < size:
            chunk = self._inflate()
            if not chunk:
                return False
            self._buffer = self._buffer[self._position :] + chunk
            self._position = 0
        return True

    def _int32(self, what: str, suffix: str = "") -> int:
        # ``what`` + ``suffix`` names the int in errors; formatted only for them.
        if len(self._buffer) - self._position < _INT32.size and not self._has(_INT32.size):
            raise BodyDecodeError(f"compressed register body ends before {what}{suffix}")
        (value,) = _INT32.unpack_from(self._buffer, self._position)
        self._position += _INT32.size
        if value < 0:
            raise BodyDecodeError(f"negative {what}{suffix} {value} in compressed register body")
        return int(value)

    def count(self, what: str) -> int:
        """The next int32 (a count); never negative."""
        return self._int32(what)

    def block(self, what: str, bytes_max: int) -> bytes:
        """The next block; :class:`PartRefused` past ``bytes_max``, before it is inflated."""
        size = self._int32(what, " length")
        if size > bytes_max:
            raise PartRefused(f"a {what} of {size} bytes, more than {bytes_max}")
        end = self._position + size
        if end > len(self._buffer):
            if not self._has(size):
                raise BodyDecodeError(f"compressed register body ends inside {what}")
            end = self._position + size
        raw = self._buffer[self._position : end]
        self._position = end
        return raw

    def finish(self) -> None:
        """Inflate the rest of the body (bytes no part reads), within the same limit: a
        MiB per step, each checked, until a step gives nothing."""
        chunk = self._inflate()
        while chunk:
            chunk = self._inflate()


# ------------------------------------------------------------- the request (103)

CRC32_MASK = 0x7FFFFFFF
"""Upstream masks the body CRC to a non-negative Java int (``UtilAll.crc32``)."""
BODY_CRC32_FIELD = "bodyCrc32"


def body_crc32(body: bytes | None) -> int:
    """The ``bodyCrc32`` header value: ``UtilAll.crc32`` of the body, 0 for none."""
    return zlib.crc32(body) & CRC32_MASK if body else 0


def crc_matches(request: RemotingCommand) -> bool:
    """Whether a REGISTER_BROKER's ``bodyCrc32`` matches its body; 0 means "not
    computed" upstream and matches any body."""
    crc = header_int(request, BODY_CRC32_FIELD, bits=32) or 0
    return crc == 0 or crc == body_crc32(request.body)


def register_broker_request(
    *,
    cluster_name: str,
    broker_name: str,
    broker_id: int,
    broker_addr: str,
    ha_server_addr: str,
    wrapper: TopicConfigSerializeWrapper,
    compress_over_bytes: int | None = None,
    enable_acting_master: bool | None = False,
    heartbeat_timeout_ms: int | None = None,
    extra_fields: Mapping[str, str] | None = None,
    version: int = CURRENT_VERSION,
) -> RemotingCommand:
    """REGISTER_BROKER (103) as a broker sends it: header fields as strings, a
    RegisterBrokerBody compressed when its JSON is longer than ``compress_over_bytes``
    (None: never), ``bodyCrc32`` of the body sent. ``enable_acting_master`` None leaves
    the field out, as brokers before 5.0 do (the NameServer then treats the broker as
    old: no slave stands in for a missing master)."""
    body_value = RegisterBrokerBody(topic_config_wrapper=wrapper)
    body = encode_register_broker_body(body_value, compressed=False, version=version)
    compressed = compress_over_bytes is not None and len(body) > compress_over_bytes
    if compressed:
        body = encode_register_broker_body(body_value, compressed=True, version=version)
    fields = {
        "brokerAddr": broker_addr,
        "brokerId": str(broker_id),
        "brokerName": broker_name,
        "clusterName": cluster_name,
        "haServerAddr": ha_server_addr,
        "compressed": "true" if compressed else "false",
        BODY_CRC32_FIELD: str(body_crc32(body)),
    }
    if enable_acting_master is not None:
        fields["enableActingMaster"] = "true" if enable_acting_master else "false"
    if heartbeat_timeout_ms is not None:
        fields["heartbeatTimeoutMillis"] = str(heartbeat_timeout_ms)
    fields.update(extra_fields or {})
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, fields, body, version=version)


def _filter_server_list(values: list[object]) -> list[str]:
    """A REGISTER_BROKER's filter server list; :class:`PartRefused` past
    :data:`~remoting.body_limits.FILTER_SERVERS_MAX`, before an address is converted."""
    if len(values) > body_limits.FILTER_SERVERS_MAX:
        raise PartRefused(
            f"a filter server list of {len(values)} addresses, more than "
            f"{body_limits.FILTER_SERVERS_MAX}"
        )
    return _str_list(values, "filter server")


def _filter_servers(raw: bytes) -> list[str]:
    # Upstream logs and ignores a filter-server list it cannot parse; one past a limit is
    # refused all the same.
    try:
        value = body_limits.read_json(raw, body_limits.REGISTER_FILTER_SERVERS)
        if isinstance(value, list):
            return _filter_server_list(value)
    except BodyRefused:
        raise
    except BodyDecodeError:
        return []
    return []


def _check_blocks(data: bytes, blocks: int) -> None:
    blocks_max = len(data) + REGISTER_BODY_BLOCKS_FREE
    if blocks > blocks_max:
        raise RegisterBodyRefused(
            f"compressed register body of {len(data)} bytes refused: {blocks} topics and "
            f"static-topic mappings, more than one per byte and {REGISTER_BODY_BLOCKS_FREE} "
            f"({blocks_max}); brokers need 2 bytes or more a topic"
        )


def _decode_compressed(data: bytes, version: int) -> RegisterBrokerBody:
    try:
        with (
            refusing(REGISTER_BROKER_COMPRESSED, len(data)),
            fastjson.lenient_reads_at_most(REGISTER_BODY_LENIENT_PARTS_MAX),
        ):
            return _decode_payload(data, version)
    except fastjson.LenientReadsSpent:
        raise RegisterBodyRefused(
            f"compressed register body of {len(data)} bytes refused: more than "
            f"{REGISTER_BODY_LENIENT_PARTS_MAX} parts that are not standard JSON (static-topic "
            "mappings, or attributes no broker writes)"
        ) from None


def _decode_payload(data: bytes, version: int) -> RegisterBrokerBody:
    """The parts of an inflated body, each checked against its limit before it is read
    (:class:`PartRefused`, which the caller names the body in)."""
    reader = _PayloadReader(data)
    version_limits = body_limits.REGISTER_DATA_VERSION
    data_version = _data_version_from(
        _load_object(
            reader.block("DataVersion", version_limits.body_bytes_max),
            "DataVersion",
            version_limits,
        )
    )
    table: dict[str, TopicConfig] = {}
    topics = reader.count("topic count")
    _check_blocks(data, topics)
    seen: AttributesSeen = {}
    for _ in range(topics):
        raw = reader.block("topic config", TOPIC_TEXT_BYTES_MAX)
        config = topic_config_text(raw.decode("utf-8", "replace"), seen)
        assert config.topic_name is not None
        table[config.topic_name] = config
    filter_servers = _filter_servers(
        reader.block("filter server list", REGISTER_BODY_JSON_BLOCK_BYTES_MAX)
    )
    infos: dict[str, TopicQueueMappingInfo] = {}
    if version >= MQVersion.V5_0_0:
        mappings = reader.count("mapping count")
        _check_blocks(data, topics + mappings)
        for _ in range(mappings):
            info = _mapping_info_from(
                _load_object(
                    reader.block("static-topic mapping", MAPPING_BLOCK_BYTES_MAX),
                    "TopicQueueMappingInfo",
                    body_limits.REGISTER_MAPPING_INFO,
                )
            )
            if info.topic is None:
                raise BodyDecodeError("TopicQueueMappingInfo without topic")
            infos[info.topic] = info
    reader.finish()
    wrapper = TopicConfigSerializeWrapper(
        data_version=data_version,
        topic_config_table=table,
        topic_queue_mapping_info_map=infos,
    )
    return RegisterBrokerBody(topic_config_wrapper=wrapper, filter_server_list=filter_servers)


def decode_register_broker_body(
    data: bytes, *, compressed: bool, version: int
) -> RegisterBrokerBody:
    """``RegisterBrokerBody.decode(data, compressed, version)`` for request versions >= 37.

    The compressed form carries no ``mappingDataVersion``, so it decodes as ``None``.
    A body no broker writes is refused before it is decoded (:class:`RegisterBodyRefused`:
    :func:`check_json_body`; a compressed one past :func:`inflated_bytes_max`, or with
    more topics and mappings than :data:`REGISTER_BODY_BLOCKS_FREE` says, or more parts
    that are not standard JSON than :data:`REGISTER_BODY_LENIENT_PARTS_MAX`, or a part
    past its own limit), and so is one whose topics or static-topic mappings pass theirs
    (:mod:`remoting.body_limits`: attributes, queues).
    """
    if compressed:
        return _decode_compressed(bytes(data), version)
    obj = _read_json_body(data, "RegisterBrokerBody")
    wrapper = obj.get("topicConfigSerializeWrapper")
    with refusing(REGISTER_BROKER, len(data)):
        return RegisterBrokerBody(
            topic_config_wrapper=TopicConfigSerializeWrapper()
            if wrapper is None
            else _wrapper_from(_as_object(wrapper, "topicConfigSerializeWrapper")),
            filter_server_list=_filter_server_list(_list(obj, "filterServerList")),
        )


def _read_json_body(data: bytes | bytearray, what: str) -> dict[str, object]:
    """A JSON body read within :data:`remoting.body_limits.REGISTER_BROKER`: checked by
    :func:`check_json_body`, then decoded."""
    data = bytes(data)
    check_json_body(data)
    return _as_object(body_limits.read_checked(data, REGISTER_BROKER), what)


def decode_register_broker_request_body(
    data: bytes | None, *, compressed: bool, version: int
) -> RegisterBrokerBody:
    """The whole REGISTER_BROKER body rule of ``DefaultRequestProcessor.registerBroker``.

    No body: an empty table with DataVersion(0, 0, 0). Request version below 37
    (V3_0_11): a bare TopicConfigSerializeWrapper, so a RegisterBrokerBody sent by a
    versionless client registers no topics, as upstream. Otherwise the RegisterBrokerBody.
    """
    if not data:
        return RegisterBrokerBody()
    if version < MQVersion.V3_0_11:
        obj = _read_json_body(data, "TopicConfigSerializeWrapper")
        with refusing(REGISTER_BROKER, len(data)):
            return RegisterBrokerBody(topic_config_wrapper=_wrapper_from(obj))
    return decode_register_broker_body(data, compressed=compressed, version=version)


REQUEST_DIGEST_BYTES = 16


@dataclass(frozen=True, slots=True)
class BodyDigest:
    """What :func:`topics_digest` reads from a REGISTER_BROKER body without decoding it."""

    topics: bytes
    """Digest of the body besides its DataVersion object (topic table, queue mappings,
    filter servers), with the object's offset."""
    data_version: DataVersion
    data_version_json: bytes
    """The DataVersion object exactly as sent."""


def registration_digest(request: RemotingCommand, body_digest: BodyDigest | None = None) -> bytes:
    """A digest of what a REGISTER_BROKER request says: its version, header fields and
    body. A broker sends the same request to every NameServer, so every copy has the same
    digest (the opaque, which differs, is left out); any other difference changes it.

    With the request's ``body_digest`` the body is named by it (its topics digest and
    DataVersion object, which together fix every byte) instead of being hashed again."""
    digest = hashlib.blake2b(digest_size=REQUEST_DIGEST_BYTES)
    digest.update(request.version.to_bytes(4, "big", signed=True))
    # Every part length-prefixed, so no two different requests give the same bytes.
    for name, value in sorted((request.ext_fields or {}).items()):
        for text in (name, value):
            raw = text.encode("utf-8", "surrogatepass")
            digest.update(len(raw).to_bytes(4, "big"))
            digest.update(raw)
    if body_digest is not None:
        digest.update(b"T" + body_digest.topics)
        digest.update(len(body_digest.data_version_json).to_bytes(4, "big"))
        digest.update(body_digest.data_version_json)
        return digest.digest()
    body = request.body or b""
    digest.update(b"B" + len(body).to_bytes(4, "big"))
    digest.update(body)
    return digest.digest()


# The wrapper's first key in every RegisterBrokerBody a broker writes (fastjson sorts
# keys: "dataVersion" < "topicConfigTable"). Its value is a flat object of integers.
_WRAPPER_DATA_VERSION = b'"topicConfigSerializeWrapper":{"dataVersion":{'


def topics_digest(request: RemotingCommand) -> BodyDigest | None:
    """What a REGISTER_BROKER body says *besides* its DataVersion (the topic table,
    queue mappings and filter servers) as a digest, and that DataVersion, read without
    decoding the body; None when the body is not the plain JSON layout this recognises
    (compressed, pre-V3_0_11, or the DataVersion not where brokers put it).

    A broker bumps its DataVersion whenever anything of its topic config changes, and
    also when nothing a NameServer stores did (a restart, a config reload): raft mode
    uses this to replicate such a registration without the topic table it already
    holds (``RegisterBroker.topics_elided``). The DataVersion object is cut out only
    when the marker occurs exactly once (a quote inside a JSON string is escaped, so
    it cannot fake the marker) and the object is flat integers; the cut's offset is
    part of the digest, so two bodies with the same digest differ at most inside that
    object. The caller checks the DataVersion against a full decode before it trusts
    a digest for the first time."""
    body = request.body
    if not body or request.version < MQVersion.V3_0_11:
        return None
    if header_bool(request, "compressed"):
        return None
    body = bytes(body)
    marker = body.find(_WRAPPER_DATA_VERSION)
    if marker < 0 or body.find(_WRAPPER_DATA_VERSION, marker + 1) >= 0:
        return None  # absent, or more than once
    start = marker + len(_WRAPPER_DATA_VERSION) - 1
    end = body.find(b"}", start)
    if end < 0 or end - start > 200:
        return None
    version_json = body[start : end + 1]
    try:
        obj = body_limits.read_json(version_json, body_limits.DATA_VERSION)
    except BodyDecodeError:
        return None
    if not isinstance(obj, dict) or not obj.keys() <= {"counter", "stateVersion", "timestamp"}:
        return None
    if not all(type(value) is int for value in obj.values()):
        return None
    digest = hashlib.blake2b(digest_size=REQUEST_DIGEST_BYTES)
    digest.update(request.version.to_bytes(4, "big", signed=True))
    digest.update(start.to_bytes(4, "big"))
    view = memoryview(body)  # slices without copying 15 KB twice
    digest.update(view[:start])
    digest.update(view[end + 1 :])
    return BodyDigest(digest.digest(), _data_version_from(obj), version_json)
