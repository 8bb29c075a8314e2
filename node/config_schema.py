"""The shape of ``node.toml`` as msgspec structs, and msgspec's complaints as one line.

msgspec checks what a schema can say: which sections and keys exist (an unknown one
is refused, a typo is never ignored), each value's type, and numeric ranges and
patterns (``Meta``). :mod:`node.config` then checks what needs more than one value
(addresses, ports that clash, keys required in one mode) and builds the NodeConfig.

A msgspec error names a path (``$.internal.port``) and a type; :func:`convert` turns
it into the file's own words, ``[internal] port: must be a whole number from 1 to
65535, not 0``, with the value the file holds.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, TypeVar

import msgspec
import msgspec.inspect as schema
from msgspec import Meta, Struct

from gateway.priority import BELOW_FRONT_NICE, NICE_STEPS_MAX
from remoting.tls import ClientAuth, TlsMode

PORT_MAX = 65535
NODE_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
WORKERS_MAX = 64
DEFAULT_SCAN_INTERVAL_S = 10
DEFAULT_PROPOSE_TIMEOUT_S = 3.0
DEFAULT_SKEW_ALLOWANCE_MS = 5000
PROPOSE_TIMEOUT_MIN_S = 0.05
PROPOSE_TIMEOUT_MAX_S = 600.0
SKEW_ALLOWANCE_MAX_MS = 3_600_000
SCAN_INTERVAL_MAX_S = 3600

Port = Annotated[int, Meta(ge=1, le=PORT_MAX)]
NodeId = Annotated[
    str,
    Meta(
        pattern=NODE_ID_PATTERN.pattern,
        description="a node id (letters, digits, - and _)",
    ),
]
Mode = Literal["eventual", "raft"]
"""raftstore.vocab.MODES (tests/node/test_config.py keeps the two the same)."""
WebProfile = Literal["development", "production"]
Hosts = Annotated[
    list[Annotated[str, Meta(min_length=1)]],
    Meta(description="a list of non-empty strings"),
]
Dial = Annotated[dict[str, str], Meta(description='a table of peer = "host:port"')]

T = TypeVar("T")


class Table(Struct, forbid_unknown_fields=True):
    """A TOML table whose every key is known."""


class RemotingTable(Table):
    """``[remoting]``: the port brokers and clients use."""

    listen: str
    advertise: str | None = None
    read_front: bool = True
    below_front_nice: Annotated[int, Meta(ge=0, le=NICE_STEPS_MAX)] = BELOW_FRONT_NICE


class WebTable(Table):
    """``[web]``: the console and REST API."""

    listen: str
    advertise: str | None = None
    allowed_hosts: Hosts = []
    workers: Annotated[int, Meta(ge=1, le=WORKERS_MAX)] = 1
    profile: WebProfile = "production"


class InternalTable(Table):
    """``[internal]``: the loopback port of this host's web and scan."""

    port: Port


class MetricsTable(Table):
    """``[metrics]``: the gateway's Prometheus port."""

    listen: str | None = None


class RaftTable(Table):
    """``[raft]``: the Raft port (required in raft mode, checked after decoding)."""

    listen: str | None = None
    advertise: str | None = None
    propose_timeout_s: Annotated[
        float, Meta(ge=PROPOSE_TIMEOUT_MIN_S, le=PROPOSE_TIMEOUT_MAX_S)
    ] = DEFAULT_PROPOSE_TIMEOUT_S
    skew_allowance_ms: Annotated[int, Meta(ge=0, le=SKEW_ALLOWANCE_MAX_MS)] = (
        DEFAULT_SKEW_ALLOWANCE_MS
    )
    dial: Dial = {}


class SecretsTable(Table):
    """``[secrets]``: files holding the cluster's secrets (names only, never read here)."""

    raft_file: str = ""
    django_file: str = ""
    internal_file: str = ""


class AclTable(Table):
    """``[acl]``: the remoting port's accounts and the admin account's secret."""

    enabled: bool = True
    file: str = ""
    access_key: str = ""
    secret_key_file: str = ""


