"""What a body of each kind may hold, and the one bounded decoder every body goes through.

Bodies arrive after the ACL admitted their request, but some requests are admitted from
anyone or unsigned: REGISTER_BROKER and QUERY_DATA_VERSION from white-listed addresses
on a NameServer, HEART_BEAT and LOCK_BATCH_MQ / UNLOCK_BATCH_MQ from any client on a
broker. Each is decoded on the event loop, so every body kind has a budget here
(:class:`BodyLimits`): the whole body's bytes, the longest string, how much of
fastjson's lenient dialect may be read, nesting and digits, and for the larger kinds the
density of separators and objects. The parts a body is made of have limits of their own
beside (a topic's name and attributes, a static topic's queue mapping, a heartbeat's
groups and subscriptions, a lock body's queues), checked where the part is converted.

Every number is set from what real brokers and clients send, with a margin of about
two; its docstring says where it comes from. A body past one is refused with a
:class:`~remoting.errors.BodyRefused` (REGISTER_BROKER's with
:class:`~remoting.errors.RegisterBodyRefused`) whose message names the kind, the body's
length and the limit, and nothing of it is decoded further. Within them, the costliest
body costs a small constant a byte (``bench/body_decode.py``; docs/SECURITY.md, "Hostile
clients"; docs/BENCHMARKS.md, "one hostile body of every kind").

:func:`read_json` is the decoder: :func:`check_json` (a few passes of C string
operations over the body) and then :func:`remoting.fastjson.loads`. Answers a client
reads from a server it chose (:data:`ANSWER`) go through it too, with only the frame's
length as their bound.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field

from remoting import fastjson
from remoting.errors import BodyRefused, RegisterBodyRefused
from remoting.frame import FRAME_BYTES_MAX

_KIB = 1024
_MIB = 1024 * _KIB

# ------------------------------------------------------------ the parts of bodies

NAME_CHARS_MAX = 255
"""Longest cluster name, broker name or address the node accepts and stores."""
TOPIC_NAME_CHARS_MAX = 1024
"""Longest topic name in a REGISTER_BROKER body (and the longest string of its JSON). A
topic name is at most 127 characters (``TopicValidator.TOPIC_MAX_LENGTH``), a group 255
(``Validators.CHARACTER_MAX_LENGTH``), and the longest names a broker holds are built
from both: a 5.x POP retry topic, ``%RETRY%`` + group + ``_`` + topic
(``KeyBuilder.buildPopRetryTopicV1``), is 390 characters, about 520 when a namespace
prefixes the group and the topic. Twice that, rounded up."""
TOPIC_ATTRIBUTES_MAX = 8
"""Most attributes of one topic. A 5.x broker keeps only the attributes it knows
(``TopicAttributes.ALL``: ``queue.type``, ``cleanup.policy``, ``message.type``,
``reserve.time``), four at most."""
TOPIC_ATTRIBUTES_CHARS_MAX = 256
"""Longest attribute text of one topic in a compressed REGISTER_BROKER body
(``TopicConfig.encode``). All four 5.x attributes at their longest values take 125
characters as JSON (``{"+cleanup.policy":"COMPACTION",...,"+reserve.time":"9223372036854775807"}``).
In a JSON body each key and value is a string of the body, no longer than its kind's
strings."""
MAPPING_QUEUES_MAX = 2048
"""Most entries of one static topic's ``currIdMap`` (a 5.x TopicQueueMappingInfo): one
per queue of the topic this broker hosts. The static-topic tools spread a topic's
queues over its brokers; 1,024 queues on one broker is already far past what a
deployment runs (``defaultTopicQueueNums`` is 8). Converting one costs 2 ms."""
MAPPING_BLOCK_BYTES_MAX = 32 * _KIB
"""Longest TopicQueueMappingInfo in a compressed REGISTER_BROKER body: one of 1,024
queues is 8 KiB (its currIdMap ``{0:0,1:1,...}``, then the broker and topic names), one
of :data:`MAPPING_QUEUES_MAX` with the longest names about 20 KiB. Read with
fastjson's leniency for its unquoted int keys, one costs about 3 ms at this length."""
TOPIC_TEXT_BYTES_MAX = 4 * TOPIC_NAME_CHARS_MAX + TOPIC_ATTRIBUTES_CHARS_MAX + 64
"""Longest topic text in a compressed REGISTER_BROKER body (``TopicConfig.encode``:
name, three ints, filter type, attributes): the longest name in UTF-8, the longest
attributes, and 64 bytes for the rest. Checked before the text is decoded, so one
topic cannot cost more than a few microseconds (a 60 MB one used to cost 11 s)."""

