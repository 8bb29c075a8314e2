"""Recovery after quorum loss, the Django side: the audit entry and the loud warning.

The launcher (:mod:`localcluster.recover`) and the node supervisor (:mod:`node.force`)
never import Django. The commands that run them, ``cluster recover`` and ``run_node
--force-new-cluster``, record what was forced in the cluster's shared database
(:func:`namesrv_app.audit.record_operation`: every console's audit page lists it) and
say it loudly: a WARNING in the log and a framed block on stderr. A failure to write the
entry is itself loud but not fatal: the recovery has happened by then, and the node must
serve.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError

from namesrv_app import audit
from node import processes
from node.config import NodeConfigError, load_node_config

logger = logging.getLogger(__name__)

AUDIT_ACTION = "force-new-cluster"
RULE = "!" * 78


def record(database_url: str, *, node_id: str, detail: dict[str, Any], result: str) -> str | None:
    """Write the audit entry of a forced new cluster; None, or why it could not be
    written (also logged)."""
    try:
        audit.record_operation(
            database_url,
            node_id=node_id,
            action=AUDIT_ACTION,
            target=node_id,
            detail=detail,
            result=result,
        )
    except (DatabaseError, OSError, ValueError) as exc:
        logger.exception("could not write the audit entry of the forced new cluster on %s", node_id)
        return f"the audit entry could not be written: {exc}"
    return None


def announce(lines: list[str], write: Callable[[str], None]) -> None:
    """Log ``lines`` as one WARNING and ``write`` them framed (a command's stderr)."""
    logger.warning("%s", " | ".join(lines))
    write("\n".join([RULE, *(f"!! {line}" for line in lines), RULE]))


def forced_lines(node_id: str, how: str, state: dict[str, Any], lost: list[str]) -> list[str]:
    """The warning's words: what was forced, from which state, what may be lost."""
    return [
        f"{how}: {node_id} was FORCED into a new one-member raft cluster from its own "
        f"applied state at index {state['index']}, term {state['term']} (read "
        f"{state['taken_at']}, without a barrier: it had no quorum).",
        f"Previous members left behind: {', '.join(lost) or 'none'}.",
        f"Anything the old cluster committed after index {state['index']} is lost (writes "
        "the lost majority acknowledged that this node had not applied).",
        "Grow it back with add-node; never start a lost member again with its old state.",
    ]


def record_local(summary: dict[str, Any], write: Callable[[str], None]) -> None:
    """``cluster recover``: warn, and write the audit entry into the shared database the
    survivor's node.toml names (a local cluster's ``shared.sqlite3``)."""
    node_id = str(summary["survivor"])
    lost = [str(r["raft_addr"]) for r in summary["removed"]]
    lines = forced_lines(node_id, "cluster recover", summary["state"], lost)
    detail = {
        "run_dir": summary["run_dir"],
        "state": {k: summary["state"][k] for k in ("file", "index", "term", "taken_at")},
        "removed": [r["id"] for r in summary["removed"]],
        "previous_members": summary["previous_members"],
        "raft_dir_moved_to": summary["raft_dir_moved_to"],
        "committed": summary["committed"],
    }
    try:
        url = processes.shared_database_url(load_node_config(summary["config"]))
    except (NodeConfigError, OSError, ValueError) as exc:
        failed: str | None = f"the audit entry could not be written: {exc}"
    else:
        failed = record(url, node_id=node_id, detail=detail, result=lines[0])
    announce([*lines, *([failed] if failed else [])], write)
