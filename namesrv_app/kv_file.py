"""Eventual mode's KV config file (upstream ``KVConfigManager`` persistence).

The original NameServer writes its whole KV table to ``kvConfig.json`` after every
put and delete and loads it at start, so ORDER_TOPIC_CONFIG and the rest survive a
restart. In raft mode the Raft log and snapshots persist KV like everything else;
this file is only for eventual mode.

The format is upstream's ``{"configTable":{namespace:{key:value}}}``. As upstream
does, the previous file is kept as ``<path>.bak``; unlike upstream's plain
overwrite, the new content is written to a temporary file, fsynced and renamed, so
a crash never leaves a half-written file.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from remoting.bodies import decode_kv_config_wrapper, encode_kv_config_wrapper

KvNamespaces = dict[str, dict[str, str]]


class KvConfigFile:
    """Load and save one node's KV table."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> KvNamespaces:
        """The saved table; empty when there is no file. A malformed file raises
        ``remoting.errors.BodyDecodeError`` (upstream refuses to start too)."""
        if not self.path.exists():
            return {}
        return decode_kv_config_wrapper(self.path.read_bytes())

    def save(self, namespaces: KvNamespaces) -> None:
        """Replace the file with ``namespaces``, keeping the previous one as ``.bak``."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            shutil.copyfile(self.path, self.path.with_name(self.path.name + ".bak"))
        temporary = self.path.with_name(self.path.name + ".tmp")
        with temporary.open("wb") as out:
            out.write(encode_kv_config_wrapper(namespaces))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.path)
