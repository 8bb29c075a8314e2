"""A leader-change publisher for tests: each raft gateway appends what it saw to a file.

Run inside the gateway process (``NAMESRV_LEADER_PUBLISHER=tests.integration.leader_log.record``)
with ``LEADER_LOG_FILE`` naming that node's file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def record(node_id: str, leader: str | None, term: int) -> None:
    """Append one observation as a JSON line."""
    line = json.dumps({"node_id": node_id, "leader": leader, "term": term})
    with Path(os.environ["LEADER_LOG_FILE"]).open("a", encoding="utf-8") as out:
        out.write(line + "\n")


def read(path: Path) -> list[dict[str, Any]]:
    """Every observation a node recorded, oldest first."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
