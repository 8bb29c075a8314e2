"""The phase lines of an experiment run: a start and an end line with the elapsed time."""

from __future__ import annotations

import io
import re

import pytest

from experiments.progress import Progress

STAMP = r"\[\s*\d+\.\d s\] "


def test_a_phase_prints_a_start_line_and_an_end_line_with_its_duration() -> None:
    out = io.StringIO()
    progress = Progress(stream=out, live=False)
    with progress.phase("cluster boot (raft, 3 nodes)"):
        progress.line("fault injected at t=7.5 s: partition n3")
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert re.fullmatch(STAMP + r"cluster boot \(raft, 3 nodes\) \.\.\.", lines[0])
    assert re.fullmatch(STAMP + r"fault injected at t=7\.5 s: partition n3", lines[1])
    assert re.fullmatch(STAMP + r"cluster boot \(raft, 3 nodes\) done in \d+\.\d s", lines[2])
    assert progress.lines == lines


def test_a_failed_phase_says_so_and_the_error_goes_on() -> None:
    said: list[str] = []
    progress = Progress(said.append, live=False)
    with pytest.raises(RuntimeError, match="warm-up"), progress.phase("warm-up"):
        raise RuntimeError("warm-up: the nodes did not agree in time")
    assert said[-1].endswith("s") and "warm-up failed after" in said[-1]


def test_a_stream_that_is_not_a_terminal_gets_no_live_bar() -> None:
    assert Progress(stream=io.StringIO()).live is False
