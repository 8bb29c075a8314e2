"""The backup file format (raftstore/backup.py): what it holds, and every refusal.

A backup round-trips to the same state; every single changed byte, a cut anywhere, bytes
added, a file of another kind, an unknown format version, a header field missing, of
the wrong type, unknown or inconsistent, and a payload that does not inflate or decode
are each refused with a BackupError saying which. Written files are 0600 and whole.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from raftstore import backup, snapshot
from raftstore.commands import PutKV, UpdateNamesrvConfig
from raftstore.route_table import RouteTable
from tests.raftstore.cast import ADDR_A0, ADDR_B0, BROKER_A, BROKER_B, register, topics

MEMBERS = ("127.0.0.1:7101", "127.0.0.1:7102", "127.0.0.1:7103")
TAKEN_AT_MS = 1_796_540_524_399


def _table() -> RouteTable:
    table = RouteTable()
    register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=topics("Orders", "Pay"))
    register(table, addr=ADDR_B0, name=BROKER_B, broker_id=0, topic_table=topics("Orders"))
    table.apply(PutKV("ORDER_TOPIC_CONFIG", "Orders", "broker-a:8"))
    table.apply(PutKV("ns", "key", "value"))
    table.apply(UpdateNamesrvConfig((("orderMessageEnable", "true"),)))
    return table


def _header(table: RouteTable, mode: str = "raft") -> backup.BackupHeader:
    raft = mode == "raft"
    return backup.BackupHeader(
        cluster="local",
        mode=mode,
        node="n2",
        index=42 if raft else 7,
        term=3 if raft else 0,
        members=MEMBERS if raft else (),
        taken_at_ms=TAKEN_AT_MS,
        applied_version=table.applied_version,
        routes_version=table.routes_version,
    )


@pytest.fixture
def table() -> RouteTable:
    return _table()


@pytest.fixture
def data(table: RouteTable) -> bytes:
    return backup.encode(_header(table), table.state_document())


def _forged(header: dict[str, Any], payload: bytes, version: int = 1) -> bytes:
    """A file with any header, its checksum right (so the field checks are reached)."""
    head = json.dumps(header, sort_keys=True).encode()
    digest = hashlib.sha256(head + payload).digest()
    return struct.pack(">8sHI32s", backup.MAGIC, version, len(head), digest) + head + payload


def _parts(data: bytes) -> tuple[dict[str, Any], bytes]:
    (head_len,) = struct.unpack_from(">I", data, 10)
    start = backup.PREFIX_BYTES
    return json.loads(data[start : start + head_len]), data[start + head_len :]


def _refused(data: bytes, *words: str) -> str:
    with pytest.raises(backup.BackupError) as refused:
        backup.read_backup(data)
    message = str(refused.value)
    for word in words:
        assert word in message, message
    return message


# ---------------------------------------------------------------- what it holds


def test_a_raft_backup_holds_the_state_and_says_where_and_when_it_was_read(
    table: RouteTable, data: bytes
) -> None:
    read = backup.read_backup(data)

    assert read.table.digest() == table.digest()
    assert read.table.kv_get("ns", "key") == "value"
    assert read.table.config.order_message_enable is True
    assert read.table.pickup_topic_route("Orders") == table.pickup_topic_route("Orders")
    assert (read.table.applied_version, read.table.routes_version) == (
        table.applied_version,
        table.routes_version,
    )
    header = read.header
    assert (header.cluster, header.mode, header.node, header.index, header.term) == (
        "local",
        "raft",
        "n2",
        42,
        3,
    )
    assert header.members == MEMBERS and header.taken_at_ms == TAKEN_AT_MS
    assert "linearizable" in header.source
    assert header.state_bytes == len(table.snapshot()) and header.payload_bytes > 0
    assert header.file_name() == "namesrv-local-42-20261206T070204Z.nsbackup"
    assert backup.read_header(data) == header


def test_an_eventual_backup_names_the_node_whose_own_state_it_is(table: RouteTable) -> None:
    read = backup.read_backup(backup.encode(_header(table, "eventual"), table.state_document()))

    assert read.header.mode == "eventual" and read.header.members == ()
    assert read.header.source.startswith("node n2's own state")
    assert read.table.digest() == table.digest()


def test_a_raft_backup_read_without_a_barrier_says_so_in_its_source(table: RouteTable) -> None:
    """Recovery after quorum loss reads a node's applied state locally: the same format
    and fields, the source saying how it was read (and no other node's name in it)."""
    local = dataclasses.replace(_header(table), linearizable=False)
    data = backup.encode(local, table.state_document())

    read = backup.read_backup(data)

    assert read.header == dataclasses.replace(
        local, payload_bytes=read.header.payload_bytes, state_bytes=read.header.state_bytes
    )
    assert read.header.source.startswith("node n2's applied state, read without a barrier")
    assert read.header.summary()["linearizable"] is False
    assert set(_parts(data)[0]) == backup.HEADER_FIELDS
    header, payload = _parts(data)
    forged = {**header, "source": backup.source_of("raft", "n3", linearizable=False)}
    _refused(_forged(forged, payload), "source does not match")


def test_the_payload_is_the_route_tables_own_snapshot_compressed(
    table: RouteTable, data: bytes
) -> None:
    _, payload = _parts(data)

    assert zlib.decompress(payload) == table.snapshot()
    assert snapshot.MAGIC in zlib.decompress(payload)[:8]


# ---------------------------------------------------------------- refusals


def test_every_changed_byte_is_refused(data: bytes) -> None:
    for position in range(len(data)):
        changed = bytearray(data)
        changed[position] ^= 0x01
        with pytest.raises(backup.BackupError):
            backup.read_backup(bytes(changed))


def test_a_cut_file_is_refused_as_truncated(data: bytes) -> None:
    for size in (1, 8, 20, backup.PREFIX_BYTES, backup.PREFIX_BYTES + 10, len(data) - 1):
        _refused(data[:size], "truncated")


def test_bytes_added_at_the_end_are_refused(data: bytes) -> None:
    _refused(data + b"\x00", "damaged")


@pytest.mark.parametrize(
    ("content", "named"),
    [
        (b"RQSNAP1\n\x00\x00\x00\x02{}", "Raft snapshot"),
        (RouteTable().snapshot(), "route-table snapshot"),
        (b"SQLite format 3\x00" + b"\x00" * 80, "SQLite"),
        (b"\x1f\x8b\x08\x00" + b"\x00" * 20, "gzip"),
        (b"", "empty"),
        (b'{"nodes": []}', "does not start with"),
    ],
)
def test_a_file_of_another_kind_is_refused_by_name(content: bytes, named: str) -> None:
    message = _refused(content, "not a raft-namesrv backup")
    assert named in message


def test_an_unknown_format_version_is_refused(data: bytes) -> None:
    newer = data[:8] + struct.pack(">H", 2) + data[10:]

    _refused(newer, "format version 2", "newer release")


def test_a_header_missing_a_field_or_with_an_unknown_one_is_refused(data: bytes) -> None:
    header, payload = _parts(data)

    missing = {k: v for k, v in header.items() if k != "term"}
    _refused(_forged(missing, payload), "missing ['term']")
    _refused(_forged({**header, "extra": 1}, payload), "unknown ['extra']")


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("index", -1, "index must be a non-negative integer"),
        ("index", "42", "index must be a non-negative integer"),
        ("term", True, "term must be a non-negative integer"),
        ("node", "", "node must be a non-empty string"),
        ("mode", "paxos", "mode 'paxos'"),
        ("members", "127.0.0.1:7101", "members must be a list"),
        ("members", [], "a raft backup names its members"),
        ("cluster", "a/b", "cluster name"),
        ("payload_encoding", "gzip", "payload_encoding"),
        ("source", "somewhere", "source does not match"),
        ("state_bytes", 0, "state_bytes 0"),
    ],
)
def test_a_header_field_of_the_wrong_type_or_value_is_refused(
    data: bytes, field: str, value: object, words: str
) -> None:
    header, payload = _parts(data)

    _refused(_forged({**header, field: value}, payload), "corrupt backup header", words)