class UrlTable(Table):
    """``[database]`` and ``[redis]``: a URL and the file of its password."""

    url: str = ""
    password_file: str = ""


class ScanTable(Table):
    """``[scan]``: how often the gateway looks for expired brokers."""

    interval_s: Annotated[int, Meta(ge=1, le=SCAN_INTERVAL_MAX_S)] = DEFAULT_SCAN_INTERVAL_S


class NamesrvTable(Table):
    """``[namesrv]``: the gateway's NamesrvConfig properties file."""

    config_file: str = ""


class TlsTable(Table):
    """``[tls]``: the node's certificate, and which ports speak TLS."""

    mode: TlsMode = TlsMode.DISABLED
    cert_file: str = ""
    key_file: str = ""
    key_password_file: str = ""
    ca_file: str = ""
    need_client_auth: ClientAuth = ClientAuth.NONE
    web: bool | None = None
    """Unset: true when there is a certificate."""


class PeerTable(Table):
    """``[peers.ID]``: another member's addresses."""

    remoting: str
    raft: str | None = None
    web: str | None = None
    internal_port: Port | None = None


class NodeFile(Table):
    """The whole file. ``[peers]`` is checked one member at a time (:class:`PeerTable`)
    so that a problem names the member: msgspec's paths do not name a table's keys."""

    id: NodeId
    data_dir: str
    remoting: RemotingTable
    web: WebTable
    internal: InternalTable
    mode: Mode = "eventual"
    cluster_file: str = ""
    metrics: MetricsTable = msgspec.field(default_factory=MetricsTable)
    raft: RaftTable = msgspec.field(default_factory=RaftTable)
    peers: dict[str, Any] = {}
    secrets: SecretsTable = msgspec.field(default_factory=SecretsTable)
    acl: AclTable = msgspec.field(default_factory=AclTable)
    database: UrlTable = msgspec.field(default_factory=UrlTable)
    redis: UrlTable = msgspec.field(default_factory=UrlTable)
    scan: ScanTable = msgspec.field(default_factory=ScanTable)
    namesrv: NamesrvTable = msgspec.field(default_factory=NamesrvTable)
    tls: TlsTable = msgspec.field(default_factory=TlsTable)


class ConfigProblem(ValueError):
    """What is wrong with a value of the file, one line starting with its key."""


# ------------------------------------------------------------------- converting