FILTER_SERVERS_MAX = 256
"""Most addresses in a REGISTER_BROKER's filter server list (either form). A 4.x broker
started ``filterServerNums`` filter servers beside itself (default 0; each one a JVM, so
a few at most); 5.x brokers send an empty list. Each address is converted in Python, 50
µs for all of these; without the limit a 16 MiB body of one list cost 1.6 s."""

HEART_BEAT_GROUPS_MAX = 1024
"""Most consumer groups (and, apart, most producer groups) in one HEART_BEAT: a client
instance (``MQClientInstance``) sends every group it plays in; one of a few hundred
consumers in one process is a large application. Each new group costs the broker a
subscription config and a retry topic (``ensure_consumer_group``)."""
HEART_BEAT_SUBSCRIPTIONS_MAX = 4096
"""Most subscriptions in one HEART_BEAT, over all its consumer groups: each group
subscribes to its topics and to its retry topic, so 500 groups of two topics send
1,500 to 2,000."""
LOCK_QUEUES_MAX = 16_384
"""Most message queues in one LOCK_BATCH_MQ or UNLOCK_BATCH_MQ body: a client locks
every queue it was given on one broker in one request (``RebalanceImpl.lockAll``);
a group of 512 topics of 16 queues on one broker sends 8,192."""

# ----------------------------------------------- REGISTER_BROKER's compressed form
#
# Numbers of the compressed REGISTER_BROKER body (``remoting.register_body`` names them
# again as module constants of its own, which is what its decoder reads).

REGISTER_BODY_INFLATED_BYTES_MAX = 64 * _MIB
"""A compressed REGISTER_BROKER body may not inflate beyond this (zip-bomb guard)."""
REGISTER_BODY_INFLATION_MAX = 128
"""A compressed body inflates to at most this many times its length: real tables inflate
10 to 52 times (69 with 5.x static topics of 64 queues), a zip bomb up to 1,000 times.
A payload costs about what a real payload of its length costs to decode, so this holds a
compressed body to a few times what a real compressed body of its length costs."""
REGISTER_BODY_INFLATED_FREE_BYTES = 64 * _KIB
"""Any compressed body may inflate this far (about 1,800 topics, a few milliseconds)."""
REGISTER_BODY_JSON_BLOCK_BYTES_MAX = 64 * _KIB
"""Longest filter server list in a compressed body (brokers write a few dozen bytes); a
longer one would cost up to :data:`REGISTER_BODY_INFLATION_MAX` times what its
compressed bytes cost in a JSON body. (Its DataVersion is a :data:`DATA_VERSION` body.)"""
REGISTER_BODY_LENIENT_PARTS_MAX = 16_384
"""Parts of a compressed body that are not standard JSON: a 5.x static topic's mapping
(its int keys are unquoted), never a topic's attributes. Each costs some microseconds
more, whatever its length; a broker with this many static topics is unheard of."""
REGISTER_BODY_BLOCKS_FREE = 1024
"""A compressed body holds at most one topic or static-topic mapping per byte of its own,
plus this many: each costs microseconds to decode, whatever its length, and real tables
take 2.2 compressed bytes or more a topic (5.8 a static topic with its mapping)."""

# ------------------------------------------------------------ the budget of a kind

UNCHECKED_BYTES_MAX = 4 * _KIB
"""A body this short is not counted for density, digits and nesting: whatever it holds,
decoding it costs a millisecond at most."""
ANSWER_DEPTH_MAX = 64
"""Deepest nesting of an answer a client reads; upstream's answers nest 8 at most (a
static topic's hosted queue items in a topic config wrapper)."""
INT_DIGITS_MAX = 32
"""Longest run of digits outside strings: numbers on the wire are Java ints and longs
(at most 19 digits), and converting one costs the square of its length."""


