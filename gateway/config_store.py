"""Eventual mode's ``configStorePath``: accepted UPDATE_NAMESRV_CONFIGs survive a restart.

Upstream's ``Configuration.update`` persists the merged config to ``configStorePath``
after every accepted update. Here eventual mode does the same (Java properties text,
written to a temporary file, fsynced and renamed, so a crash never leaves half a
file) and the gateway reloads it at start, over its ``--config`` file. Raft mode needs
no such file: the Raft log and its snapshots are the store.

Only replicated keys are written: the per-process ones (``NODE_KEYS``: the port, the
idle time, the paths, the scan period) belong to each node's start config.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from raftstore.commands import Command
from raftstore.config import NODE_KEYS, NamesrvConfig
from raftstore.replicator import Replicator
from raftstore.results import ApplyResult
from remoting.properties import decode_properties, encode_properties

log = logging.getLogger(__name__)


class ConfigStoreError(ValueError):
    """The stored config cannot be read or does not hold a valid config."""


class ConfigStoreFile:
    """Load and save one node's accepted NamesrvConfig updates."""

    def __init__(self, path: Path) -> None:
        """The file at ``path`` (it need not exist yet)."""
        self.path = path

    def load(self) -> dict[str, str]:
        """The stored replicated properties; empty when there is no file.

        ConfigStoreError, naming the file, when it does not read or parse.
        """
        if not self.path.exists():
            return {}
        try:
            stored = decode_properties(self.path.read_bytes())
            NamesrvConfig().updated(stored).validate()
        except (OSError, ValueError) as exc:
            raise ConfigStoreError(f"configStorePath {self.path}: {exc}") from exc
        return {key: value for key, value in stored.items() if key not in NODE_KEYS}

    def save(self, config: NamesrvConfig) -> None:
        """Replace the file with ``config``'s replicated properties."""
        properties = {
            key: value for key, value in config.to_properties().items() if key not in NODE_KEYS
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(self.path.name + ".tmp")
        with temporary.open("wb") as out:
            out.write(encode_properties(properties, escape=True))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.path)


def persist_config_updates(replicator: Replicator, store: ConfigStoreFile) -> None:
    """Save the config to ``store`` after every apply that changed it."""

    def save_after_config_change(_command: Command, result: ApplyResult) -> None:
        # On the apply path, as upstream persists inside update: an update
        # acknowledged to the caller is on disk.
        if result.changes.config:
            store.save(replicator.read(lambda table: table.config))

    replicator.subscribe(save_after_config_change)
    log.info("NamesrvConfig updates persisted in %s", store.path)
