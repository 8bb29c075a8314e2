"""Backup files: a consistent copy of a node's replicated state, and its checks (never pickle).

A backup is what ``manage.py cluster backup``, ``raft-namesrv backup`` and
``GET /api/v1/backup/`` write, and what ``cluster up --restore`` (``run_gateway
--restore-state``) starts a new cluster from. Layout, all integers big-endian::

    MAGIC (8 bytes, b"RMQNSBAK")
    format version (uint16)            FORMAT_VERSION
    header length (uint32)             at most HEADER_BYTES_MAX
    SHA-256 (32 bytes)                 of everything after this field: header and payload
    header                             canonical JSON (sorted keys, ASCII): HEADER_FIELDS
    payload                            zlib of the route table's snapshot (raftstore.snapshot)

The header names the cluster, the mode (``raft``: the replicated state at a
linearizable point, or, said in ``source``, a node's applied state read without a
barrier when it had no quorum; ``eventual``: one node's own state), the node it was read from,
the Raft log index and term it was read at (eventual: the node's own count of applied
commands, term 0), the members (raft), when it was read, the table's two version
counters and the payload's sizes. The payload is the same codec as the Raft snapshot
file's table part (routes, brokers, live entries, KV, config), so a backup holds
exactly what every node's digest covers.

:func:`read_backup` refuses, with a :class:`BackupError` saying which, a file of
another kind (wrong magic; a Raft snapshot or a route-table snapshot is named as
such), a format version this release does not read, a truncated file, any changed
byte (the checksum covers the header and the payload), a header field missing, of the
wrong type or unknown, and a payload that does not inflate to its declared size or
does not decode as a route table. Nothing is decoded before the checksum holds.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import re
import struct
import zlib
from pathlib import Path
from typing import Any

from raftstore import snapshot
from raftstore.route_table import RouteTable
from raftstore.vocab import MODE_EVENTUAL, MODE_RAFT, MODES

MAGIC = b"RMQNSBAK"
FORMAT_VERSION = 1
READABLE_FORMAT_VERSIONS = frozenset({1})
_PREFIX = struct.Struct(">8sHI32s")
PREFIX_BYTES = _PREFIX.size
HEADER_BYTES_MAX = 64 * 1024
"""A header is a few hundred bytes (a member list of a few addresses)."""
STATE_BYTES_MAX = 1 << 30
"""The largest route-table snapshot a backup may inflate to (1 GiB): far above any real
table, and the bound that keeps a forged size from exhausting memory."""
FILE_BYTES_MAX = STATE_BYTES_MAX
"""A file larger than this is not read at all (a compressed state is smaller)."""
PAYLOAD_ENCODING = "zlib"
ZLIB_LEVEL = 6
"""zlib's default: a 5,000-topic table of random 32-character names (0.82 MB of JSON) to
0.14 MB, the whole file built in about 40 ms (docs/BENCHMARKS.md, "backup and restore")."""
FILE_MODE = 0o600
"""Owner only: the backup holds the NameServer config and the KV entries."""
FILE_SUFFIX = ".nsbackup"
CLUSTER_NAME_CHARS_MAX = 64
CLUSTER_NAME_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_NOT_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
DEFAULT_CLUSTER_NAME = "namesrv"

SOURCE_RAFT = "the replicated state at a linearizable point (a barrier committed first)"
SOURCE_RAFT_LOCAL = (
    "node {node}'s applied state, read without a barrier (it had no quorum): entries the "
    "cluster committed after its index may be missing"
)
"""A raft backup read locally (``cluster recover``, ``run_node --force-new-cluster``):
said in ``source``, so the format and its fields stay as they are."""
HEADER_FIELDS = frozenset(
    {
        "cluster",
        "mode",
        "source",
        "node",
        "index",
        "term",
        "members",
        "taken_at_ms",
        "applied_version",
        "routes_version",
        "payload_encoding",
        "payload_bytes",
        "state_bytes",
    }
)

# Files a backup is most often mistaken for, named in the refusal.
_KNOWN_MAGICS = (
    (b"RQSNAP1\n", "a Raft snapshot file (raft.snapshot), not a backup"),
    (snapshot.MAGIC, "a bare route-table snapshot, not a backup"),
    (b"SQLite format 3\x00", "an SQLite database, not a backup"),
    (b"\x1f\x8b", "a gzip file, not a backup (decompress it first?)"),
)


class BackupError(ValueError):
    """The bytes are not a backup this release can restore; the message says why."""


def source_of(mode: str, node: str, linearizable: bool = True) -> str:
    """What a backup of ``mode`` read from ``node`` holds, in words (its ``source``);
    ``linearizable`` False: a raft node's applied state read without a barrier."""
    if mode == MODE_RAFT:
        return SOURCE_RAFT if linearizable else SOURCE_RAFT_LOCAL.format(node=node)
    return f"node {node}'s own state (eventual mode: each node applies what it hears itself)"


