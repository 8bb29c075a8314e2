"""bench/body_decode.py still runs: at a tiny scale, producing real numbers, with every
kind's attacks refused and its real and within-the-limits bodies read."""

from __future__ import annotations

import dataclasses
import math

import pytest

from bench import body_decode

# An eighth of a MiB of REGISTER_BROKER body per shape and one timing each.
TINY_SCALE = dataclasses.replace(body_decode.SCALES["small"], register_bytes=128 * 1024, repeats=1)


def test_body_decode_bench_times_every_kind_against_its_real_body(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = body_decode.run(TINY_SCALE)

    assert {row.kind for row in report.rows} == set(body_decode.DECODERS)
    for row in report.rows:
        assert row.cpu_ms > 0 and math.isfinite(row.times_real), row
        assert row.outcome.split(":")[0] in ("read", "refused", "failed"), row
        if row.role == "real":
            assert row.outcome == "read" and row.times_real == 1, row
        # bench/register_shapes.py's shapes too: none is past a limit it says it is within
        assert (row.outcome == "read") == (row.role != "past"), row
        if "the issue's" in row.name:
            assert row.outcome.startswith("refused") and row.cpu_ms < 50, row
    assert all(0 < cpu_ms < 50 for _part, _bytes, cpu_ms in report.parts), report.parts
    body_decode.print_report(report)
    out = capsys.readouterr().out
    assert "the costliest body within every limit, a byte, against a real one" in out