@dataclass(frozen=True, slots=True)
class Written:
    """What real writers of a body kind write, for the refusals' messages."""

    writer: str
    """Who writes the kind: "broker", "client", "server"."""
    bytes_per_separator: int = 0
    """The fewest bytes a real body has per ``{ [ , :`` outside strings (0: not said)."""
    bytes_per_opener: int = 0
    """The fewest bytes a real body has per object or array (0: not said)."""
    depth: int = 0
    """The deepest a real body nests (0: not said)."""
    longest_string: str = ""
    """What the longest string of a real body is."""


@dataclass(frozen=True, slots=True)
class BodyLimits:
    """The budget of one body kind, checked by :func:`check_json` before a value is made."""

    what: str
    """The kind as refusals name it: ``DataVersion body``, ``HEART_BEAT body``."""
    body_bytes_max: int
    """Longest body."""
    string_bytes_max: int
    """Longest double-quoted string, its text between the quotes as written (escapes
    included: a string is never longer than this in characters either)."""
    single_quotes_bytes_max: int
    """Longest body that may hold single-quoted strings (fastjson reads them; no Java
    writer writes them, and a text mixing both kinds of quotes costs fastjson a Python
    step per quote). Never more than :attr:`string_bytes_max`, so that a single-quoted
    string is no longer than a double-quoted one may be."""
    lenient_bytes_max: int
    """Longest body read with any of fastjson's leniencies (unquoted keys: a 5.x body of
    static topics has int keys; leading zeros; its extra escapes)."""
    depth_max: int
    """Deepest nesting of objects and arrays (in bodies over :data:`UNCHECKED_BYTES_MAX`)."""
    int_digits_max: int = INT_DIGITS_MAX
    """Longest run of digits outside strings (in bodies over :data:`UNCHECKED_BYTES_MAX`)."""
    bytes_per_separator_min: int = 1
    """At most one ``{ [ , :`` outside strings per this many bytes: the decoder makes a
    value or key per separator (1: any JSON)."""
    bytes_per_opener_min: int = 1
    """At most one ``{`` or ``[`` outside strings per this many bytes: each object of a
    body is converted in Python, microseconds however short it is (1: any JSON)."""
    unchecked_bytes_max: int = UNCHECKED_BYTES_MAX
    """Bodies this short skip the counts of density, digits and nesting."""
    written: Written = Written("writer")
    """What real writers write, for the messages."""
    refusal: type[BodyRefused] = BodyRefused
    """The exception a refusal raises."""
    quick_bytes_max: int = field(init=False, default=0)
    """Bodies this short pass every check of :func:`check_json` (no single quotes aside)."""
    read_limits: fastjson.ReadLimits = field(init=False, default=fastjson.ReadLimits(0, 0, 0))
    """What :func:`remoting.fastjson.loads` checks of a body of this kind by itself."""
    checked_read_limits: fastjson.ReadLimits = field(
        init=False, default=fastjson.ReadLimits(0, 0, 0)
    )
    """The same for a body :func:`check_json` counted in full (its nesting known)."""

    def __post_init__(self) -> None:
        if not 0 <= self.single_quotes_bytes_max <= self.string_bytes_max:
            raise ValueError(f"{self.what}: single quotes allowed past the longest string")
        quick = min(self.body_bytes_max, self.string_bytes_max + 2, self.unchecked_bytes_max)
        object.__setattr__(self, "quick_bytes_max", quick)
        # Separators and digits are counted by check_json (in C, over the whole body);
        # fastjson's own count would repeat the work, its int hook call Python per integer.
        read = fastjson.ReadLimits(None, None, self.lenient_bytes_max)
        object.__setattr__(self, "read_limits", read)
        checked = self.depth_max <= fastjson.NESTING_DEPTH_MAX
        read = fastjson.ReadLimits(None, None, self.lenient_bytes_max, nesting_checked=checked)
        object.__setattr__(self, "checked_read_limits", read)

    def refused(self, body_bytes: int, problem: str) -> BodyRefused:
        """The refusal of a body of ``body_bytes`` for ``problem`` (what passed which limit)."""
        return self.refusal(f"{self.what} of {body_bytes} bytes refused: {problem}")


