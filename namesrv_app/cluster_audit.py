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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db import DatabaseError

from localcluster.argv import NODE_CONFIG_FILE_NAME
from localcluster.lifecycle import known_node_ids
from localcluster.membership import cluster_add_node, cluster_remove_node
from localcluster.plan import LauncherError
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


Summary = dict[str, Any]
Outcome = tuple[str, dict[str, Any], str]
"""What a successful verb's entry says: (target, detail, result)."""


def _audited(
    run_dir: Path,
    write: Callable[[str], None],
    *,
    action: str,
    target: str,
    detail: dict[str, Any],
    run: Callable[[], Summary],
    outcome: Callable[[Summary], Outcome],
) -> Summary:
    """``run()`` with one entry for it: its refusal (``target``, ``detail`` and the
    error, then raised again) or ``outcome(summary)``. A failure to write the entry is
    ``write``-n (a command's stderr): the change itself happened, or was refused."""
    try:
        summary = run()
    except LauncherError as exc:
        _entry(run_dir, write, action, (target, detail, str(exc)), ok=False)
        raise
    _entry(run_dir, write, action, outcome(summary), ok=True)
    return summary


def _entry(
    run_dir: Path, write: Callable[[str], None], action: str, entry: Outcome, *, ok: bool
) -> None:
    target, detail, result = entry
    failed = record(
        run_dir, node_id=target, action=action, target=target, detail=detail, result=result, ok=ok
    )
    if failed is not None:
        write(failed)


def _members(summary: Summary) -> list[Any]:
    return [n["id"] for n in summary["nodes"]]


def add_node(run_dir: Path, write: Callable[[str], None]) -> Summary:
    """``cluster add-node``, audited; the entry names the node it added."""
    before = set(known_node_ids(run_dir))

    def outcome(summary: Summary) -> Outcome:
        added = next((n for n in summary["nodes"] if n["id"] not in before), None)
        if added is None:
            return "(new node)", {"members": _members(summary)}, "added no node"
        detail = {"members": _members(summary), "raft_addr": added.get("raft_addr")}
        return str(added["id"]), detail, f"added {added['id']}"

    return _audited(
        run_dir,
        write,
        action="cluster add-node",
        target="(new node)",
        detail={},
        run=lambda: cluster_add_node(run_dir),
        outcome=outcome,
    )


def remove_node(run_dir: Path, node_id: str, write: Callable[[str], None]) -> Summary:
    """``cluster remove-node ID``, audited."""
    return _audited(
        run_dir,
        write,
        action="cluster remove-node",
        target=node_id,
        detail={},
        run=lambda: cluster_remove_node(run_dir, node_id),
        outcome=lambda s: (node_id, {"members": _members(s)}, f"removed {node_id}"),
    )


def up_restore(
    run_dir: Path, restore: Path, run: Callable[[], Summary], write: Callable[[str], None]
) -> Summary:
    """``cluster up --restore FILE`` (``run``), audited with the backup's header."""
    return _audited(
        run_dir,
        write,
        action="cluster up --restore",
        target="cluster",
        detail={"file": str(restore)},
        run=run,
        outcome=lambda s: ("cluster", s.get("restored", {}), f"every node started from {restore}"),
    )
