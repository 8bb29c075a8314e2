"""What the project asks the kernel about a process, through psutil (no /proc parsing).

The local cluster's pid files, the demo brokers' liveness and the benchmarks' CPU
accounting all need the same few facts; psutil reads them (and knows /proc's quirks,
such as a command name holding spaces and parentheses). One action sits with the facts:
ending what a killed process group left behind (:func:`end_orphaned_group`), since it
rests on the same identity checks.
"""

from __future__ import annotations

import contextlib
import os

import psutil

GONE_STATUSES = frozenset({psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD})
"""A process that exited but was not reaped yet holds no port and does no work."""


def _running(pid: int) -> psutil.Process | None:
    """``pid`` as a psutil Process, or None when it is gone or a zombie."""
    try:
        process = psutil.Process(pid)
        return None if process.status() in GONE_STATUSES else process
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (the kernel's own count, so a
    record of it survives changes of the wall clock); None when there is no such
    running process. A pid reused by another process gives another number."""
    process = _running(pid)
    if process is None:
        return None
    try:
        since_boot_s: float = process.create_time() - psutil.boot_time()
    except psutil.Error:
        return None
    return round(since_boot_s * os.sysconf("SC_CLK_TCK"))


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid``, all its threads."""
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def thread_cpu_s(pid: int, tid: int) -> float:
    """User + system CPU seconds of thread ``tid`` of process ``pid`` (0.0 once it ended)."""
    for thread in psutil.Process(pid).threads():
        if thread.id == tid:
            return float(thread.user_time + thread.system_time)
    return 0.0


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its direct children (a server's workers)."""
    process = psutil.Process(pid)
    total_s = cpu_s(pid)
    for child in process.children():
        try:
            total_s += cpu_s(child.pid)
        except psutil.NoSuchProcess:
            continue  # a worker that ended between the listing and the reading
    return total_s


def rss_bytes(pid: int) -> int:
    """The resident set size of ``pid``."""
    return int(psutil.Process(pid).memory_info().rss)


def open_fds(pid: int) -> int:
    """How many file descriptors ``pid`` holds open."""
    return int(psutil.Process(pid).num_fds())


def is_running(pid: int) -> bool:
    """True while ``pid`` exists and has not exited (a zombie has)."""
    return _running(pid) is not None


def children(pid: int) -> list[int]:
    """The pids of the direct children of ``pid``."""
    return [child.pid for child in psutil.Process(pid).children()]


def command_line(pid: int) -> list[str]:
    """The argv ``pid`` was started with (empty for a kernel thread, a zombie, or a
    process that ended meanwhile)."""
    try:
        return [str(arg) for arg in psutil.Process(pid).cmdline()]
    except psutil.Error:
        return []


def command_lines() -> list[list[str]]:
    """Every process's argv that this user may read (those that end meanwhile are left out)."""
    lines = []
    for process in psutil.process_iter(["cmdline"]):
        lines.append([str(arg) for arg in process.info["cmdline"] or ()])
    return lines


def environment(pid: int) -> dict[str, str]:
    """The environment ``pid`` was started with."""
    return {str(k): str(v) for k, v in psutil.Process(pid).environ().items()}


def thread_ids(pid: int) -> list[int]:
    """The ids of the threads of ``pid``."""
    return [int(thread.id) for thread in psutil.Process(pid).threads()]


def end_orphaned_group(leader_pid: int, timeout_s: float) -> list[int]:
    """SIGKILL what is left of the process group ``leader_pid`` led, once that leader is
    gone; the pids ended (waited for up to ``timeout_s``).

    A launched process leads its own group, so a SIGKILL of it alone can leave its
    children running and holding its ports (a web server's workers). The group is ours
    only while no process runs as ``leader_pid``: Linux hands a pid out again only once
    no group carries it, so members found then are the dead leader's own. psutil sends
    each signal after checking that the pid still names the process it listed.
    """
    if _running(leader_pid) is not None:
        return []
    leftovers = []
    for process in psutil.process_iter():
        try:
            # A zombie holds nothing; waiting for one that is not our child never ends.
            if os.getpgid(process.pid) == leader_pid and process.status() not in GONE_STATUSES:
                leftovers.append(process)
        except (OSError, psutil.Error):
            continue  # ended between the listing and the question
    for process in leftovers:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(leftovers, timeout=timeout_s)
    return [process.pid for process in leftovers]