def kind(base: BodyLimits, what: str, **changes: object) -> BodyLimits:
    """``base`` under another name, with ``changes``."""
    return dataclasses.replace(base, what=what, **changes)  # type: ignore[arg-type]


_BROKER = Written("broker")
_CLIENT = Written("client")

REGISTER_BROKER = BodyLimits(
    what="REGISTER_BROKER body",
    body_bytes_max=FRAME_BYTES_MAX,
    string_bytes_max=TOPIC_NAME_CHARS_MAX,
    single_quotes_bytes_max=TOPIC_NAME_CHARS_MAX,
    lenient_bytes_max=FRAME_BYTES_MAX,
    depth_max=16,
    bytes_per_separator_min=3,
    bytes_per_opener_min=32,
    written=Written("broker", 6, 69, 7, "a topic name"),
    refusal=RegisterBodyRefused,
)
"""A JSON REGISTER_BROKER body (RegisterBrokerBody, or the bare wrapper of a request
version before V3_0_11), as long as a frame allows: a broker of 50,000 topics sends 8 MB.
Real bodies have 7.7 to 9.6 bytes per separator (one-character topic names to long ones),
6.2 with 5.x static topics of 64 queues; 69 bytes or more per object or array (84 with
ordinary names); numbers of at most 19 digits; nesting of 7 at most (a 5.x static
topic's hosted queue item). Their leniency is unquoted int keys (a static topic's
currIdMap), at any length; no broker writes single quotes."""

DATA_VERSION = BodyLimits(
    what="DataVersion body",
    body_bytes_max=256,
    string_bytes_max=256,
    single_quotes_bytes_max=256,
    lenient_bytes_max=256,
    depth_max=4,
    written=Written("broker", depth=1),
)
"""QUERY_DATA_VERSION's body, the NameServer's answer to it, and the DataVersion of a
compressed REGISTER_BROKER body: ``{"counter":..,"stateVersion":..,"timestamp":..}``,
100 bytes with three 19-digit longs (brokers send about 60)."""

REGISTER_DATA_VERSION = kind(
    DATA_VERSION, "REGISTER_BROKER DataVersion", refusal=RegisterBodyRefused
)
"""The DataVersion block of a compressed REGISTER_BROKER body."""
REGISTER_FILTER_SERVERS = BodyLimits(
    what="REGISTER_BROKER filter server list",
    body_bytes_max=REGISTER_BODY_JSON_BLOCK_BYTES_MAX,
    string_bytes_max=_KIB,
    single_quotes_bytes_max=_KIB,
    lenient_bytes_max=REGISTER_BODY_JSON_BLOCK_BYTES_MAX,
    depth_max=4,
    written=_BROKER,
    refusal=RegisterBodyRefused,
)
"""The filter server list block of a compressed REGISTER_BROKER body: a JSON list of
``host:port`` addresses (empty since 5.0)."""
TOPIC_ATTRIBUTES = BodyLimits(
    what="REGISTER_BROKER topic attributes",
    body_bytes_max=4 * TOPIC_ATTRIBUTES_CHARS_MAX,
    string_bytes_max=4 * TOPIC_ATTRIBUTES_CHARS_MAX,
    single_quotes_bytes_max=0,
    lenient_bytes_max=4 * TOPIC_ATTRIBUTES_CHARS_MAX,
    depth_max=4,
    written=_BROKER,
    refusal=RegisterBodyRefused,
)
"""One topic's attribute text in a compressed REGISTER_BROKER body, after its length in
characters passed :data:`TOPIC_ATTRIBUTES_CHARS_MAX` (in UTF-8 at most four times that).
Brokers write it as standard JSON (``JSON.toJSONString`` of a string map); fastjson's
other leniencies are read as upstream reads them, counted against
:data:`REGISTER_BODY_LENIENT_PARTS_MAX`, but not single quotes: a body holds up to
16,384 such texts, and one mixing both kinds of quotes costs 30 µs."""
REGISTER_MAPPING_INFO = BodyLimits(
    what="REGISTER_BROKER static-topic mapping",
    body_bytes_max=MAPPING_BLOCK_BYTES_MAX,
    string_bytes_max=TOPIC_NAME_CHARS_MAX,
    single_quotes_bytes_max=0,
    lenient_bytes_max=MAPPING_BLOCK_BYTES_MAX,
    depth_max=4,
    written=Written("broker", depth=2),
    refusal=RegisterBodyRefused,
)
"""One TopicQueueMappingInfo block of a compressed REGISTER_BROKER body: two objects
(its currIdMap inside), int keys unquoted, as dense as ``{0:0,1:1,...}``."""

