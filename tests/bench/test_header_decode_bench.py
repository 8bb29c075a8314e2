"""bench/header_decode.py still runs: at its small scale, producing real numbers for headers
and generic bodies."""

from __future__ import annotations

import dataclasses
import math

import pytest

from bench import header_decode

# An eighth of a MiB of body per shape and one timing each: a couple of seconds.
TINY_SCALE = dataclasses.replace(
    header_decode.SCALES["small"], body_bytes=128 * 1024, header_repeats=1, body_repeats=1
)


def test_header_decode_bench_times_every_header_and_body_shape(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = header_decode.run(TINY_SCALE)

    assert len(report.headers) == len(header_decode.header_shapes()) + 3
    assert len(report.bodies) == len(header_decode.body_shapes(TINY_SCALE.body_bytes)) + 1
    for row in report.headers + report.bodies:
        assert row.best_ms > 0 and math.isfinite(row.median_ms), row
        assert row.outcome == "read" or row.outcome.startswith("refused: "), row
    issue = report.headers[2]
    assert issue.outcome.startswith("refused: header of 8388608 bytes exceeds the limit")
    header_decode.print_report(report)
    out = capsys.readouterr().out
    assert "one body through fastjson.loads" in out
    assert "REGISTER_BROKER" not in out  # bench/body_decode.py measures those bodies
