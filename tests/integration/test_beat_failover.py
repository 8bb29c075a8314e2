"""Two Celery beats on one Redis: exactly one sends the scans; when its host dies (SIGKILL),
the other takes over within the lock's timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from localcluster.argv import beat_argv
from namesrv_site.celery import BEAT_LOCK_TIMEOUT_S
from tests.integration.cluster_fixtures import PROJECT_DIR, start_cluster, stop_cluster
from tests.waiting import wait_until
from tools import process_facts

pytestmark = pytest.mark.slow
SENT = "Sending due task"
POLL_S = 0.25


def _environ(pid: int) -> dict[str, str]:
    return process_facts.environment(pid)


def _sent(log: Path) -> int:
    try:
        return log.read_text(encoding="utf-8", errors="replace").count(SENT)
    except OSError:
        return 0


def test_only_one_beat_is_active_and_another_takes_over(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    summary = start_cluster(run_dir, nodes=1, env={"NAMESRV_SCAN_INTERVAL_S": "1"})
    first_pid = int(summary["celery"]["beat_pid"])
    first_log = run_dir / "celery" / "beat.log"
    second_log = tmp_path / "second-beat.log"
    (tmp_path / "second" / "celery").mkdir(parents=True, exist_ok=True)
    # The second "host": the same Redis and settings, a schedule file of its own.
    with second_log.open("ab") as log:
        second = subprocess.Popen(
            beat_argv(tmp_path / "second"),
            cwd=PROJECT_DIR,
            env=_environ(first_pid),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(
            lambda: "STANDBY" in second_log.read_text(errors="replace"),
            what=lambda: (
                f"STANDBY in the second beat's log:\n{second_log.read_text(errors='replace')}"
            ),
            timeout_s=30,
            interval_s=POLL_S,
        )
        before = (_sent(first_log), _sent(second_log))
        time.sleep(4.0)
        assert _sent(first_log) > before[0]  # the first beat keeps scanning
        assert _sent(second_log) == 0  # the second one waits

        os.kill(first_pid, signal.SIGKILL)  # the first host is gone: its lock expires
        lost_at = time.monotonic()
        wait_until(
            lambda: _sent(second_log) > 0,
            what=lambda: (
                f"a scan sent by the second beat:\n{second_log.read_text(errors='replace')}"
            ),
            timeout_s=BEAT_LOCK_TIMEOUT_S + 10,
            interval_s=POLL_S,
        )
        assert time.monotonic() - lost_at <= BEAT_LOCK_TIMEOUT_S + 10
        assert "ACTIVE" in second_log.read_text(errors="replace")
    finally:
        second.terminate()
        second.wait(timeout=30)
        stop_cluster(run_dir)