def test_an_eventual_header_with_members_is_refused(table: RouteTable) -> None:
    header, payload = _parts(backup.encode(_header(table, "eventual"), table.state_document()))

    _refused(_forged({**header, "members": list(MEMBERS)}, payload), "no members or term")


def test_a_payload_that_does_not_inflate_to_its_declared_size_is_refused(data: bytes) -> None:
    header, payload = _parts(data)
    state = zlib.decompress(payload)

    _refused(_forged({**header, "state_bytes": len(state) - 1}, payload), "does not inflate")
    _refused(_forged({**header, "state_bytes": len(state) + 1}, payload), "does not inflate")
    garbage = b"not zlib at all"
    _refused(_forged({**header, "payload_bytes": len(garbage)}, garbage), "payload")


def test_a_payload_that_is_not_a_route_table_is_refused(data: bytes) -> None:
    header, _ = _parts(data)
    state = snapshot.MAGIC + b"\x00\x04" + b'{"applied_version": 1}'
    payload = zlib.compress(state)
    forged = {**header, "payload_bytes": len(payload), "state_bytes": len(state)}

    _refused(_forged(forged, payload), "corrupt backup payload")


def test_versions_that_differ_from_the_states_are_refused(data: bytes) -> None:
    header, payload = _parts(data)

    _refused(
        _forged({**header, "applied_version": header["applied_version"] + 1}, payload),
        "versions",
    )


def test_a_wrong_payload_length_is_refused(data: bytes) -> None:
    header, payload = _parts(data)

    _refused(_forged({**header, "payload_bytes": len(payload) + 5}, payload), "payload bytes")


# ---------------------------------------------------------------- files


def test_a_file_is_written_whole_with_mode_0600(tmp_path: Path, data: bytes) -> None:
    target = tmp_path / "cluster.nsbackup"
    target.write_bytes(b"an older backup")
    os.chmod(target, 0o644)

    backup.write_backup_file(target, data)

    assert target.read_bytes() == data
    assert target.stat().st_mode & 0o777 == backup.FILE_MODE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster.nsbackup"]
    assert backup.read_backup_file(target).header.index == 42


def test_a_missing_folder_or_a_folder_as_target_is_refused(tmp_path: Path, data: bytes) -> None:
    with pytest.raises(backup.BackupError, match="does not exist"):
        backup.write_backup_file(tmp_path / "nowhere" / "b.nsbackup", data)
    with pytest.raises(backup.BackupError, match="is a folder"):
        backup.write_backup_file(tmp_path, data)


def test_reading_a_missing_or_damaged_file_names_it(tmp_path: Path, data: bytes) -> None:
    with pytest.raises(backup.BackupError, match="no such file"):
        backup.read_backup_file(tmp_path / "absent.nsbackup")
    damaged = tmp_path / "damaged.nsbackup"
    damaged.write_bytes(data[:-3])
    with pytest.raises(backup.BackupError, match=f"{damaged}: truncated"):
        backup.read_backup_file(damaged)


@pytest.mark.parametrize(
    ("folder", "name"),
    [("local", "local"), ("run second", "run-second"), ("", "namesrv"), ("..", "namesrv")],
)
def test_a_cluster_name_is_made_from_a_folder_name(folder: str, name: str) -> None:
    assert backup.cluster_name_of(folder) == name
