"""Audit entries of the ``cluster`` verbs that change a local cluster from a shell.

``cluster add-node``, ``remove-node`` and ``up --restore`` change the cluster's
membership or state; ``cluster recover`` forces a new one (:mod:`namesrv_app.recovery`,
which also says it loudly). Each writes one entry, refusals included with their reason,
into the cluster's shared database (the one its nodes' node.toml name: a local
cluster's ``shared.sqlite3``), so every console's Audit page lists it beside the
console's and the API's changes. The user is the shell's account, the channel ``cli``.
The launcher itself never imports Django; the command writes the entry after it. A run
folder that holds no node yet has no database to write to, so a refusal there (a
mistyped ``--run-dir``) is not recorded.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from django.db import DatabaseError

from localcluster.argv import NODE_CONFIG_FILE_NAME
from localcluster.lifecycle import known_node_ids
from namesrv_app import audit
from node import processes
from node.config import NodeConfigError, load_node_config

logger = logging.getLogger(__name__)


def _database_url(run_dir: Path) -> str | None:
    """The shared database of ``run_dir``'s cluster: its first node's node.toml says."""
    for node_id in known_node_ids(run_dir):
        config = run_dir / node_id / NODE_CONFIG_FILE_NAME
        if config.is_file():
            try:
                return processes.shared_database_url(load_node_config(config))
            except (NodeConfigError, OSError, ValueError):
                return None
    return None


def record(
    run_dir: Path,
    *,
    node_id: str,
    action: str,
    target: str,
    detail: dict[str, Any],
    result: str,
    ok: bool,
) -> str | None:
    """Write the entry of one ``cluster`` verb; None, or why it could not be written
    (None too when the run folder holds no node: there is no database to write to)."""
    url = _database_url(run_dir.resolve())
    if url is None:
        return None
    try:
        audit.record_operation(
            url,
            node_id=node_id,
            action=action,
            target=target,
            detail={"run_dir": str(run_dir.resolve()), **detail},
            result=result,
            ok=ok,
        )
    except (DatabaseError, OSError, ValueError) as exc:
        logger.exception("could not write the audit entry of %s %s", action, target)
        return f"the audit entry could not be written: {exc}"
    return None
