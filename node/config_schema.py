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
from tools import msgspec_errors
from tools.msgspec_errors import Step

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

_ABSENT = object()


def convert(data: Any, kind: type[T], at: tuple[str, ...] = ()) -> T:
    """``data`` (a parsed TOML table) as ``kind``; ConfigProblem naming the key if it does
    not fit. ``at`` is where the table sits in the file (``("peers", "n2")``)."""
    try:
        return msgspec.convert(data, kind)
    except msgspec.ValidationError as exc:
        raise ConfigProblem(_explain(str(exc), data, kind, at)) from None


def _explain(message: str, data: Any, kind: type[Any], at: tuple[str, ...]) -> str:
    """msgspec's ``message`` about ``data`` as ``<key>: <problem>``."""
    text, path = msgspec_errors.split(message)
    info = msgspec_errors.info_at(schema.type_info(kind), path)
    if key := msgspec_errors.missing_field(text):
        return f"{_place(at, path, key, msgspec_errors.field_info(info, key))}: is required"
    if key := msgspec_errors.unknown_field(text):
        if not at and not path and isinstance(_value_at(data, [key]), dict):
            return f"[{key}]: unknown section"
        known = ", ".join(f.encode_name for f in msgspec_errors.fields(info))
        return f"{_place(at, path, key, None)}: unknown key (known here: {known})"
    value = _value_at(data, path)
    if path and path[-1] == "...":
        path = path[:-1]  # a value in a table with free keys ([raft] dial)
    return f"{_place(at, path[:-1], path[-1] if path else '', info)}: {_problem(info, value)}"


def _place(at: tuple[str, ...], parent: list[Step], key: Step, info: Any) -> str:
    """Where a key is, as the file shows it: ``id``, ``[raft] listen``, ``[peers.n2]``,
    ``[web] allowed_hosts[1]`` (the schema's lists hold no tables)."""
    names = [*at, *map(str, parent)]
    if isinstance(msgspec_errors.bare(info), schema.StructType):
        names += [str(key)] if key != "" else []
        return f"[{'.'.join(names)}]"
    if isinstance(key, int):
        names, key = names[:-1], f"{names[-1]}[{key}]"
    return f"[{'.'.join(names)}] {key}" if names else str(key)


def _problem(info: Any, value: Any) -> str:
    """Why ``value`` does not fit the type ``info``."""
    bare = msgspec_errors.bare(info)
    shown = "" if value is _ABSENT else f", not {value!r}"
    if isinstance(bare, schema.StrType) and bare.pattern and isinstance(value, str):
        return f"{value!r} is not {msgspec_errors.describe(info)}"
    return f"must be {msgspec_errors.describe(info)}{shown}"


def _value_at(data: Any, path: list[Step]) -> Any:
    """The file's value at ``path`` (``_ABSENT`` when the path leads nowhere)."""
    for step in path:
        try:
            data = data[step]
        except (KeyError, IndexError, TypeError):
            return _ABSENT
    return data