REGISTER_BROKER_COMPRESSED = kind(REGISTER_BROKER, "compressed register body")
"""A compressed REGISTER_BROKER body, as the refusals of its parts name it. Its own
numbers are the ``REGISTER_BODY_*`` ones above; its parts are read as
:data:`REGISTER_DATA_VERSION`, :data:`TOPIC_TEXT` (with :data:`TOPIC_ATTRIBUTES`),
:data:`REGISTER_FILTER_SERVERS` and :data:`REGISTER_MAPPING_INFO`."""
TOPIC_TEXT = kind(
    TOPIC_ATTRIBUTES,
    "REGISTER_BROKER topic text",
    body_bytes_max=TOPIC_TEXT_BYTES_MAX,
    string_bytes_max=TOPIC_TEXT_BYTES_MAX,
    lenient_bytes_max=TOPIC_TEXT_BYTES_MAX,
)
"""One topic of a compressed REGISTER_BROKER body (``TopicConfig.encode``, text that is
no JSON but for its attributes): :data:`TOPIC_TEXT_BYTES_MAX`, a name of
:data:`TOPIC_NAME_CHARS_MAX` characters and attributes of
:data:`TOPIC_ATTRIBUTES_CHARS_MAX` at most."""

HEART_BEAT = BodyLimits(
    what="HEART_BEAT body",
    body_bytes_max=_MIB,
    string_bytes_max=16 * _KIB,
    single_quotes_bytes_max=4 * _KIB,
    lenient_bytes_max=4 * _KIB,
    depth_max=12,
    bytes_per_separator_min=3,
    bytes_per_opener_min=16,
    written=Written("client", 5, 37, 6, "a subscription expression"),
)
"""A client's HEART_BEAT on a broker (HeartbeatData, from anyone when the broker's ACL
lets reads through). A Java client with 500 consumer groups of two topics each (and
their retry topics) sends 340 KB; :data:`HEART_BEAT_GROUPS_MAX` groups of four
subscriptions fit in this. The longest string is a subscription
expression, tags joined by ``||``: 16 KiB holds 500 tags of 30 characters, twice a
consumer of many tags. Java, C++, Go and Node.js clients write standard JSON, so
fastjson's leniencies are read only in short bodies (a hand-written test). Real bodies
have 5 or more bytes per separator (a subscription of many one-letter tags, each in
``subString``, ``tagsSet`` and ``codeSet``), 37 or more per object or array (a
subscription with empty tag sets), and nest 6 deep (a subscription's ``codeSet``)."""

LOCK_BATCH_MQ = BodyLimits(
    what="LOCK_BATCH_MQ body",
    body_bytes_max=2 * _MIB,
    string_bytes_max=TOPIC_NAME_CHARS_MAX,
    single_quotes_bytes_max=TOPIC_NAME_CHARS_MAX,
    lenient_bytes_max=4 * _KIB,
    depth_max=6,
    bytes_per_separator_min=3,
    bytes_per_opener_min=16,
    written=Written("client", 7, 42, 3, "a topic name"),
)
"""A LockBatchRequestBody or UnlockBatchRequestBody (from anyone when the broker's ACL
lets reads through): the group, the client and a set of MessageQueues. 8,192 queues of
names like ``%RETRY%order-consumer-group-123`` are 660 KB, so :data:`LOCK_QUEUES_MAX`
of them fit. Each queue is an object of 42 bytes or more with 6 separators; the body
nests 3 deep."""

