"""The REGISTER_BROKER body: ``RegisterBrokerBody`` as JSON or in its compressed binary form.

A 4.x/5.x broker sends its topic table either as the JSON of
``TopicConfigSerializeWrapper`` plus the filter server list, or, with header
``compressed=true``, as ``RegisterBrokerBody.encode(true)``: a deflated stream of
length-prefixed parts. Decoding is bounded (:data:`REGISTER_BODY_INFLATED_BYTES_MAX`)
because a compressed body is a zip bomb waiting to happen.

REGISTER_BROKER is admitted unsigned from white-listed addresses and its body is decoded
on the event loop, so before a body is decoded a few passes of C string operations
refuse what no broker writes (:func:`check_json_body`; for a compressed body
:func:`inflated_bytes_max`, :data:`REGISTER_BODY_BLOCKS_FREE` and
:data:`REGISTER_BODY_LENIENT_PARTS_MAX`): :class:`RegisterBodyRefused`, a
:class:`BodyDecodeError` whose message names the limit.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from remoting import fastjson
from remoting.bodies import (
    _INT32,
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
    decode_topic_config_serialize_wrapper,
    decode_topic_config_text,
    encode_topic_config_text,
)
from remoting.codes import CURRENT_VERSION, MQVersion, RequestCode
from remoting.command import RemotingCommand
from remoting.errors import BodyDecodeError
from remoting.headers import header_bool, header_int
from remoting.model import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicQueueMappingInfo,
)

RAFT_FAILOVER_FIELD = "enableRaftFailover"
"""REGISTER_BROKER header field of a broker whose master the NameServer elects."""
SPLIT_PART_FIELD = "splitRegistrationPart"
"""REGISTER_BROKER header field: which part of a split table this is, from 0."""
SPLIT_PARTS_FIELD = "splitRegistrationParts"
"""REGISTER_BROKER header field: how many parts the split table has."""

# A compressed REGISTER_BROKER body may not inflate beyond this (zip-bomb guard).
REGISTER_BODY_INFLATED_BYTES_MAX = 64 * 1024 * 1024

# ------------------------------------------------------------ what a body may hold
#
# What a body costs to decode grows with the values it makes, not with its bytes: each
# value costs a few hundred nanoseconds, each topic or static-topic entry a few
# microseconds, whatever their length. Real bodies are sparse (a topic is ~170 bytes of
# JSON with ~19 separators and 2 objects); the costly hostile ones are dense (millions of
# one-byte values, or of tiny topic entries). Each limit below is set from the densest
# bodies brokers write, with a margin of about two or more, and holds the costliest body
# within all of them to a few times what a real table of its length costs (docs/BENCHMARKS.md,
# "hostile clients and TLS"; tests/remoting/test_register_body_limits.py).

REGISTER_BODY_UNCHECKED_BYTES_MAX = 4096
"""A JSON body this short is decoded whatever it holds (a millisecond at most)."""
REGISTER_BODY_BYTES_PER_SEPARATOR_MIN = 3
"""At most one of ``{ [ , :`` outside strings per this many bytes. Real bodies have 7.7
to 9.6 bytes per separator (one-character topic names to long ones), 6.2 with 5.x static
topics of 64 queues."""
REGISTER_BODY_BYTES_PER_OPENER_MIN = 32
"""At most one ``{`` or ``[`` outside strings per this many bytes: each topic or
static-topic entry is an object, and converting one costs microseconds. Real bodies have
69 bytes or more per object or array (one-character topic names), 84 with ordinary names."""
REGISTER_BODY_DIGITS_MAX = 32
"""Longest run of digits outside strings: a body's numbers are Java ints and longs (at
most 19 digits), and converting one costs the square of its length."""
REGISTER_BODY_DEPTH_MAX = 16
"""Deepest nesting of objects and arrays; the deepest real body nests 7 (a 5.x static
topic's hosted queue item)."""
REGISTER_BODY_INFLATION_MAX = 128
"""A compressed body inflates to at most this many times its length: real tables inflate
10 to 52 times (69 with 5.x static topics of 64 queues), a zip bomb up to 1,000 times.
A payload costs about what a real payload of its length costs to decode, so this holds a
compressed body to a few times what a real compressed body of its length costs."""
REGISTER_BODY_INFLATED_FREE_BYTES = 64 * 1024
"""Any compressed body may inflate this far (about 1,800 topics, a few milliseconds)."""
REGISTER_BODY_JSON_BLOCK_BYTES_MAX = 64 * 1024
"""Longest DataVersion or filter server list in a compressed body (brokers write a few
dozen bytes); a longer one would cost up to :data:`REGISTER_BODY_INFLATION_MAX` times
what its compressed bytes cost in a JSON body."""
REGISTER_BODY_LENIENT_PARTS_MAX = 16_384
"""Parts of a compressed body that are not standard JSON: a 5.x static topic's mapping
(its int keys are unquoted), never a topic's attributes. Each costs some microseconds
more, whatever its length; a broker with this many static topics is unheard of."""
REGISTER_BODY_BLOCKS_FREE = 1024
"""A compressed body holds at most one topic or static-topic mapping per byte of its own,
plus this many: each costs microseconds to decode, whatever its length, and real tables
take 2.2 compressed bytes or more a topic (5.8 a static topic with its mapping)."""


class RegisterBodyRefused(BodyDecodeError):
    """A REGISTER_BROKER body refused before it is decoded, for passing a limit no
    broker's body reaches; the message names the limit."""


_DIGITS = b"0123456789"
# Kept by one translate: brackets, commas, colons and digits (each digit as "0").
_DIGITS_AS_ZEROS = bytes.maketrans(_DIGITS, b"0" * len(_DIGITS))
_NOT_MARKS = bytes(range(256)).translate(None, b"[]{},:" + _DIGITS)
# Opening brackets as "(", closing ones as ")": pairs of either kind peel the same.
_BRACKETS_AS_PARENS = bytes.maketrans(b"[{]}", b"(())")
_TOO_MANY_DIGITS = b"0" * (REGISTER_BODY_DIGITS_MAX + 1)
# Every digit as "0", every other byte as " ": the runs of digits exactly as they are.
_DIGITS_AS_ZEROS_ONLY = bytes(48 if byte in _DIGITS else 32 for byte in range(256))


def _refuse(data: bytes | bytearray, problem: str) -> RegisterBodyRefused:
    return RegisterBodyRefused(f"REGISTER_BROKER body of {len(data)} bytes refused: {problem}")


def _nests_deeper(brackets: bytes, depth_max: int) -> bool:
    """Whether ``brackets`` (only ``(`` and ``)``) nest deeper than ``depth_max`` or do
    not pair. Each pass drops the innermost pairs, which lowers the deepest nesting by
    one, so paired brackets are gone after ``depth_max`` passes: at most that many C
    replaces over the brackets alone."""
    for _ in range(depth_max):
        if not brackets:
            return False
        peeled = brackets.replace(b"()", b"")
        if len(peeled) == len(brackets):
            return True  # nothing pairs
        brackets = peeled
    return bool(brackets)


def _json_problem(text: bytes, size: int) -> str | None:
    """What in ``text`` (a body of ``size`` bytes, or that body without its strings)
    passes a limit, or None. One pass over ``text`` keeps its marks (brackets, commas,
    colons, digits); the rest looks at those alone, a fifth of a real body. Digits that
    only letters or quotes part run together there (``a1b2``): that can only make a run
    look longer, never shorter, and the strings are taken out before a body is refused."""
    marks = text.translate(_DIGITS_AS_ZEROS, _NOT_MARKS)
    structure = marks.translate(None, b"0")
    brackets = structure.translate(_BRACKETS_AS_PARENS, b",:")
    openers = brackets.count(b"(")
    separators = len(structure) - (len(brackets) - openers)
    separators_max = size // REGISTER_BODY_BYTES_PER_SEPARATOR_MIN
    if separators > separators_max:
        return (
            f"{separators} of {{ [ , : outside strings, more than one per "
            f"{REGISTER_BODY_BYTES_PER_SEPARATOR_MIN} bytes ({separators_max}); "
            "brokers write one per 6 bytes or more"
        )
    openers_max = size // REGISTER_BODY_BYTES_PER_OPENER_MIN
    if openers > openers_max:
        return (
            f"{openers} objects and arrays, more than one per "
            f"{REGISTER_BODY_BYTES_PER_OPENER_MIN} bytes ({openers_max}); "
            "brokers write one per 69 bytes or more"
        )
    if _TOO_MANY_DIGITS in marks and _TOO_MANY_DIGITS in text.translate(_DIGITS_AS_ZEROS_ONLY):
        return f"a number of more than {REGISTER_BODY_DIGITS_MAX} digits (a long has 19)"
    if _nests_deeper(brackets, REGISTER_BODY_DEPTH_MAX):
        return (
            f"objects and arrays nested deeper than {REGISTER_BODY_DEPTH_MAX}, or brackets "
            "that do not pair (brokers nest 7 at most)"
        )
    return None


def check_json_body(data: bytes | bytearray) -> None:
    """Refuse (:class:`RegisterBodyRefused`) a JSON REGISTER_BROKER body no broker writes:
    single-quoted strings; more separators, or more objects and arrays, than its length
    allows (:data:`REGISTER_BODY_BYTES_PER_SEPARATOR_MIN`,
    :data:`REGISTER_BODY_BYTES_PER_OPENER_MIN`); a number of more than
    :data:`REGISTER_BODY_DIGITS_MAX` digits; nesting deeper than
    :data:`REGISTER_BODY_DEPTH_MAX`. Bodies of at most
    :data:`REGISTER_BODY_UNCHECKED_BYTES_MAX` bytes pass.

    Linear, in a few C passes over the body (under a nanosecond a byte, a few percent of
    decoding a real table). Everything is counted over the whole body first; only when
    something is over its limit are the strings taken out (three more passes) and it is
    counted again, so a topic name of digits or commas is not held against its body."""
    size = len(data)
    if size <= REGISTER_BODY_UNCHECKED_BYTES_MAX:
        return
    data = bytes(data)
    text, without_strings = data, False
    if b"'" in data:
        # fastjson reads single-quoted strings, but no broker writes them, and a body that
        # puts quotes of one kind in strings of the other costs a Python step per quote.
        # Without them, the text outside double-quoted strings is what the decoder sees.
        text, without_strings = fastjson.outside_strings(data), True
        if b"'" in text:
            raise _refuse(data, "single-quoted strings (no broker writes them)")
    problem = _json_problem(text, size)
    if problem is not None and not without_strings:
        problem = _json_problem(fastjson.outside_strings(data), size)
    if problem is not None:
        raise _refuse(data, problem)


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


class _PayloadReader:
    """Reads the length-prefixed blocks of an inflated register body."""

    def __init__(self, payload: bytes) -> None:
        self._payload = payload
        self._position = 0

    def count(self, what: str) -> int:
        if self._position + _INT32.size > len(self._payload):
            raise BodyDecodeError(f"compressed register body ends before {what}")
        (value,) = _INT32.unpack_from(self._payload, self._position)
        self._position += _INT32.size
        if value < 0:
            raise BodyDecodeError(f"negative {what} {value} in compressed register body")
        return int(value)

    def block(self, what: str) -> bytes:
        size = self.count(f"{what} length")
        end = self._position + size
        if end > len(self._payload):
            raise BodyDecodeError(f"compressed register body ends inside {what}")
        raw = self._payload[self._position : end]
        self._position = end
        return raw


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


def _inflate(data: bytes) -> bytes:
    limit = inflated_bytes_max(len(data))
    inflater = zlib.decompressobj()
    try:
        payload = inflater.decompress(data, limit + 1)
    except zlib.error as exc:
        raise BodyDecodeError(f"compressed register body is not zlib: {exc}") from exc
    if len(payload) > limit:
        why = (
            ""
            if limit == REGISTER_BODY_INFLATED_BYTES_MAX
            else f" ({REGISTER_BODY_INFLATION_MAX} times its length; broker tables inflate "
            "10 to 70 times)"
        )
        raise RegisterBodyRefused(
            f"compressed register body of {len(data)} bytes inflates beyond the limit of "
            f"{limit} bytes{why}"
        )
    return payload


def _filter_servers(raw: bytes) -> list[str]:
    # Upstream logs and ignores a filter-server list it cannot parse.
    try:
        value = fastjson.loads(raw)
        if isinstance(value, list):
            return _str_list(value, "filter server")
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


def _json_block(data: bytes, reader: _PayloadReader, what: str) -> bytes:
    raw = reader.block(what)
    if len(raw) > REGISTER_BODY_JSON_BLOCK_BYTES_MAX:
        raise RegisterBodyRefused(
            f"compressed register body of {len(data)} bytes refused: a {what} of "
            f"{len(raw)} bytes, more than {REGISTER_BODY_JSON_BLOCK_BYTES_MAX}"
        )
    return raw


def _decode_compressed(data: bytes, version: int) -> RegisterBrokerBody:
    try:
        with fastjson.lenient_reads_at_most(REGISTER_BODY_LENIENT_PARTS_MAX):
            return _decode_payload(data, version)
    except fastjson.LenientReadsSpent:
        raise RegisterBodyRefused(
            f"compressed register body of {len(data)} bytes refused: more than "
            f"{REGISTER_BODY_LENIENT_PARTS_MAX} parts that are not standard JSON (static-topic "
            "mappings, or attributes no broker writes)"
        ) from None


def _decode_payload(data: bytes, version: int) -> RegisterBrokerBody:
    reader = _PayloadReader(_inflate(data))
    data_version = _data_version_from(
        _load_object(_json_block(data, reader, "DataVersion"), "DataVersion")
    )
    table: dict[str, TopicConfig] = {}
    topics = reader.count("topic count")
    _check_blocks(data, topics)
    for _ in range(topics):
        raw = reader.block("topic config")
        config = decode_topic_config_text(raw.decode("utf-8", "replace"))
        assert config.topic_name is not None
        table[config.topic_name] = config
    filter_servers = _filter_servers(_json_block(data, reader, "filter server list"))
    infos: dict[str, TopicQueueMappingInfo] = {}
    if version >= MQVersion.V5_0_0:
        mappings = reader.count("mapping count")
        _check_blocks(data, topics + mappings)
        for _ in range(mappings):
            info = _mapping_info_from(
                _load_object(reader.block("mapping info"), "TopicQueueMappingInfo")
            )
            if info.topic is None:
                raise BodyDecodeError("TopicQueueMappingInfo without topic")
            infos[info.topic] = info
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
    that are not standard JSON than :data:`REGISTER_BODY_LENIENT_PARTS_MAX`).
    """
    if compressed:
        return _decode_compressed(bytes(data), version)
    check_json_body(data)
    obj = _load_object(data, "RegisterBrokerBody")
    wrapper = obj.get("topicConfigSerializeWrapper")
    return RegisterBrokerBody(
        topic_config_wrapper=TopicConfigSerializeWrapper()
        if wrapper is None
        else _wrapper_from(_as_object(wrapper, "topicConfigSerializeWrapper")),
        filter_server_list=_str_list(_list(obj, "filterServerList"), "filter server"),
    )


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
        check_json_body(data)
        return RegisterBrokerBody(topic_config_wrapper=decode_topic_config_serialize_wrapper(data))
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
        obj = fastjson.loads(version_json)
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
