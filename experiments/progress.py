"""What an experiment run prints while it works: one line when a phase starts and one when
it ends (with its elapsed time), and a live bar for the long phases on a terminal.

    [   0.0 s] cluster boot (eventual, 3 nodes) ...
    [   6.2 s] cluster boot done in 6.2 s
    [  13.9 s] fault injected at t=7.5 s: asymmetric_partition n1

On a terminal the recording phase also shows a bar (rich) that fills with the run's
timeline; anywhere else (a log file, a pipe, the console's detached launch) only the
plain lines are written, so logs stay readable.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

BAR_REFRESH_S = 0.25


class Progress:
    """Phase lines with elapsed times; thread-safe (Spark jobs report from a thread)."""

    def __init__(self, write: Callable[[str], None] | None = None, *,
                 live: bool | None = None, stream: TextIO | None = None) -> None:
        # None: whatever sys.stdout is when a line is written (a live bar redirects it so
        # that lines print above the bar).
        self._stream = stream
        self._write = write or self._print
        self.live = (stream or sys.stdout).isatty() if live is None else live
        self._began = time.monotonic()
        self._lock = threading.Lock()
        self.lines: list[str] = []

    def _print(self, text: str) -> None:
        stream = self._stream or sys.stdout
        stream.write(text + "\n")
        stream.flush()

    def elapsed(self) -> float:
        """Seconds since this reporter was made."""
        return time.monotonic() - self._began

    def line(self, text: str) -> None:
        """Write one line, stamped with the seconds since the start."""
        stamped = f"[{self.elapsed():7.1f} s] {text}"
        with self._lock:
            self.lines.append(stamped)
            self._write(stamped)

    @contextlib.contextmanager
    def phase(self, name: str, *, total_s: float | None = None) -> Iterator[None]:
        """Announce ``name``, run the block, then say how long it took (or that it failed).

        ``total_s`` (a known duration) adds a live bar on a terminal.
        """
        self.line(f"{name} ...")
        began = time.monotonic()
        stop = threading.Event()
        bar = None
        if self.live and total_s:
            bar = threading.Thread(target=self._bar, args=(name, total_s, stop),
                                   name="progress-bar", daemon=True)
            bar.start()
        try:
            yield
        except BaseException:
            stop.set()
            if bar is not None:
                bar.join()
            self.line(f"{name} failed after {time.monotonic() - began:.1f} s")
            raise
        stop.set()
        if bar is not None:
            bar.join()
        self.line(f"{name} done in {time.monotonic() - began:.1f} s")

    def _bar(self, name: str, total_s: float, stop: threading.Event) -> None:
        from rich.progress import BarColumn, TimeRemainingColumn
        from rich.progress import Progress as RichProgress

        began = time.monotonic()
        with RichProgress("[progress.description]{task.description}", BarColumn(),
                          "{task.completed:.0f}/{task.total:.0f} s", TimeRemainingColumn(),
                          transient=True) as bar:
            task = bar.add_task(name, total=total_s)
            while not stop.wait(BAR_REFRESH_S):
                bar.update(task, completed=min(total_s, time.monotonic() - began))


def silent() -> Progress:
    """A reporter that keeps its lines but writes nowhere (tests, library use)."""
    return Progress(lambda _text: None, live=False)