PROPERTIES = BodyLimits(
    what="properties text",
    body_bytes_max=64 * _KIB,
    string_bytes_max=64 * _KIB,
    single_quotes_bytes_max=64 * _KIB,
    lenient_bytes_max=64 * _KIB,
    depth_max=0,
    written=Written("server"),
)
"""Java ``Properties`` text: UPDATE_NAMESRV_CONFIG's body, GET_NAMESRV_CONFIG's answer
(a NameServer's whole config, about 4 KiB) and the config files read with the same code.
The longest upstream writes is a 5.x broker's whole config (BrokerConfig,
MessageStoreConfig and the Netty configs, some 450 keys, about 20 KiB); about three
times that. Only :attr:`BodyLimits.body_bytes_max` applies (it is no JSON), and reading
it costs a Python step per line."""

ANSWER = BodyLimits(
    what="answer",
    body_bytes_max=FRAME_BYTES_MAX,
    string_bytes_max=FRAME_BYTES_MAX,
    single_quotes_bytes_max=4 * _KIB,
    lenient_bytes_max=FRAME_BYTES_MAX,
    depth_max=ANSWER_DEPTH_MAX,
    written=Written("server"),
)
"""An answer a client reads from a server it chose (routes, cluster info, KV tables, a
broker's topics and offsets for its slave): only the frame bounds its length and
strings; digits and nesting are counted, single quotes refused past 4 KiB."""

TOPIC_ROUTE_DATA = kind(ANSWER, "TopicRouteData body")
"""GET_ROUTEINFO_BY_TOPIC's answer, and REGISTER_TOPIC_IN_NAMESRV's body (an admin's)."""
CLUSTER_INFO = kind(ANSWER, "ClusterInfo body")
"""GET_BROKER_CLUSTER_INFO's answer."""
KV_TABLE = kind(ANSWER, "KVTable body")
"""A KVTable: REGISTER_BROKER's answer (the order-topic config), GET_KVLIST_BY_NAMESPACE's."""
TOPIC_LIST = kind(ANSWER, "TopicList body")
"""The topic-list answers."""
KV_CONFIG = kind(ANSWER, "KVConfigSerializeWrapper")
"""The KV config file (``kvConfig.json``), at most the 4 MiB KV quota when it is ours."""
BROKER_MEMBER_GROUP = kind(ANSWER, "GetBrokerMemberGroupResponseBody")
"""GET_BROKER_MEMBER_GROUP's answer."""
TOPIC_CONFIG = kind(ANSWER, "TopicConfig body")
"""One TopicConfig as JSON."""
MAPPING_INFO = kind(ANSWER, "TopicQueueMappingInfo body")
"""One TopicQueueMappingInfo as JSON."""
TOPIC_CONFIG_WRAPPER = kind(ANSWER, "TopicConfigSerializeWrapper body")
"""GET_ALL_TOPIC_CONFIG's answer (a slave syncing from its master, the console)."""
MASTER_METADATA = kind(ANSWER, "master's metadata")
"""The other SlaveSynchronize answers: consumer offsets, delay offsets, subscription
groups (``broker_app.metadata``)."""


class PartRefused(Exception):
    """A part of a body past its limit (a topic's name or attributes, a static topic's
    queue mapping), raised where the part is converted; the body's decode entry turns it
    into the refusal of its kind (:meth:`BodyLimits.refused`). Not a
    :class:`~remoting.errors.BodyDecodeError` on purpose: code that ignores a part it
    cannot read (a topic's attributes, as upstream does) lets it through."""


# -------------------------------------------------------------------- the checks

_DIGITS = b"0123456789"
# Kept by one translate: brackets, commas, colons and digits (each digit as "0").
_DIGITS_AS_ZEROS = bytes.maketrans(_DIGITS, b"0" * len(_DIGITS))
_NOT_MARKS = bytes(range(256)).translate(None, b"[]{},:" + _DIGITS)
# Opening brackets as "(", closing ones as ")": pairs of either kind peel the same.
_BRACKETS_AS_PARENS = bytes.maketrans(b"[{]}", b"(())")
# Every digit as "0", every other byte as " ": the runs of digits exactly as they are.
_DIGITS_AS_ZEROS_ONLY = bytes(48 if byte in _DIGITS else 32 for byte in range(256))
_QUOTE = b'"'


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