@dataclasses.dataclass(frozen=True, slots=True)
class BackupHeader:
    """What a backup says about itself (every field checked on reading)."""

    cluster: str
    mode: str
    node: str
    index: int
    """Raft: the log index the state was read at (every entry up to it applied, none
    after). Eventual: the commands this node had applied since it started."""
    term: int
    """Raft: the node's term when the state was read (eventual: 0)."""
    members: tuple[str, ...]
    """Raft: the members' Raft addresses (eventual: none)."""
    taken_at_ms: int
    """When the state was read, by the reading node's clock (UTC milliseconds)."""
    applied_version: int
    routes_version: int
    payload_bytes: int = 0
    state_bytes: int = 0
    linearizable: bool = True
    """Raft: read after a barrier (False: this node's applied state, read without one, as
    a node that lost its quorum can; ``source`` says which, the file has no field of its
    own for it). Eventual: always True (the node's own state is all there is)."""

    @property
    def source(self) -> str:
        """What the backup holds, in words."""
        return source_of(self.mode, self.node, self.linearizable)

    def summary(self) -> dict[str, Any]:
        """The header as plain values (``cluster backup --json``, logs)."""
        doc = dataclasses.asdict(self)
        doc["members"] = list(self.members)
        doc["source"] = self.source
        doc["taken_at"] = utc_text(self.taken_at_ms)
        return doc

    def file_name(self) -> str:
        """A file name that says what the backup is: cluster, index and UTC time."""
        stamp = datetime.datetime.fromtimestamp(self.taken_at_ms / 1000, datetime.UTC)
        return f"namesrv-{self.cluster}-{self.index}-{stamp:%Y%m%dT%H%M%SZ}{FILE_SUFFIX}"


@dataclasses.dataclass(frozen=True, slots=True)
class Backup:
    """A backup that passed every check: its header and the route-table snapshot."""

    header: BackupHeader
    state: bytes
    """The route table's snapshot (:mod:`raftstore.snapshot`)."""
    table: RouteTable
    """The state decoded (versions included): the table a restore starts from."""


