"""What an experiment run prints while it works: one line when a phase starts and one when
it ends (with its elapsed time), and a live bar for the long phases on a terminal.

    [   0.0 s] cluster boot (eventual, 3 nodes) ...
    [   6.2 s] cluster boot done in 6.2 s
    [  13.9 s] fault injected at t=7.5 s: asymmetric_partition n1

On a terminal every phase also shows live (rich): the recording as a bar that fills with
the run's timeline, the Spark analysis as a bar of jobs, the others as a spinner with the
elapsed time; anywhere else (a log file, a pipe, the console's detached launch) only the
plain lines are written, so logs stay readable.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

BAR_REFRESH_S = 0.25


class Progress:
    """Phase lines with elapsed times; thread-safe (Spark jobs report from a thread)."""

    def __init__(
        self,
        write: Callable[[str], None] | None = None,
        *,
        live: bool | None = None,
        stream: TextIO | None = None,
    ) -> None:
        # None: whatever sys.stdout is when a line is written (a live bar redirects it so
        # that lines print above the bar).
        self._stream = stream
        self._write = write or self._print
        self.live = (stream or sys.stdout).isatty() if live is None else live
        self._began = time.monotonic()
        self._lock = threading.Lock()
        self._live_busy = False
        self.lines: list[str] = []
        self.shown: list[str] = []
        """Phases that had a live display (tests read it)."""

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
    def phase(
        self, name: str, *, total_s: float | None = None, steps: int | None = None
    ) -> Iterator[Phase]:
        """Announce ``name``, run the block, then say how long it took (or that it failed).

        On a terminal the phase shows live: a bar that fills with time when its duration
        is known (``total_s``), a bar of ``steps`` advanced by :meth:`Phase.advance`, or
        else a spinner with the elapsed time. One live display at a time: a phase inside
        another prints its lines only.
        """
        self.line(f"{name} ...")
        began = time.monotonic()
        handle = Phase(steps or 0)
        bar = None
        if self.live and not self._live_busy:
            self._live_busy = True
            bar = threading.Thread(
                target=self._show, args=(name, total_s, handle), name="progress-bar", daemon=True
            )
            bar.start()
        try:
            yield handle
        except BaseException:
            self._end_live(bar, handle)
            self.line(f"{name} failed after {time.monotonic() - began:.1f} s")
            raise
        self._end_live(bar, handle)
        self.line(f"{name} done in {time.monotonic() - began:.1f} s")

    def _end_live(self, bar: threading.Thread | None, handle: Phase) -> None:
        handle.stop.set()
        if bar is not None:
            bar.join()
            self._live_busy = False

    def _show(self, name: str, total_s: float | None, handle: Phase) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress as RichProgress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
        if total_s:
            columns += [
                BarColumn(),
                TextColumn("{task.completed:.0f}/{task.total:.0f} s"),
                TimeRemainingColumn(),
            ]
        elif handle.steps:
            columns += [BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
        else:
            columns.append(TimeElapsedColumn())
        console = Console(file=self._stream) if self._stream is not None else None
        began = time.monotonic()
        with RichProgress(*columns, console=console, transient=True) as bar:
            task = bar.add_task(name, total=total_s or handle.steps or None)
            while not handle.stop.wait(BAR_REFRESH_S):
                done = min(total_s, time.monotonic() - began) if total_s else handle.done
                bar.update(task, completed=done)
            self.shown.append(name)


class Phase:
    """The running phase: ``advance()`` moves a bar of steps by one."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.done = 0
        self.stop = threading.Event()

    def advance(self) -> None:
        """One more step done."""
        self.done += 1


def silent() -> Progress:
    """A reporter that keeps its lines but writes nowhere (tests, library use)."""
    return Progress(lambda _text: None, live=False)