def _separators_problem(separators: int, size: int, limits: BodyLimits) -> str | None:
    separators_max = size // limits.bytes_per_separator_min
    if separators <= separators_max:
        return None
    real = limits.written.bytes_per_separator
    return (
        f"{separators} of {{ [ , : outside strings, more than one per "
        f"{limits.bytes_per_separator_min} bytes ({separators_max})"
        + (f"; {limits.written.writer}s write one per {real} bytes or more" if real else "")
    )


def _openers_problem(openers: int, size: int, limits: BodyLimits) -> str | None:
    openers_max = size // limits.bytes_per_opener_min
    if openers <= openers_max:
        return None
    real = limits.written.bytes_per_opener
    return (
        f"{openers} objects and arrays, more than one per "
        f"{limits.bytes_per_opener_min} bytes ({openers_max})"
        + (f"; {limits.written.writer}s write one per {real} bytes or more" if real else "")
    )


def _json_problem(text: bytes, size: int, limits: BodyLimits) -> str | None:
    """What in ``text`` (a body of ``size`` bytes, or that body without its strings)
    passes a density, digits or nesting limit, or None. One pass over ``text`` keeps its
    marks (brackets, commas, colons, digits); the rest looks at those alone, a fifth of
    a real body. Digits that only letters or quotes part run together there (``a1b2``):
    that can only make a run look longer, never shorter, and the strings are taken out
    before a body is refused."""
    marks = text.translate(_DIGITS_AS_ZEROS, _NOT_MARKS)
    structure = marks.translate(None, b"0")
    brackets = structure.translate(_BRACKETS_AS_PARENS, b",:")
    openers = brackets.count(b"(")
    separators = len(structure) - (len(brackets) - openers)
    problem = _separators_problem(separators, size, limits) or _openers_problem(
        openers, size, limits
    )
    if problem is not None:
        return problem
    too_many_digits = b"0" * (limits.int_digits_max + 1)
    if too_many_digits in marks and too_many_digits in text.translate(_DIGITS_AS_ZEROS_ONLY):
        return f"a number of more than {limits.int_digits_max} digits (a long has 19)"
    if _nests_deeper(brackets, limits.depth_max):
        real = limits.written.depth
        return (
            f"objects and arrays nested deeper than {limits.depth_max}, or brackets "
            "that do not pair"
            + (f" ({limits.written.writer}s nest {real} at most)" if real else "")
        )
    return None


def longest_string_over(data: bytes, bytes_max: int) -> int:
    """The length of the first double-quoted string of JSON ``data`` longer than
    ``bytes_max`` bytes (its text between the quotes as written), or 0 when none is.

    Linear, in C passes but for one Python step per ``bytes_max / 2`` bytes: a string
    that long holds an aligned block of that many bytes without a quote, and only such
    blocks are looked at closer (a real body has a quote every few dozen bytes).
    Escaped backslashes and quotes are first made two bytes that are no quote, so that
    every quote left opens or closes a string; single-quoted strings are not seen (a
    kind allows them only in bodies no longer than its longest string)."""
    size = len(data)
    if size <= bytes_max + 2:
        return 0
    text = data
    if b"\\" in text:
        text = text.replace(b"\\\\", b"__").replace(b'\\"', b"__")
    # A run of bytes_max + 1 non-quote bytes holds a whole block of this size.
    block = bytes_max // 2 + 1
    find, rfind, count = text.find, text.rfind, text.count
    quotes = counted = index = 0
    while index < size:
        block_end = index + block
        if find(_QUOTE, index, block_end) >= 0:
            index = block_end
            continue
        # The block before this one holds a quote (or this is the first block).
        run_start = rfind(_QUOTE, max(0, index - block), index) + 1
        run_end = find(_QUOTE, block_end)
        if run_end < 0:
            run_end = size
        if run_end - run_start > bytes_max:
            quotes += count(_QUOTE, counted, run_start)
            counted = run_start
            if quotes % 2:  # the quote before the run opened a string
                return run_end - run_start
        index = run_end
    return 0


