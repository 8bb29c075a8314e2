"""``analyze`` on a real Spark standalone cluster whose worker knows nothing of the project.

A master and a two-core worker are started from the pyspark package
(``tools.spark_standalone``, ``spark-class``), on 127.0.0.1 only. The worker gets a bare
environment (PATH, HOME, JAVA_HOME, SPARK_HOME, SPARK_LOCAL_IP; no PYTHONPATH), so its
executors can only import ``spark_jobs`` from the zip the driver ships (before that, they
failed with ``No module named 'spark_jobs'``). The driver is a separate
``python -m spark_jobs.cli analyze`` process, run once against the cluster and once with
``local[2]``; both must write the same tables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from spark_jobs import cli
from spark_jobs.session import APP_NAME, ZIP_PREFIX
from tests.waiting import wait_until
from tools.spark_standalone import (
    HOST,
    Cluster,
    StartFailed,
    bare_env,
    java,
    standalone_cluster as standalone_cluster_of,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.integration,
    pytest.mark.serial,
    pytest.mark.timeout(900),
]

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ANALYZE_TIMEOUT_S = 420.0
"""About 70 s on a quiet machine."""


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A standalone master and one worker (2 cores, 1 GiB) on 127.0.0.1."""
    if java() is None:
        pytest.skip("no java: spark-class cannot start a master")
    assert "PYTHONPATH" not in bare_env()
    try:
        with standalone_cluster_of(tmp_path, workers=1, cores=2, memory="1g") as cluster:
            yield cluster
    except StartFailed as exc:
        pytest.fail(str(exc))


@dataclass
class Analyze:
    """One ``python -m spark_jobs.cli analyze`` run, its own driver process."""

    master: str
    out: Path
    process: subprocess.Popen[str]
    began: float

    @classmethod
    def start(cls, history: Path, out: Path, master: str) -> Analyze:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["SPARK_LOCAL_IP"] = HOST
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "spark_jobs.cli",
                "analyze",
                "--history",
                str(history),
                "--out",
                str(out),
                "--spark-master",
                master,
            ],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        return cls(master, out, process, time.monotonic())

    def finish(self) -> tuple[str, str, float]:
        """(stdout, stderr, wall seconds) once it succeeded."""
        try:
            stdout, stderr = self.process.communicate(timeout=ANALYZE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            stdout, stderr = self.process.communicate()
            pytest.fail(
                f"analyze on {self.master}: not done in {ANALYZE_TIMEOUT_S} s\n{stderr[-4000:]}"
            )
        wall = time.monotonic() - self.began
        assert self.process.returncode == 0, f"analyze on {self.master} failed:\n{stderr[-4000:]}"
        return stdout, stderr, wall


def _untimed(value: Any) -> Any:
    """``value`` without the checker's wall times (``check_ms_*``), which differ between
    any two runs."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if not k.startswith("check_ms")}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _tables(out: Path) -> dict[str, list[str]]:
    """summary.json's tables, each row canonical JSON without wall times, rows sorted
    (order may differ)."""
    tables = json.loads((out / "summary.json").read_text())
    return {
        name: sorted(json.dumps(_untimed(row), sort_keys=True) for row in rows)
        for name, rows in tables.items()
    }


def test_analyze_on_a_standalone_cluster_matches_local(
    standalone_cluster: Cluster,
    history_root: Path,
    spark: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cluster = standalone_cluster
    # One after the other: on a small machine two drivers side by side save little time
    # and make the printed wall times meaningless.
    cluster_out, cluster_err, cluster_s = Analyze.start(
        history_root, tmp_path / "cluster", cluster.url
    ).finish()
    # The local[2] run of the same history: this process's own (already started) local
    # session, through the same command line.
    began = time.monotonic()
    assert (
        cli.main(["analyze", "--history", str(history_root), "--out", str(tmp_path / "local")]) == 0
    )
    local_s = time.monotonic() - began
    local_out = capsys.readouterr().out
    print(f"\nanalyze wall time: standalone {cluster_s:.1f} s, local[2] {local_s:.1f} s")

    # Spark's JVM logging is quiet by default: not one WARN line reached the terminal.
    noise = [
        line
        for line in cluster_err.splitlines()
        if " WARN " in line or "Setting default log level" in line
    ]
    assert not noise, "\n".join(noise)

    # The work ran in an executor of the worker, which fetched the code zip from the driver.
    [work_dir] = cluster.work_dirs
    app_dirs = sorted(work_dir.glob("app-*"))
    assert len(app_dirs) == 1, f"expected one application on the worker: {app_dirs}"
    executors = [d for d in app_dirs[0].iterdir() if d.is_dir()]
    assert executors, f"no executor directory in {app_dirs[0]}"
    assert any(list(d.glob(f"{ZIP_PREFIX}*.zip")) for d in executors), (
        f"no shipped code zip in {executors}"
    )
    completed = wait_until(
        lambda: [
            app for app in cluster.state().get("completedapps", []) if app.get("name") == APP_NAME
        ],
        what="a completed analysis application on the master",
        timeout_s=15,
        interval_s=0.25,
    )
    assert app_dirs[0].name == completed[0]["id"]

    cluster_tables, local_tables = _tables(tmp_path / "cluster"), _tables(tmp_path / "local")
    # What each ran on: the worker's one executor with its 2 cores, or the driver itself.
    [ran_on_cluster], [ran_locally] = (
        [json.loads(row) for row in tables.pop("spark")]
        for tables in (cluster_tables, local_tables)
    )
    assert (ran_on_cluster["master"], ran_on_cluster["executors"]) == (cluster.url, 1)
    assert ran_on_cluster["cores"] == 2 and ran_on_cluster["shuffle_partitions"] >= 2
    assert (ran_locally["master"], ran_locally["executors"]) == ("local[2]", 0)
    assert cluster_tables.keys() == local_tables.keys()
    assert sum(1 for rows in local_tables.values() if rows) >= 5, local_tables
    for name in local_tables:
        assert cluster_tables[name] == local_tables[name], name
    verdicts = [json.loads(out.splitlines()[-1])["overall"] for out in (cluster_out, local_out)]
    assert verdicts[0] == verdicts[1]
