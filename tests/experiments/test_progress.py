"""The phase lines of an experiment run: a start and an end line with the elapsed time."""

from __future__ import annotations

import io
import re
import time

import pytest

from experiments.progress import BAR_REFRESH_S, Progress

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


def test_on_a_terminal_every_phase_shows_live_and_a_nested_one_prints_lines_only() -> None:
    out = io.StringIO()
    progress = Progress(stream=out, live=True)
    with progress.phase("analysis", steps=3) as running:
        for _ in range(3):
            running.advance()
        with progress.phase("inner"):
            progress.line("inside the inner phase")
        time.sleep(3 * BAR_REFRESH_S)
    assert running.done == 3
    assert progress.shown == ["analysis"]
    assert re.search(
        STAMP + r"inside the inner phase\n" + STAMP + r"inner done in \d+\.\d s", out.getvalue()
    )
    assert progress.lines[-1].endswith("s") and "analysis done in" in progress.lines[-1]