def check_json(data: bytes, limits: BodyLimits) -> None:
    """Refuse (``limits.refusal``) a JSON body past a limit of its kind: longer than
    :attr:`~BodyLimits.body_bytes_max`, a string longer than
    :attr:`~BodyLimits.string_bytes_max`, single-quoted strings in a body longer than
    :attr:`~BodyLimits.single_quotes_bytes_max`, and in a body over
    :attr:`~BodyLimits.unchecked_bytes_max` more separators or objects than its length
    allows, a longer number or a deeper nesting than its kind's.

    Linear, in a few C passes over the body (under a nanosecond a byte, a few percent of
    decoding a real table). Density is counted over the whole body first; only when
    something is over its limit are the strings taken out (three more passes) and it is
    counted again, so a topic name of digits or commas is not held against its body."""
    size = len(data)
    if size > limits.body_bytes_max:
        raise limits.refused(size, f"longer than the limit of {limits.body_bytes_max} bytes")
    longest = longest_string_over(data, limits.string_bytes_max)
    if longest:
        what = limits.written.longest_string
        raise limits.refused(
            size,
            f"a string of {longest} bytes, more than {limits.string_bytes_max}"
            + (f" (the longest a {limits.written.writer} writes is {what})" if what else ""),
        )
    text, without_strings = data, False
    if size > limits.single_quotes_bytes_max and b"'" in data:
        # Without single-quoted strings, the text outside double-quoted strings is what
        # the decoder sees.
        text, without_strings = fastjson.outside_strings(data), True
        if b"'" in text:
            raise limits.refused(
                size,
                f"single-quoted strings (no {limits.written.writer} writes them; read only "
                f"in bodies of {limits.single_quotes_bytes_max} bytes at most)",
            )
    if size <= limits.unchecked_bytes_max:
        return
    problem = _json_problem(text, size, limits)
    if problem is not None and not without_strings:
        problem = _json_problem(fastjson.outside_strings(data), size, limits)
    if problem is not None:
        raise limits.refused(size, problem)


def read_json(data: bytes | bytearray | memoryview | str, limits: BodyLimits) -> object:
    """The one decoder of bodies: ``data`` checked against ``limits``
    (:func:`check_json`), then read by :func:`remoting.fastjson.loads` within the
    kind's lenient budget (:func:`read_checked`). Raises
    :class:`~remoting.errors.BodyDecodeError` for what is not JSON, ``limits.refusal``
    for what passes a limit.

    A body no longer than :attr:`BodyLimits.quick_bytes_max` cannot pass a limit but
    the single quotes', so that is all it is looked at for (a compressed REGISTER_BROKER
    body holds a short attribute text per topic)."""
    if isinstance(data, str):
        # Four UTF-8 bytes a character at most.
        if 4 * len(data) <= limits.quick_bytes_max and (
            4 * len(data) <= limits.single_quotes_bytes_max or "'" not in data
        ):
            return fastjson.loads(data, limits.read_limits)
        data = data.encode("utf-8", "surrogatepass")
    size = len(data)
    if size <= limits.quick_bytes_max and (
        size <= limits.single_quotes_bytes_max or b"'" not in data
    ):
        return fastjson.loads(data, limits.read_limits)
    data = bytes(data)
    check_json(data, limits)
    return read_checked(data, limits)


def read_checked(data: bytes, limits: BodyLimits) -> object:
    """``data``, which :func:`check_json` passed against ``limits``, read by
    :func:`remoting.fastjson.loads` within the kind's lenient budget. The second half of
    :func:`read_json`, for a caller that runs the check itself (``remoting.register_body``
    names its check, which its bench can turn off to measure what it saves)."""
    read = limits.checked_read_limits if len(data) > limits.unchecked_bytes_max else None
    return fastjson.loads(data, limits.read_limits if read is None else read)


@contextlib.contextmanager
def refusing(limits: BodyLimits, body_bytes: int) -> Iterator[None]:
    """Within the block, a :class:`PartRefused` becomes the refusal of a body of
    ``limits``' kind and ``body_bytes`` bytes."""
    try:
        yield
    except PartRefused as exc:
        raise limits.refused(body_bytes, str(exc)) from None


def check_length(data: bytes | bytearray | memoryview, limits: BodyLimits) -> None:
    """Refuse (``limits.refusal``) a body longer than its kind allows; for text that is
    not JSON (:data:`PROPERTIES`)."""
    if len(data) > limits.body_bytes_max:
        raise limits.refused(len(data), f"longer than the limit of {limits.body_bytes_max} bytes")
