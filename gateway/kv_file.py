"""Eventual mode's KV config file (upstream ``KVConfigManager`` persistence).

The original NameServer writes its whole KV table to ``kvConfig.json`` after every
put and delete and loads it at start, so ORDER_TOPIC_CONFIG and the rest survive a
restart. In raft mode the Raft log and snapshots persist KV like everything else;
this file is only for eventual mode.

The format is upstream's ``{"configTable":{namespace:{key:value}}}``. As upstream
does, the previous file is kept as ``<path>.bak``; unlike upstream's plain
overwrite, the new content is written to a temporary file, fsynced and renamed, so
a crash never leaves a half-written file.

A file over the KV quota (``kvConfigBytesMax``; written before there was one)
does not stop the node: the gateway puts its entries one by one in (namespace,
key) order through the ordinary write path, so the entries that fit are loaded
and the rest are refused by the quota. Nothing is lost for good: :meth:`load`
first copies such a file to ``<path>.over-quota`` and logs a warning naming it,
because the next KV change rewrites ``<path>`` with the loaded entries only.
To get them all back, raise ``kvConfigBytesMax`` (``--config`` or
UPDATE_NAMESRV_CONFIG) and put the missing entries again, or restart with the
copy in place of the file and the higher maximum in ``--config``.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from raftstore.config import DEFAULT_KV_CONFIG_BYTES_MAX
from raftstore.rules import kv_entry_bytes
from remoting.bodies import decode_kv_config_wrapper, encode_kv_config_wrapper

log = logging.getLogger(__name__)

KvNamespaces = dict[str, dict[str, str]]

OVER_QUOTA_SUFFIX = ".over-quota"


class KvConfigFile:
    """Load and save one node's KV table."""

    def __init__(self, path: Path, bytes_max: int = DEFAULT_KV_CONFIG_BYTES_MAX) -> None:
        """The file at ``path``; ``bytes_max`` is the node's ``kvConfigBytesMax``."""
        self.path = path
        self.bytes_max = bytes_max

    @property
    def over_quota_path(self) -> Path:
        """Where a file over the quota is kept as it was when loaded."""
        return self.path.with_name(self.path.name + OVER_QUOTA_SUFFIX)

    def load(self) -> KvNamespaces:
        """The saved table; empty when there is no file. A malformed file raises
        ``remoting.errors.BodyDecodeError`` (upstream refuses to start too).

        A table over ``bytes_max`` is returned whole (the quota then refuses what
        does not fit), after the file is copied to :attr:`over_quota_path`.
        """
        if not self.path.exists():
            return {}
        namespaces = decode_kv_config_wrapper(self.path.read_bytes())
        total_bytes = sum(
            kv_entry_bytes(namespace, key, value)
            for namespace, table in namespaces.items()
            for key, value in table.items()
        )
        if total_bytes > self.bytes_max:
            shutil.copyfile(self.path, self.over_quota_path)
            log.warning(
                "KV config file %s holds %d bytes, over kvConfigBytesMax %d: only the entries "
                "that fit are loaded, in (namespace, key) order; the file as it was is kept in "
                "%s. Raise kvConfigBytesMax and put the rest again to restore them.",
                self.path,
                total_bytes,
                self.bytes_max,
                self.over_quota_path,
            )
        return namespaces

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
