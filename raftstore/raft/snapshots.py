"""Raft snapshot files: the route table's own codec plus the few Raft fields PySyncObj
needs, never a pickle of the object.

A file is :data:`SNAPSHOT_MAGIC`, a 4-byte big-endian header length, a JSON header
(format version, applied index, PySyncObj's last two entries, the cluster, the dedupe
window, the table's CRC-32) and the table's snapshot bytes. PySyncObj calls
:class:`SnapshotHooks` when it compacts its log and when it installs a snapshot.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from pathlib import Path
from typing import Any

from raftstore.raft.applier import AppliedState
from raftstore.raft.glue import DialNode, Durability
from raftstore.replicator import ReplicationError

SNAPSHOT_MAGIC = b"RQSNAP1\n"


class SnapshotHooks:
    """PySyncObj serializer/deserializer: the table's codec plus raft bookkeeping."""

    def __init__(self, state: AppliedState, durability: Durability, *, fsync: bool) -> None:
        self._state = state
        self._durability = durability
        self._fsync = fsync

    def serialize(self, file_name: str, data: Any) -> None:
        """Write (table, dedupe window, last two entries, cluster) to ``file_name``."""
        last, prev, cluster = data
        self._write(Path(file_name), last, prev, [n.id for n in cluster])

    def deserialize(self, file_name: str) -> tuple[Any, Any, list[Any]]:
        """Install the snapshot; return what PySyncObj needs back."""
        return self._read(Path(file_name))

    def _write(self, path: Path, last: Any, prev: Any, cluster: list[str]) -> None:
        table_bytes, index, seen = self._state.capture()
        header = {
            "v": 1,
            "index": index,
            "last": [bytes(last[0]).hex(), last[1], last[2]],
            "prev": [bytes(prev[0]).hex(), prev[1], prev[2]],
            "cluster": sorted(cluster),
            "seen": seen,
            "table_crc": zlib.crc32(table_bytes),
        }
        head = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
        with path.open("wb") as out:
            out.write(SNAPSHOT_MAGIC + struct.pack(">I", len(head)) + head + table_bytes)
            out.flush()
            if self._fsync:
                os.fsync(out.fileno())
        # PySyncObj renames it into place next; the next journal flush syncs the dir.
        self._durability.dir_dirty = True

    def _read(self, path: Path) -> tuple[Any, Any, list[Any]]:
        data = path.read_bytes()
        if not data.startswith(SNAPSHOT_MAGIC):
            raise ReplicationError(f"{path} is not a route snapshot")
        offset = len(SNAPSHOT_MAGIC)
        (head_len,) = struct.unpack(">I", data[offset : offset + 4])
        header = json.loads(data[offset + 4 : offset + 4 + head_len])
        table_bytes = data[offset + 4 + head_len :]
        if header.get("v") != 1 or zlib.crc32(table_bytes) != header["table_crc"]:
            raise ReplicationError(f"{path}: unsupported or corrupt snapshot")
        table = self._state.table_factory.restore(table_bytes)
        last = (bytes.fromhex(header["last"][0]), header["last"][1], header["last"][2])
        prev = (bytes.fromhex(header["prev"][0]), header["prev"][1], header["prev"][2])
        self._state.install(table, header["seen"], max(int(header["index"]), last[1]))
        return last, prev, [DialNode(addr) for addr in header["cluster"]]
