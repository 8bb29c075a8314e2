"""The Celery app: a worker runs the broker scans, beat schedules one per node.

Beat builds its schedule from the cluster file the launcher writes
(``NAMESRV['CLUSTER_FILE']``, env ``NAMESRV_CLUSTER_FILE``): one
``namesrv_app.tasks.scan_node`` entry per node every ``NAMESRV['SCAN_INTERVAL_S']``
seconds (env ``NAMESRV_SCAN_INTERVAL_S``), each node on its own phase of the period
(see ``PhasedSchedule``). The broker is Redis (``CELERY_BROKER_URL`` from ``REDIS_URL``).

Start them with ``celery -A namesrv_site.celery worker`` and
``celery -A namesrv_site.celery beat`` (``manage.py cluster up`` does).

Every host may run a beat: :class:`SingleActiveScheduler` lets exactly one of them
send scans at a time (a lock in Redis, renewed while it runs), and another takes
over within ``BEAT_LOCK_TIMEOUT_S`` when that host is gone. Each node's scans go
to its own queue (``namesrv.scan.<node>``), which only the worker on that node's
host consumes. When no scan reaches a gateway for three periods (Redis down, no
beat anywhere) the gateway scans by itself and says so in its alarms.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import redis
from celery import Celery
from celery.beat import PersistentScheduler
from celery.schedules import schedstate, schedule

from node.processes import scan_queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "namesrv_site.settings")

SCAN_TASK_NAME = "namesrv_app.tasks.scan_node"
DIVERGENCE_TASK_NAME = "namesrv_app.tasks.check_divergence"

logger = logging.getLogger(__name__)

BEAT_LOCK_KEY = "namesrv:beat:active"
BEAT_LOCK_TIMEOUT_S = 10.0
"""How long the active beat's lock outlives its last renewal: the longest a host's
loss stops the scans before another beat takes over."""
BEAT_STANDBY_RETRY_S = 1.0

# Celery's Django fixup runs Django's system checks when a worker starts and discards
# what they find (celery.fixups.django, validate_models): about 0.5 s of every worker's
# start (they import every URL and view) whose findings nobody sees; `manage.py check`
# in `make test` and each gateway's check of its settings are where they are read.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

app = Celery("namesrv_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.beat_scheduler = "namesrv_site.celery:SingleActiveScheduler"
app.autodiscover_tasks(["namesrv_app"])


class SingleActiveScheduler(PersistentScheduler):  # type: ignore[misc]  # no stubs
    """Celery's own persistent scheduler, active only while it holds the beat lock.

    The lock is a Redis key with a timeout (redis-py's ``Lock``), taken without
    waiting and renewed at every tick; a beat that does not hold it sends
    nothing and tries again every second. A beat that dies leaves the key to
    expire after ``BEAT_LOCK_TIMEOUT_S``. The same idea as celery-redbeat's
    lock, kept on Celery's own scheduler because redbeat stores schedules in
    Redis as JSON and would lose the per-node phases of ``PhasedSchedule``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._lock: Any = None
        self._active: bool | None = None  # unknown until the first tick
        super().__init__(*args, **kwargs)

    def tick(self, *args: Any, **kwargs: Any) -> float:
        if not self._hold_lock():
            return BEAT_STANDBY_RETRY_S
        return float(min(super().tick(*args, **kwargs), BEAT_LOCK_TIMEOUT_S / 3))

    def close(self) -> None:
        """On a clean stop, hand the lock over at once instead of letting it expire."""
        if self._lock is not None and self._active:
            try:
                if self._lock.owned():
                    self._lock.release()
            except redis.RedisError as exc:
                logger.warning("beat lock not released (%s); it expires by itself", exc)
        super().close()

    def _hold_lock(self) -> bool:
        try:
            if self._lock is None:
                client = redis.Redis.from_url(self.app.conf.broker_url)
                self._lock = client.lock(
                    BEAT_LOCK_KEY, timeout=BEAT_LOCK_TIMEOUT_S, thread_local=False
                )
            if self._active and self._lock.owned():
                self._lock.reacquire()
                return True
            active = bool(self._lock.acquire(blocking=False))
        except redis.RedisError as exc:
            active = False
            logger.warning("beat lock unavailable (%s): this beat sends no scans", exc)
        if active != self._active:
            logger.info(
                "this beat is now %s",
                "ACTIVE: it sends the scans"
                if active
                else "on STANDBY: another beat holds the lock",
            )
        self._active = active
        return active


def node_ids_of(cluster_file: Path) -> list[str]:
    """The node ids listed in a cluster file; empty when there is no readable file."""
    try:
        data = json.loads(Path(cluster_file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [str(node["id"]) for node in data.get("nodes", []) if "id" in node]


class PhasedSchedule(schedule):  # type: ignore[misc]  # celery has no stubs
    """Every ``run_every`` seconds, at the instants ``phase_s + k * run_every`` of the epoch.

    A plain interval schedule starts every entry when beat starts, so one beat would
    scan every node on the same tick. RocketMQ's NameServers each run their own
    scan timer, started whenever that node started, so a silent broker leaves the
    nodes' tables one after another, not at once. Giving each node its own phase
    keeps that disagreement window in eventual mode (it is what the experiments
    measure) and spreads the scans' load over the period. Fixed instants also
    mean a late run does not shift the following ones.
    """

    def __init__(
        self,
        run_every: float | timedelta,
        phase_s: float = 0.0,
        nowfun: Callable[[], datetime] | None = None,
        app: Celery | None = None,
    ) -> None:
        super().__init__(run_every, relative=False, nowfun=nowfun, app=app)
        if self.seconds <= 0:
            raise ValueError(f"a scan period must be positive, got {run_every}")
        self.phase_s = float(phase_s) % self.seconds

    def next_after(self, epoch_s: float) -> float:
        """The first instant of this schedule strictly after ``epoch_s``."""
        period = float(self.seconds)
        phase_s = float(self.phase_s)
        return phase_s + (math.floor((epoch_s - phase_s) / period) + 1) * period

    def _now_s(self) -> float:
        return float(self.maybe_make_aware(self.now()).timestamp())

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        last_s = self.maybe_make_aware(last_run_at).timestamp()
        return timedelta(seconds=self.next_after(last_s) - self._now_s())

    def is_due(self, last_run_at: datetime) -> schedstate:
        remaining_s = self.remaining_estimate(last_run_at).total_seconds()
        if remaining_s <= 0:
            now_s = self._now_s()
            return schedstate(is_due=True, next=self.next_after(now_s) - now_s)
        return schedstate(is_due=False, next=remaining_s)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PhasedSchedule):
            return bool(self.run_every == other.run_every and self.phase_s == other.phase_s)
        return NotImplemented

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        return self.__class__, (self.run_every, self.phase_s, self.nowfun)

    def __repr__(self) -> str:
        return f"<freq: {self.human_seconds}, phase {self.phase_s:g}s>"


def build_beat_schedule(node_ids: list[str], interval_s: float) -> dict[str, dict[str, Any]]:
    """One scan entry per node, every ``interval_s`` seconds, the nodes' phases spread evenly.

    Node ``i`` of ``n`` scans at phase ``i * interval_s / n`` (``PhasedSchedule``).
    A scan older than one interval is useless (the next one is already due), so
    each message expires after one interval: a worker that was down does not
    come back to a pile of stale scans.
    """
    if interval_s <= 0:
        raise ValueError(f"NAMESRV['SCAN_INTERVAL_S'] must be positive, got {interval_s}")
    period = float(interval_s)
    entries: dict[str, dict[str, Any]] = {
        f"scan-not-active-broker-{node_id}": {
            "task": SCAN_TASK_NAME,
            "schedule": PhasedSchedule(period, phase_s=index * period / len(node_ids)),
            "args": (node_id,),
            # Each node's scans wait in its own queue for the worker on its host: a
            # scan reaches the gateway through that host's loopback-only port.
            "options": {"expires": period, "queue": scan_queue(node_id)},
        }
        for index, node_id in enumerate(node_ids)
    }
    if len(node_ids) > 1:
        # Once per cluster, not per node: compare every node's digest and tell the
        # consoles when they disagree.
        entries["check-divergence"] = {
            "task": DIVERGENCE_TASK_NAME,
            "schedule": period,
            "options": {"expires": period},
        }
    return entries


@app.on_after_configure.connect  # type: ignore[untyped-decorator]  # celery has no stubs
def _install_beat_schedule(sender: Celery, **_: Any) -> None:
    """Read the cluster file when the app is configured (beat reads the schedule after)."""
    from namesrv_app.conf import namesrv_settings

    cluster_file = namesrv_settings().CLUSTER_FILE
    node_ids = node_ids_of(Path(cluster_file)) if cluster_file else []
    if not node_ids:
        logger.warning("no nodes in cluster file %r: beat schedules no broker scan", cluster_file)
    sender.conf.beat_schedule = build_beat_schedule(node_ids, namesrv_settings().SCAN_INTERVAL_S)
