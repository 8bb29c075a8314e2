"""``analyze`` on a real Spark standalone cluster whose worker knows nothing of the project.

A master and a one-core worker are started from the pyspark package (``spark-class``), on
127.0.0.1 only. The worker gets a bare environment (PATH, HOME, JAVA_HOME, SPARK_HOME,
SPARK_LOCAL_IP; no PYTHONPATH), so its executors can only import ``spark_jobs`` from the
zip the driver ships (before that, they failed with ``No module named 'spark_jobs'``).
The driver is a separate ``python -m spark_jobs.cli analyze`` process, run once against
the cluster and once with ``local[2]``; both must write the same tables.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark
import pytest

from spark_jobs import cli
from spark_jobs.session import APP_NAME, ZIP_PREFIX
from tools.ports import free_port

pytestmark = [pytest.mark.slow, pytest.mark.integration]

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
HOST = "127.0.0.1"
START_TIMEOUT_S = 60.0
ANALYZE_TIMEOUT_S = 180.0


def _java() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


def _bare_env() -> dict[str, str]:
    """What the master and the worker see: nothing of this project, no PYTHONPATH."""
    java = _java()
    assert java is not None
    env = {
        "PATH": os.pathsep.join([str(Path(java).parent), os.defpath]),
        "HOME": os.environ.get("HOME", "/tmp"),
        "SPARK_HOME": str(SPARK_HOME),
        # Everything (RPC, block manager, web UIs) binds loopback, not all interfaces.
        "SPARK_LOCAL_IP": HOST,
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    }
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env


def _master_state(webui_port: int) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{webui_port}/json/", timeout=2) as reply:
            state: dict[str, Any] = json.load(reply)
            return state
    except OSError:
        return None


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class Cluster:
    url: str
    webui_port: int
    work_dir: Path
    logs: Path

    def state(self) -> dict[str, Any]:
        state = _master_state(self.webui_port)
        assert state is not None, "the master's web UI stopped answering"
        return state


def _spawn(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(SPARK_CLASS), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=log.parent,
            start_new_session=True,
        )


def _wait_for(what: str, check: Any, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if check():
            return
        if process.poll() is not None:
            pytest.fail(f"{what}: process exited with {process.returncode}\n{_tail(log)}")
        time.sleep(0.25)
    pytest.fail(f"{what}: not within {START_TIMEOUT_S} s\n{_tail(log)}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a daemon and everything it started (the worker's executors)."""
    if process.poll() is not None:
        return
    for sig, grace in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A standalone master and one worker (1 core, 1 GiB) on 127.0.0.1."""
    if _java() is None:
        pytest.skip("no java: spark-class cannot start a master")
    logs = tmp_path / "logs"
    logs.mkdir()
    work_dir = tmp_path / "worker-work"
    port, webui_port, worker_webui = free_port(HOST), free_port(HOST), free_port(HOST)
    url = f"spark://{HOST}:{port}"
    env = _bare_env()
    assert "PYTHONPATH" not in env
    started: list[subprocess.Popen[bytes]] = []
    try:
        master_log = logs / "master.log"
        master = _spawn(
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                HOST,
                "--port",
                str(port),
                "--webui-port",
                str(webui_port),
            ],
            master_log,
            env,
        )
        started.append(master)
        _wait_for("master up", lambda: _master_state(webui_port) is not None, master, master_log)
        worker_log = logs / "worker.log"
        worker = _spawn(
            [
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                HOST,
                "--cores",
                "2",
                "--memory",
                "1g",
                "--webui-port",
                str(worker_webui),
                "--work-dir",
                str(work_dir),
                url,
            ],
            worker_log,
            env,
        )
        started.append(worker)
        _wait_for(
            "worker registered",
            lambda: (_master_state(webui_port) or {}).get("aliveworkers", 0) >= 1,
            worker,
            worker_log,
        )
        yield Cluster(url=url, webui_port=webui_port, work_dir=work_dir, logs=logs)
    finally:
        for process in reversed(started):
            _stop(process)


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


def _tables(out: Path) -> dict[str, list[str]]:
    """summary.json's tables, each row canonical JSON, rows sorted (order may differ)."""
    tables = json.loads((out / "summary.json").read_text())
    return {
        name: sorted(json.dumps(row, sort_keys=True) for row in rows)
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
    app_dirs = sorted(cluster.work_dir.glob("app-*"))
    assert len(app_dirs) == 1, f"expected one application on the worker: {app_dirs}"
    executors = [d for d in app_dirs[0].iterdir() if d.is_dir()]
    assert executors, f"no executor directory in {app_dirs[0]}"
    assert any(list(d.glob(f"{ZIP_PREFIX}*.zip")) for d in executors), (
        f"no shipped code zip in {executors}"
    )
    deadline = time.monotonic() + 15
    while True:
        completed = [
            app for app in cluster.state().get("completedapps", []) if app.get("name") == APP_NAME
        ]
        if completed or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert completed, "the master recorded no completed analysis application"
    assert app_dirs[0].name == completed[0]["id"]

    cluster_tables, local_tables = _tables(tmp_path / "cluster"), _tables(tmp_path / "local")
    assert cluster_tables.keys() == local_tables.keys()
    assert sum(1 for rows in local_tables.values() if rows) >= 5, local_tables
    for name in local_tables:
        assert cluster_tables[name] == local_tables[name], name
    verdicts = [json.loads(out.splitlines()[-1])["overall"] for out in (cluster_out, local_out)]
    assert verdicts[0] == verdicts[1]
