"""The Celery app: a worker runs the broker scans, beat schedules one per node.

Beat builds its schedule from the cluster file the launcher writes
(``NAMESRV['CLUSTER_FILE']``, env ``NAMESRV_CLUSTER_FILE``): one
``namesrv_app.tasks.scan_node`` entry per node every ``NAMESRV['SCAN_INTERVAL_S']``
seconds (env ``NAMESRV_SCAN_INTERVAL_S``). The broker is Redis
(``CELERY_BROKER_URL`` from ``REDIS_URL``).

Start them with ``celery -A namesrv_site.celery worker`` and
``celery -A namesrv_site.celery beat`` (``manage.py cluster up`` does).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "namesrv_site.settings")

SCAN_TASK_NAME = "namesrv_app.tasks.scan_node"
DIVERGENCE_TASK_NAME = "namesrv_app.tasks.check_divergence"

logger = logging.getLogger(__name__)

app = Celery("namesrv_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["namesrv_app"])


def node_ids_of(cluster_file: Path) -> list[str]:
    """The node ids listed in a cluster file; empty when there is no readable file."""
    try:
        data = json.loads(Path(cluster_file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [str(node["id"]) for node in data.get("nodes", []) if "id" in node]


def build_beat_schedule(node_ids: list[str], interval_s: float) -> dict[str, dict[str, Any]]:
    """One scan entry per node, every ``interval_s`` seconds.

    A scan older than one interval is useless (the next one is already due), so
    each message expires after one interval: a worker that was down does not
    come back to a pile of stale scans.
    """
    if interval_s <= 0:
        raise ValueError(f"NAMESRV['SCAN_INTERVAL_S'] must be positive, got {interval_s}")
    schedule: dict[str, dict[str, Any]] = {
        f"scan-not-active-broker-{node_id}": {
            "task": SCAN_TASK_NAME,
            "schedule": float(interval_s),
            "args": (node_id,),
            "options": {"expires": float(interval_s)},
        }
        for node_id in node_ids
    }
    if len(node_ids) > 1:
        # Once per cluster, not per node: compare every node's digest and tell the
        # consoles when they disagree.
        schedule["check-divergence"] = {
            "task": DIVERGENCE_TASK_NAME,
            "schedule": float(interval_s),
            "options": {"expires": float(interval_s)},
        }
    return schedule


@app.on_after_configure.connect  # type: ignore[untyped-decorator]  # celery has no stubs
def _install_beat_schedule(sender: Celery, **_: Any) -> None:
    """Read the cluster file when the app is configured (beat reads the schedule after)."""
    from namesrv_app.conf import namesrv_settings

    cluster_file = namesrv_settings().CLUSTER_FILE
    node_ids = node_ids_of(Path(cluster_file)) if cluster_file else []
    if not node_ids:
        logger.warning("no nodes in cluster file %r: beat schedules no broker scan", cluster_file)
    sender.conf.beat_schedule = build_beat_schedule(node_ids, namesrv_settings().SCAN_INTERVAL_S)
