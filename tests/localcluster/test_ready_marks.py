"""The launcher waits for the Celery worker's "ready." line of this start only: a
restart appends to the same log, and the last run's line must not end the wait."""

from __future__ import annotations

from pathlib import Path

from localcluster.lifecycle import WORKER_READY_MARK, _log_contains, _log_size


def test_a_ready_line_of_an_earlier_run_does_not_count(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    assert _log_size(log) == 0 and not _log_contains(log, WORKER_READY_MARK)
    log.write_bytes(b"[2026-12-06 18:00:00] celery@scan ready.\n[..] warm shutdown\n")
    before = _log_size(log)
    assert _log_contains(log, WORKER_READY_MARK)  # the whole log: the earlier run's line
    assert not _log_contains(log, WORKER_READY_MARK, before)
    with log.open("ab") as out:
        out.write(b"[2026-12-06 18:05:00] celery@scan ready.\n")
    assert _log_contains(log, WORKER_READY_MARK, before)