def utc_text(ms: int) -> str:
    """``2026-12-06 05:28:00 UTC`` for a time in UTC milliseconds."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def cluster_name_of(text: str) -> str:
    """A cluster name made from ``text`` (a folder's name): other characters become
    ``-``, at most 64 kept; :data:`DEFAULT_CLUSTER_NAME` when nothing is left."""
    name = _NOT_NAME_CHARS.sub("-", text)[:CLUSTER_NAME_CHARS_MAX].strip(".-")
    return name or DEFAULT_CLUSTER_NAME


def check_cluster_name(name: str) -> str:
    """``name`` when it may name a cluster in a backup (and its file name); BackupError if not."""
    if not CLUSTER_NAME_PATTERN.match(name):
        raise BackupError(f"cluster name {name!r} must be 1 to 64 letters, digits, '.', '_' or '-'")
    return name


# ---------------------------------------------------------------- encode


def encode(header: BackupHeader, state: dict[str, Any]) -> bytes:
    """The backup file of ``state`` (a :meth:`RouteTable.state_document` copy) with
    ``header`` (its payload sizes are filled in here). Called off the apply lock: the
    serializing, compressing and hashing take most of a backup's time."""
    table = snapshot.encode_document(state, header.applied_version, header.routes_version)
    return encode_state(header, table)


def encode_state(header: BackupHeader, table: bytes) -> bytes:
    """The backup file of a route-table snapshot ``table`` (:meth:`RouteTable.snapshot`)."""
    check_cluster_name(header.cluster)
    payload = zlib.compress(table, ZLIB_LEVEL)
    filled = dataclasses.replace(header, payload_bytes=len(payload), state_bytes=len(table))
    doc = {**filled.summary(), "payload_encoding": PAYLOAD_ENCODING}
    del doc["taken_at"], doc["linearizable"]  # derived: the time, and the source's words
    head = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    if len(head) > HEADER_BYTES_MAX:
        raise BackupError(f"backup header of {len(head)} bytes is over {HEADER_BYTES_MAX}")
    checksum = hashlib.sha256(head)
    checksum.update(payload)
    prefix = _PREFIX.pack(MAGIC, FORMAT_VERSION, len(head), checksum.digest())
    return prefix + head + payload


# ---------------------------------------------------------------- read


def _checked(data: bytes) -> tuple[BackupHeader, int]:
    """The header and its length, once everything but the payload's content checks."""
    if len(data) > FILE_BYTES_MAX:
        raise BackupError(f"{len(data)} bytes is larger than any backup ({FILE_BYTES_MAX})")
    if not data.startswith(MAGIC):
        raise BackupError(_foreign(data))
    if len(data) < PREFIX_BYTES:
        raise BackupError(
            f"truncated backup: {len(data)} bytes, less than its {PREFIX_BYTES}-byte prefix"
        )
    _, version, head_len, checksum = _PREFIX.unpack_from(data)
    if version not in READABLE_FORMAT_VERSIONS:
        raise BackupError(
            f"backup format version {version} is not one this release reads "
            f"({', '.join(map(str, sorted(READABLE_FORMAT_VERSIONS)))}): a backup of a newer "
            "release, or a damaged file"
        )
    if head_len > HEADER_BYTES_MAX:
        raise BackupError(
            f"damaged backup: its header length {head_len} is over {HEADER_BYTES_MAX} bytes"
        )
    body = memoryview(data)[PREFIX_BYTES:]
    if hashlib.sha256(body).digest() != checksum:
        raise BackupError(_mismatch(data, head_len))
    header = _header(bytes(body[:head_len]))
    if len(body) - head_len != header.payload_bytes:
        raise BackupError(
            f"corrupt backup: the header says {header.payload_bytes} payload bytes, "
            f"the file holds {len(body) - head_len}"
        )
    return header, head_len


def read_header(data: bytes) -> BackupHeader:
    """The header of ``data`` once its prefix, checksum and header check (the payload is
    not inflated): what a server that only passes a backup on needs."""
    return _checked(data)[0]


def read_backup(data: bytes) -> Backup:
    """Check every part of ``data`` and return the backup; BackupError naming what is
    wrong otherwise (see the module docstring for the order of the checks)."""
    header, head_len = _checked(data)
    payload = bytes(memoryview(data)[PREFIX_BYTES + head_len :])
    state = _inflate(payload, header.state_bytes)
    try:
        table = RouteTable.restore(state)
    except ValueError as exc:
        raise BackupError(f"corrupt backup payload: {exc}") from None
    versions = (table.applied_version, table.routes_version)
    if versions != (header.applied_version, header.routes_version):
        raise BackupError(
            "corrupt backup: the header's versions "
            f"({header.applied_version}, {header.routes_version}) differ from the state's "
            f"{versions}"
        )
    return Backup(header, state, table)


def read_backup_file(path: Path) -> Backup:
    """:func:`read_backup` of the file at ``path``; BackupError naming the file when it
    is missing, not a file, unreadable or not a good backup."""
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise BackupError(f"{path} is not a file")
        if size > FILE_BYTES_MAX:
            raise BackupError(f"{path}: {size} bytes is larger than any backup")
        data = path.read_bytes()
    except FileNotFoundError:
        raise BackupError(f"{path}: no such file") from None
    except OSError as exc:
        raise BackupError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    try:
        return read_backup(data)
    except BackupError as exc:
        raise BackupError(f"{path}: {exc}") from None


def _foreign(data: bytes) -> str:
    for magic, what in _KNOWN_MAGICS:
        if data.startswith(magic):
            return f"not a raft-namesrv backup: it is {what}"
    if not data:
        return "not a raft-namesrv backup: the file is empty"
    if MAGIC.startswith(data):
        return f"truncated backup: {len(data)} bytes, less than its {PREFIX_BYTES}-byte prefix"
    return f"not a raft-namesrv backup: it does not start with {MAGIC!r} (starts {data[:8]!r})"


def _mismatch(data: bytes, head_len: int) -> str:
    """The refusal of a checksum mismatch: truncated when the header still reads and says
    the file is longer, else damaged."""
    if len(data) < PREFIX_BYTES + head_len:
        return (
            f"truncated backup: {len(data)} bytes, less than its prefix and "
            f"{head_len}-byte header (an interrupted copy or download?)"
        )
    try:
        header = _header(data[PREFIX_BYTES : PREFIX_BYTES + head_len])
    except BackupError:
        header = None
    expected = None if header is None else PREFIX_BYTES + head_len + header.payload_bytes
    if expected is not None and len(data) < expected:
        return (
            f"truncated backup: {len(data)} of its {expected} bytes (an interrupted copy or "
            "download?)"
        )
    return (
        "damaged backup: the SHA-256 of its header and payload does not match the checksum "
        "it carries (a byte was changed, lost or added)"
    )


def _header(raw: bytes) -> BackupHeader:
    try:
        doc = json.loads(raw.decode("ascii"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BackupError(f"corrupt backup header: {exc}") from None
    if not isinstance(doc, dict):
        raise BackupError("corrupt backup header: not a JSON object")
    missing = sorted(HEADER_FIELDS - set(doc))
    unknown = sorted(set(doc) - HEADER_FIELDS)
    if missing or unknown:
        raise BackupError(
            f"corrupt backup header: missing {missing or 'nothing'}, unknown {unknown or 'none'}"
        )
    mode = _field_str(doc, "mode")
    if mode not in MODES:
        raise BackupError(f"corrupt backup header: mode {mode!r} is not one of {sorted(MODES)}")
    members = doc["members"]
    if not isinstance(members, list) or not all(isinstance(m, str) and m for m in members):
        raise BackupError("corrupt backup header: members must be a list of addresses")
    header = BackupHeader(
        cluster=_field_str(doc, "cluster"),
        mode=mode,
        node=_field_str(doc, "node"),
        index=_field_int(doc, "index"),
        term=_field_int(doc, "term"),
        members=tuple(members),
        taken_at_ms=_field_int(doc, "taken_at_ms"),
        applied_version=_field_int(doc, "applied_version"),
        routes_version=_field_int(doc, "routes_version"),
        payload_bytes=_field_int(doc, "payload_bytes"),
        state_bytes=_field_int(doc, "state_bytes"),
        # Raft says which read it was in its source (checked against it just below).
        linearizable=mode != MODE_RAFT or doc["source"] == SOURCE_RAFT,
    )
    _check_consistent(header, doc)
    return header


def _check_consistent(header: BackupHeader, doc: dict[str, Any]) -> None:
    """The rules between fields: the mode decides members and term, the rest is fixed."""
    try:
        check_cluster_name(header.cluster)
    except BackupError as exc:
        raise BackupError(f"corrupt backup header: {exc}") from None
    if doc["payload_encoding"] != PAYLOAD_ENCODING:
        raise BackupError(
            f"corrupt backup header: payload_encoding {doc['payload_encoding']!r} is not "
            f"{PAYLOAD_ENCODING!r}"
        )
    if doc["source"] != header.source:
        raise BackupError("corrupt backup header: source does not match the mode and node")
    if header.mode == MODE_EVENTUAL and (header.members or header.term):
        raise BackupError("corrupt backup header: an eventual node has no members or term")
    if header.mode == MODE_RAFT and not header.members:
        raise BackupError("corrupt backup header: a raft backup names its members")
    if not 0 < header.state_bytes <= STATE_BYTES_MAX:
        raise BackupError(
            f"corrupt backup header: state_bytes {header.state_bytes} is not in "
            f"1..{STATE_BYTES_MAX}"
        )


def _field_str(doc: dict[str, Any], name: str) -> str:
    value = doc[name]
    if not isinstance(value, str) or not value:
        raise BackupError(f"corrupt backup header: {name} must be a non-empty string")
    return value


def _field_int(doc: dict[str, Any], name: str) -> int:
    value = doc[name]
    if type(value) is not int or value < 0:
        raise BackupError(f"corrupt backup header: {name} must be a non-negative integer")
    return value


def _inflate(payload: bytes, state_bytes: int) -> bytes:
    """The payload inflated, never past its declared size (a forged size cannot make it
    allocate more than that)."""
    inflater = zlib.decompressobj()
    try:
        state = inflater.decompress(payload, state_bytes)
        complete = inflater.eof and not inflater.unconsumed_tail and not inflater.unused_data
    except zlib.error as exc:
        raise BackupError(f"corrupt backup payload: {exc}") from None
    if not complete or len(state) != state_bytes:
        raise BackupError(
            f"corrupt backup payload: it does not inflate to the {state_bytes} bytes "
            "its header declares"
        )
    return state


# ---------------------------------------------------------------- write


def write_backup_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all, mode 0600: a temporary sibling
    created with that mode, flushed to disk, renamed over ``path``, the folder synced.

    BackupError (nothing written) when the folder does not exist or is not writable,
    or ``path`` is a folder."""
    folder = path.parent
    if not folder.is_dir():
        raise BackupError(f"{path}: the folder {folder} does not exist")
    if path.is_dir():
        raise BackupError(f"{path} is a folder; give a file name")
    temporary = folder / f".{path.name}.{os.getpid()}.tmp"
    try:
        temporary.unlink(missing_ok=True)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
        _sync_folder(folder)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise BackupError(f"{path}: cannot write it: {exc.strerror or exc}") from None


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
