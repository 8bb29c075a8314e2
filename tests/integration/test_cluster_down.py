"""``cluster down`` stops what its pid files recorded, and only that."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from localcluster import launcher
from tests.integration.cluster_fixtures import FREE_PORTS, PROJECT_DIR, cluster_cli
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('up', flush=True); time.sleep(60)"
)
QUIET = "import time; time.sleep(60)"


def redis_slot(run_dir: Path) -> launcher.ProcessSlot:
    """The slot a cluster's Redis records itself in."""
    return next(s for s in launcher.process_slots(run_dir, []) if s.name == "redis")


def wait_for_line(path: Path, text: str, deadline_s: float = 10.0) -> None:
    """Wait until a started process printed ``text`` (its signal handler is then set)."""
    wait_until(lambda: text in path.read_text(), what=f"{text!r} in {path}", timeout_s=deadline_s)


def test_down_leaves_alone_a_process_that_reused_a_recorded_pid(tmp_path: Path) -> None:
    bystander = subprocess.Popen([sys.executable, "-c", QUIET])
    try:
        ticks = launcher.process_start_ticks(bystander.pid)
        assert ticks is not None
        # The pid file names the bystander's pid but another start time: a pid reused.
        stale = launcher.PidRecord("redis", bystander.pid, ticks - 1)
        launcher.write_pid_file(redis_slot(tmp_path).pid_path, stale)

        result = launcher.cluster_down(tmp_path)

        assert result["stopped"] == []
        assert bystander.poll() is None
        assert not redis_slot(tmp_path).pid_path.exists()
    finally:
        bystander.kill()
        bystander.wait()


def test_down_kills_a_process_that_ignores_sigterm_after_the_grace_period(tmp_path: Path) -> None:
    slot = redis_slot(tmp_path)
    record = launcher.start_process(
        "redis",
        [sys.executable, "-c", STUBBORN],
        env={},
        log_path=slot.log_path,
        pid_path=slot.pid_path,
    )
    wait_for_line(slot.log_path, "up")

    result = launcher.cluster_down(tmp_path, grace_s=0.5)
    launcher.reap_children()

    assert result == {"run_dir": str(tmp_path.resolve()), "stopped": ["redis"], "killed": ["redis"]}
    assert not launcher.is_alive(record)
    assert launcher.cluster_status(tmp_path)["processes"] == []


def test_down_from_another_shell_ends_a_foreground_up(tmp_path: Path) -> None:
    """`cluster down` also ends the `cluster up --foreground` (and the `make run` around
    it) instead of leaving it saying "Press Ctrl-C" over a stopped cluster."""
    out = tmp_path / "foreground.out"
    with out.open("w") as sink:
        foreground = subprocess.Popen(
            [
                sys.executable,
                str(PROJECT_DIR / "manage.py"),
                "cluster",
                "up",
                "--nodes",
                "1",
                "--run-dir",
                str(tmp_path / "run"),
                "--foreground",
                *FREE_PORTS,
            ],
            cwd=PROJECT_DIR,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_line(out, "Press Ctrl-C", deadline_s=120.0)
        assert "Press Ctrl-C" in out.read_text(), out.read_text()

        down = cluster_cli("down", "--run-dir", str(tmp_path / "run"))

        assert down.returncode == 0, down.stderr
        assert foreground.wait(timeout=60) == 0
        said = out.read_text()
        assert said.rstrip().endswith("was stopped by `cluster down` from another shell"), said
        assert "nothing was running" not in said
        # The processes the other shell stopped are a stop, not a crash.
        assert " exited; see " not in said, said
        assert not (tmp_path / "run" / "foreground.pid").exists()
        assert not (tmp_path / "run" / launcher.STOPPING_FILE).exists()
    finally:
        if foreground.poll() is None:
            foreground.kill()
            cluster_cli("down", "--run-dir", str(tmp_path / "run"))