_AT = re.compile(r" - at `(?:key` in `)?(?P<path>\$[^`]*)`$")
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")
_MISSING = re.compile(r"^Object missing required field `(?P<key>[^`]+)`")
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<key>[^`]+)`")
_ABSENT = object()
Step = str | int


def convert(data: Any, kind: type[T], at: tuple[str, ...] = ()) -> T:
    """``data`` (a parsed TOML table) as ``kind``; ConfigProblem naming the key if it does
    not fit. ``at`` is where the table sits in the file (``("peers", "n2")``)."""
    try:
        return msgspec.convert(data, kind)
    except msgspec.ValidationError as exc:
        raise ConfigProblem(_explain(str(exc), data, kind, at)) from None


def _explain(message: str, data: Any, kind: type[Any], at: tuple[str, ...]) -> str:
    """msgspec's ``message`` about ``data`` as ``<key>: <problem>``."""
    found = _AT.search(message)
    text = message[: found.start()] if found else message
    path = _steps(found.group("path")) if found else []
    info = _info_at(schema.type_info(kind), path)
    if missing := _MISSING.match(text):
        key = missing.group("key")
        return f"{_place(at, path, key, _field_info(info, key))}: is required"
    if unknown := _UNKNOWN.match(text):
        key = unknown.group("key")
        if not at and not path and isinstance(_value_at(data, [key]), dict):
            return f"[{key}]: unknown section"
        known = ", ".join(f.encode_name for f in _fields(info))
        return f"{_place(at, path, key, None)}: unknown key (known here: {known})"
    value = _value_at(data, path)
    if path and path[-1] == "...":
        path = path[:-1]  # a value in a table with free keys ([raft] dial)
    return f"{_place(at, path[:-1], path[-1] if path else '', info)}: {_problem(info, value)}"


def _steps(path: str) -> list[Step]:
    """``$.web.allowed_hosts[1]`` as ``["web", "allowed_hosts", 1]``."""
    steps: list[Step] = []
    for name, index in _STEP.findall(path[1:]):
        steps.append(name or (int(index) if index.isdigit() else "..."))
    return steps


def _place(at: tuple[str, ...], parent: list[Step], key: Step, info: Any) -> str:
    """Where a key is, as the file shows it: ``id``, ``[raft] listen``, ``[peers.n2]``,
    ``[web] allowed_hosts[1]`` (the schema's lists hold no tables)."""
    names = [*at, *map(str, parent)]
    if isinstance(_bare(info), schema.StructType):
        names += [str(key)] if key != "" else []
        return f"[{'.'.join(names)}]"
    if isinstance(key, int):
        names, key = names[:-1], f"{names[-1]}[{key}]"
    return f"[{'.'.join(names)}] {key}" if names else str(key)


def _problem(info: Any, value: Any) -> str:
    """Why ``value`` does not fit the type ``info``."""
    bare = _bare(info)
    shown = "" if value is _ABSENT else f", not {value!r}"
    if isinstance(bare, schema.StrType) and bare.pattern and isinstance(value, str):
        return f"{value!r} is not {_describe(info)}"
    return f"must be {_describe(info)}{shown}"


def _describe(info: Any) -> str:
    """The type ``info`` in the words of the file's docs."""
    if isinstance(info, schema.Metadata):
        description = (info.extra_json_schema or {}).get("description")
        if description:
            return str(description)
    bare = _bare(info)
    words: dict[type[Any], str] = {
        schema.IntType: "a whole number",
        schema.FloatType: "a number",
        schema.BoolType: "true or false",
        schema.StructType: "a table",
        schema.DictType: "a table",
        schema.ListType: "a list",
    }
    if isinstance(bare, schema.IntType) and bare.ge is not None and bare.le is not None:
        return f"a whole number from {bare.ge} to {bare.le}"
    if isinstance(bare, schema.FloatType) and bare.ge is not None and bare.le is not None:
        return f"a number from {bare.ge:g} to {bare.le:g}"
    if isinstance(bare, schema.StrType):
        return "a non-empty string" if bare.min_length else "a string"
    if isinstance(bare, schema.LiteralType):
        return f"one of {', '.join(map(str, bare.values))}"
    if isinstance(bare, schema.EnumType):
        return f"one of {', '.join(str(m.value) for m in bare.cls)}"
    return words.get(type(bare), "something else")


def _bare(info: Any) -> Any:
    """The type without its description and without ``| None``."""
    while True:
        if isinstance(info, schema.Metadata):
            info = info.type
        elif isinstance(info, schema.UnionType):
            info = next(t for t in info.types if not isinstance(t, schema.NoneType))
        else:
            return info


def _fields(info: Any) -> tuple[schema.Field, ...]:
    bare = _bare(info)
    return bare.fields if isinstance(bare, schema.StructType) else ()


def _field_info(info: Any, key: str) -> Any:
    return next((f.type for f in _fields(info) if f.encode_name == key), None)


def _info_at(info: Any, path: list[Step]) -> Any:
    """The type of the value at ``path`` under ``info``."""
    for step in path:
        bare = _bare(info)
        if isinstance(bare, schema.StructType):
            info = _field_info(bare, str(step))
        elif isinstance(bare, schema.ListType):
            info = bare.item_type
        elif isinstance(bare, schema.DictType):
            info = bare.value_type
        else:
            return None
    return info


def _value_at(data: Any, path: list[Step]) -> Any:
    """The file's value at ``path`` (``_ABSENT`` when the path leads nowhere)."""
    for step in path:
        try:
            data = data[step]
        except (KeyError, IndexError, TypeError):
            return _ABSENT
    return data
