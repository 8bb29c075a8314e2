"""Processes of a local cluster: pid files that survive pid reuse, start and stop."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from localcluster.plan import (
    LOG_TAIL_BYTES,
    POLL_INTERVAL_S,
    PROJECT_DIR,
    STOP_GRACE_S,
    LauncherError,
)
from node.files import atomic_write as _atomic_write
from tools import process_facts

# ---------------------------------------------------------------------- processes


@dataclass(frozen=True, slots=True)
class PidRecord:
    """What a pid file holds: enough to recognise the very process we started."""

    name: str
    pid: int
    start_ticks: int
    argv: tuple[str, ...] = ()

    def to_json(self) -> str:
        """The pid file's text."""
        return json.dumps({**asdict(self), "argv": list(self.argv)})


def process_start_ticks(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot, or None when there is no such process.

    Zombies count as gone: a process that exited but was not reaped yet by its
    parent holds no port and does no work.
    """
    return process_facts.start_ticks(pid)


def is_alive(record: PidRecord) -> bool:
    """True when the process of ``record`` still runs (same pid, same start time)."""
    return process_start_ticks(record.pid) == record.start_ticks


def write_pid_file(path: Path, record: PidRecord) -> None:
    """Write ``record`` atomically, so a reader never sees half a file."""
    _atomic_write(path, record.to_json())


def read_pid_file(path: Path) -> PidRecord | None:
    """The record in ``path``, or None when the file is missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return PidRecord(
            name=str(data["name"]),
            pid=int(data["pid"]),
            start_ticks=int(data["start_ticks"]),
            argv=tuple(str(a) for a in data.get("argv", ())),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def start_process(
    name: str,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    log_path: Path,
    pid_path: Path,
    cwd: Path = PROJECT_DIR,
) -> PidRecord:
    """Start ``argv`` in its own session with output to ``log_path`` and record its pid.

    Its own session (and so process group) keeps a terminal's Ctrl-C away from it
    (``down`` stops it in order instead) and lets ``stop_process`` reach any
    children it forks.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    ticks = process_start_ticks(proc.pid)
    if ticks is None:
        raise LauncherError(f"{name} exited at once; see {log_path}:\n{log_tail(log_path)}")
    record = PidRecord(name=name, pid=proc.pid, start_ticks=ticks, argv=tuple(argv))
    write_pid_file(pid_path, record)
    return record


def _signal_group(record: PidRecord, sig: signal.Signals) -> None:
    """Send ``sig`` to the process group of ``record`` if it is still that very process."""
    if not is_alive(record):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(record.pid, sig)


def stop_processes(records: Sequence[PidRecord], grace_s: float = STOP_GRACE_S) -> list[PidRecord]:
    """SIGTERM every record's group, wait up to ``grace_s``, then SIGKILL the stragglers.

    Returns the records that had to be killed.
    """
    for record in records:
        _signal_group(record, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(is_alive(r) for r in records):
        reap_children()
        time.sleep(POLL_INTERVAL_S)
    killed = [r for r in records if is_alive(r)]
    for record in killed:
        _signal_group(record, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(is_alive(r) for r in killed):
        reap_children()
        time.sleep(POLL_INTERVAL_S)
    return killed


def reap_children() -> None:
    """Collect exited children of this process (``up --foreground`` is their parent)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def log_tail(path: Path, size_bytes: int = LOG_TAIL_BYTES) -> str:
    """The last ``size_bytes`` of a log file, for error messages."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - size_bytes))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return "(no log)"
