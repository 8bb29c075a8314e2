"""Descriptor limits for tests that run a process out of descriptors on purpose."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Callable, Iterator

from tools import process_facts


@contextlib.contextmanager
def descriptors_left(count: int) -> Iterator[None]:
    """Lower this process's soft descriptor limit so that only about ``count`` new
    descriptors can be opened (one more once the listing's own is closed); the old
    limit is back on exit. Keep the block short: every thread of the process is
    bound by it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = {int(name) for name in os.listdir("/proc/self/fd")}
    limit, free = 0, 0
    while free < count:
        if limit not in in_use:
            free += 1
        limit += 1
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def open_files_max(count: int) -> Callable[[], None]:
    """A ``preexec_fn`` that starts a child process with at most ``count`` open files
    (soft and hard, so the child cannot raise it back)."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))

    return limit


@contextlib.contextmanager
def descriptors_for(count: int) -> Iterator[None]:
    """Raise this process's soft descriptor limit (up to its hard one) so that it can
    hold ``count`` more descriptors; the old limit is back on exit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = process_facts.open_fds(os.getpid()) + count
    assert hard == resource.RLIM_INFINITY or hard >= needed, (
        f"this test needs {needed} open files; the hard limit is {hard}"
    )
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, needed), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
