"""A Spark standalone master and workers on 127.0.0.1, from the pyspark package.

For the analysis at scale (docs/EXPERIMENTS.md, "Run time at full scale") and the
standalone-cluster test. The master and the workers get a bare environment (PATH, HOME,
JAVA_HOME, SPARK_HOME, SPARK_LOCAL_IP; no PYTHONPATH): executors can import the project
only from the code zip the driver ships (``spark_jobs.session``).

    python -m tools.spark_standalone --workers 2 --cores 1 --memory 5g --dir run/spark

prints the master URL and runs until interrupted (Ctrl-C stops the workers, their
executors and the master).
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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark

from tools.cli import ExactArgumentParser
from tools.ports import free_port

SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
HOST = "127.0.0.1"
START_TIMEOUT_S = 60.0
STOP_GRACE_S = (15.0, 5.0)
"""Seconds after SIGTERM, then after SIGKILL, before a daemon is given up on."""


class StartFailed(RuntimeError):
    """A daemon exited or did not come up in time; the message ends with its log."""


def java() -> str | None:
    """The java binary Spark will use, or None."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


def bare_env() -> dict[str, str]:
    """What the master and the workers see: nothing of this project, no PYTHONPATH."""
    binary = java()
    if binary is None:
        raise StartFailed("no java: spark-class cannot start a master")
    env = {
        "PATH": os.pathsep.join([str(Path(binary).parent), os.defpath]),
        "HOME": os.environ.get("HOME", "/tmp"),
        "SPARK_HOME": str(SPARK_HOME),
        # Everything (RPC, block manager, web UIs) binds loopback, not all interfaces.
        "SPARK_LOCAL_IP": HOST,
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    }
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env


def master_state(webui_port: int) -> dict[str, Any] | None:
    """The master's JSON status page, or None while it does not answer."""
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
    """A running master and its workers."""

    url: str
    webui_port: int
    work_dirs: list[Path]
    logs: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def state(self) -> dict[str, Any]:
        """The master's status page (it must be up)."""
        state = master_state(self.webui_port)
        if state is None:
            raise StartFailed("the master's web UI stopped answering")
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


def _wait_for(
    what: str, check: Callable[[], bool], process: subprocess.Popen[bytes], log: Path
) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if check():
            return
        if process.poll() is not None:
            raise StartFailed(f"{what}: process exited with {process.returncode}\n{_tail(log)}")
        time.sleep(0.25)
    raise StartFailed(f"{what}: not within {START_TIMEOUT_S} s\n{_tail(log)}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a daemon and everything it started (a worker's executors)."""
    if process.poll() is not None:
        return
    for sig, grace in zip((signal.SIGTERM, signal.SIGKILL), STOP_GRACE_S, strict=True):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _workers_alive(webui_port: int, count: int) -> Callable[[], bool]:
    return lambda: bool((master_state(webui_port) or {}).get("aliveworkers", 0) >= count)


@contextmanager
def standalone_cluster(
    base: Path, workers: int = 1, cores: int = 1, memory: str = "1g"
) -> Iterator[Cluster]:
    """A master and ``workers`` workers (each ``cores`` cores, ``memory``) on 127.0.0.1,
    logs and work directories under ``base``; stopped on exit."""
    logs = base / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    port, webui_port = free_port(HOST), free_port(HOST)
    url = f"spark://{HOST}:{port}"
    env = bare_env()
    cluster = Cluster(url, webui_port, [base / f"worker-{i}" for i in range(workers)], logs)
    try:
        master_log = logs / "master.log"
        argv = ["--host", HOST, "--port", str(port), "--webui-port", str(webui_port)]
        master = _spawn(["org.apache.spark.deploy.master.Master", *argv], master_log, env)
        cluster.processes.append(master)
        _wait_for("master up", lambda: master_state(webui_port) is not None, master, master_log)
        for index, work_dir in enumerate(cluster.work_dirs):
            log = logs / f"worker-{index}.log"
            worker_args = [
                *("--host", HOST, "--cores", str(cores), "--memory", memory),
                *("--webui-port", str(free_port(HOST)), "--work-dir", str(work_dir), url),
            ]
            worker = _spawn(["org.apache.spark.deploy.worker.Worker", *worker_args], log, env)
            cluster.processes.append(worker)
            _wait_for(
                f"worker {index} registered", _workers_alive(webui_port, index + 1), worker, log
            )
        yield cluster
    finally:
        for process in reversed(cluster.processes):
            _stop(process)


def main(argv: Sequence[str] | None = None) -> int:
    """Start a cluster, print its URL, run until interrupted."""
    parser = ExactArgumentParser(prog="python -m tools.spark_standalone", description=__doc__)
    parser.add_argument("--workers", type=int, default=2, help="workers to start (default: 2)")
    parser.add_argument("--cores", type=int, default=1, help="cores per worker (default: 1)")
    parser.add_argument("--memory", default="4g", help="memory per worker (default: 4g)")
    parser.add_argument(
        "--dir", type=Path, default=Path("run/spark"), help="logs and work directories"
    )
    args = parser.parse_args(argv)
    # SIGTERM leaves through the context manager too, so no daemon outlives this process.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with standalone_cluster(args.dir, args.workers, args.cores, args.memory) as cluster:
        print(cluster.url, flush=True)
        with suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
