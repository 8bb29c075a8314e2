"""Where the start-up time of a local cluster goes: a breakdown, each row in seconds.

Three parts, each optional (``--parts``), each with a floor or baseline measured in the
same run where one exists:

1. **cluster**: ``manage.py cluster up --mode raft`` of an empty 3-node cluster on free
   ports, until it returns ready, then ``cluster down``, four times: a fresh run folder
   with no template to copy (the baseline: migrate and collectstatic run), a fresh one
   copying the templates the first left (``node.preparation``), the second folder again
   (a restart: stamped, nothing to prepare), and again with its stamps removed (the
   baseline: the commands run with nothing to change). The launcher records no timings
   of its own, so a watcher thread polls the run folder every ``POLL_S`` while ``up``
   runs and puts each process on the same clock: spawned (the start time the kernel
   keeps, from the pid file the launcher writes), ready (the gateway's ready file
   written, its mtime; the web port accepting a connection; Redis's, the worker's and
   beat's log saying so). The launcher's own ``migrate`` and ``collectstatic`` children
   are timed too (found under the ``up`` process, spawn to exit); they run between
   Redis ready and the first gateway spawned.
2. **fixed**: what every process pays before it serves, each a fresh interpreter timed
   from outside (best and median of ``--repeats``): ``python -c pass`` and ``import
   django`` (the floors), ``django.setup()``, the web app (``namesrv_site.asgi``), the
   gateway's imports with and without Django, the Celery app, ``migrate`` of both
   databases on an empty and on an up-to-date folder, ``collectstatic`` into an empty
   and a filled folder. ``--importtime`` adds the costliest packages to import of the
   web app, the gateway command and the Celery app (``python -X importtime``).
3. **table**: a launched 3-node raft cluster; ``cluster restart n1`` holding two topics
   a broker (the baseline), then ``--brokers`` brokers register ``--topics`` topics (each topic
   served by one broker) and n1 is restarted again: the seconds from the new gateway
   process's start until n1 answers the last topic, and until a sweep has had every
   topic answered (the sweep's own duration is printed beside it). The issue's target:
   every route within 3 s of the process starting.

The machine is shared (a CI run may use it at the same time): compare each row with its
same-run floor, not with another day's figures.

Run: ``.venv/bin/python -m bench.startup [--parts cluster,fixed,table] [--repeats 3]
[--topics 5000] [--brokers 20] [--importtime] [--json FILE]``; ``--parts cluster,fixed
--repeats 1`` is the quick one (about a minute on a quiet machine).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import _util
from localcluster.processes import process_start_ticks, read_pid_file
from localcluster.readiness import accepts_connections
from localcluster.run_folder import process_slots
from localcluster.run_secrets import BROKER_ACCESS_KEY, read_run_secrets
from node import preparation
from remoting import acl
from remoting.acl import Credentials
from remoting.blocking import BlockingClient
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.frame import FrameDecoder, encode_frame
from tools.cli import ExactArgumentParser

PARTS = ("cluster", "fixed", "table")
NODE_IDS = ("n1", "n2", "n3")
POLL_S = 0.02
CLI_TIMEOUT_S = 300.0
ROUTE_WAIT_S = 120.0
REQUEST_TIMEOUT_S = 5.0
PIPELINE_DEPTH = 256
"""Route requests a sweep sends before it reads their answers."""
CLK_TCK = os.sysconf("SC_CLK_TCK")
FREE_PORTS = tuple(
    f"--{key}=0"
    for key in (
        "base-port",
        "web-base-port",
        "internal-base-port",
        "redis-port",
        "metrics-base-port",
        "raft-base-port",
    )
)
UP_ARGV = (sys.executable, "manage.py", "cluster", "up", "--mode", "raft")
LINGER_S = 20.0
"""How long the watcher goes on after ``up`` returned, for a process not ready by then."""
LOG_MARKS = {
    "redis": b"Ready to accept connections",
    "worker": b" ready.",
    "beat": b"beat: Starting...",
}
"""What each process's log says when it is ready (what the launcher waits for, for the
worker; beat is not waited for by the launcher, its line is the closest to ready)."""
READY_WHAT = {
    "redis": "log: ready to accept connections",
    "gateway": "ready file written (mtime)",
    "web": "web port accepts a connection",
    "worker": "log: ready.",
    "beat": "log: beat: Starting...",
}


def _now_boot_s() -> float:
    """Seconds since boot on the clock the kernel's process start times use."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


# ---------------------------------------------------------------------- part 1


@dataclass
class Seen:
    """One managed process of a cluster as the watcher saw it (seconds after the start)."""

    name: str
    kind: str
    spawned_s: float | None = None
    ready_s: float | None = None


@dataclass
class Watcher:
    """Polls a run folder while ``cluster up`` runs; every time on one clock, in seconds
    after :attr:`start_boot_s` (the moment the ``up`` command was started)."""

    run_dir: Path
    start_boot_s: float = 0.0
    start_wall_s: float = 0.0
    seen: dict[str, Seen] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _log_from: dict[str, int] = field(default_factory=dict)
    _web_ports: dict[str, int] = field(default_factory=dict)
    launcher_pid: int | None = None
    """The ``up`` process, whose short-lived children (migrate, collectstatic) are timed."""
    helpers: dict[int, Seen] = field(default_factory=dict)

    def start(self) -> None:
        """Note the clocks and the logs' current ends (a restart appends), then poll."""
        self.start_boot_s = _now_boot_s()
        self.start_wall_s = time.time()
        for slot in process_slots(self.run_dir, NODE_IDS):
            self.seen[slot.name] = Seen(slot.name, slot.kind)
            try:
                self._log_from[slot.name] = slot.log_path.stat().st_size
            except OSError:
                self._log_from[slot.name] = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Poll once more and stop."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._poll()

    def all_ready(self) -> bool:
        """True once every process started so far was seen ready."""
        return all(s.ready_s is not None for s in self.seen.values() if s.spawned_s is not None)

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            self._poll()

    def _poll(self) -> None:
        self._poll_helpers()
        for slot in process_slots(self.run_dir, NODE_IDS):
            seen = self.seen[slot.name]
            if seen.spawned_s is None:
                record = read_pid_file(slot.pid_path)
                ticks = None if record is None else process_start_ticks(record.pid)
                if ticks is not None:
                    seen.spawned_s = ticks / CLK_TCK - self.start_boot_s
            if seen.spawned_s is None or seen.ready_s is not None:
                continue
            seen.ready_s = self._ready_s(slot.name, slot.kind, slot.log_path)

    def _poll_helpers(self) -> None:
        """Note each migrate / collectstatic child of the launcher: its start, and the
        poll that no longer finds it (its end, within ``POLL_S``)."""
        if self.launcher_pid is None:
            return
        polled_s = _now_boot_s() - self.start_boot_s
        pid = self.launcher_pid
        try:
            children = {
                int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            }
        except (OSError, ValueError):
            children = set()
        for child in children - set(self.helpers):
            try:
                argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            words = [a.decode(errors="replace") for a in argv]
            if "migrate" in words:
                name = f"migrate --database {words[-1] if words[-1] else words[-2]}"
            elif "collectstatic" in words:
                name = "collectstatic"
            else:
                continue
            ticks = process_start_ticks(child)
            if ticks is not None:
                self.helpers[child] = Seen(name, "helper", ticks / CLK_TCK - self.start_boot_s)
        for child, seen in self.helpers.items():
            if seen.ready_s is None and child not in children:
                seen.ready_s = polled_s

    def _ready_s(self, name: str, kind: str, log_path: Path) -> float | None:
        """When the process became ready (s after the start); None while it is not."""
        polled_s = _now_boot_s() - self.start_boot_s
        if kind in LOG_MARKS:
            try:
                with log_path.open("rb") as log:
                    log.seek(self._log_from[name])
                    return polled_s if LOG_MARKS[kind] in log.read() else None
            except OSError:
                return None
        node_id = name.split("-")[0]
        if kind == "gateway":
            try:
                written_s = (
                    self.run_dir / node_id / "gateway.ready.json"
                ).stat().st_mtime - self.start_wall_s
            except OSError:
                return None
            # The file's own time is when the gateway wrote it, not when a poll saw it; an
            # older one is the previous run's, not yet removed by this ``up``.
            return written_s if written_s >= 0 else None
        port = self._web_port(node_id)
        return polled_s if port is not None and accepts_connections(port) else None

    def _web_port(self, node_id: str) -> int | None:
        if node_id not in self._web_ports:
            try:
                summary = json.loads((self.run_dir / "cluster.json").read_text())
            except (OSError, ValueError):
                return None
            for node in summary.get("nodes", []):
                self._web_ports[str(node["id"])] = int(node["web_port"])
        return self._web_ports.get(node_id)


def cluster_cli(*args: str) -> tuple[float, str]:
    """``manage.py cluster ARGS`` as a user runs it: the wall seconds and its output."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "manage.py", "cluster", *args],
        cwd=_util.REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"cluster {args[0]} failed:\n{done.stdout}\n{done.stderr}")
    return took, done.stdout


def watched_up(run_dir: Path, env: Mapping[str, str]) -> tuple[float, list[Seen]]:
    """``cluster up --mode raft`` on free ports in ``run_dir``, watched; its wall seconds
    and every process seen (the managed ones, then the launcher's helpers)."""
    watcher = Watcher(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    watcher.start()
    start = time.perf_counter()
    try:
        up = subprocess.Popen(
            [*UP_ARGV, "--run-dir", str(run_dir), *FREE_PORTS],
            cwd=_util.REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        watcher.launcher_pid = up.pid
        out, _ = up.communicate(timeout=CLI_TIMEOUT_S)
        took = time.perf_counter() - start
        # ``up`` may return before a process is ready (a restart's worker: the launcher
        # finds the previous run's "ready." in the appended log); watch a while longer.
        deadline = time.monotonic() + LINGER_S
        while not watcher.all_ready() and time.monotonic() < deadline:
            time.sleep(POLL_S)
    finally:
        watcher.stop()
    if up.returncode != 0:
        raise SystemExit(f"cluster up failed:\n{out.decode(errors='replace')}")
    return took, [*watcher.seen.values(), *watcher.helpers.values()]


def up_rows(label: str, up_s: float, seen: Sequence[Seen]) -> list[tuple[object, ...]]:
    """The breakdown of one ``up``: each step's start and end in seconds, in start order."""
    helpers = [s for s in seen if s.kind == "helper"]
    managed = [s for s in seen if s.kind in READY_WHAT]  # the demo's slot: not started here
    spawned = {s.name: s.spawned_s for s in managed}
    redis_ready = next((s.ready_s for s in managed if s.kind == "redis"), None)
    first_gateway = min((spawned[f"{n}-gateway"] or up_s) for n in NODE_IDS)
    last_ready = max((s.ready_s or 0.0) for s in managed)
    rows: list[tuple[object, ...]] = [
        (
            label,
            "launcher start (Python, Django, run folder) to Redis spawned",
            0.0,
            spawned["redis"],
        ),
    ]
    for item in sorted([*helpers, *managed], key=lambda s: s.spawned_s or 0.0):
        what = "exit" if item.kind == "helper" else READY_WHAT[item.kind]
        rows.append((label, f"{item.name}: spawn to {what}", item.spawned_s, item.ready_s))
    rows += [
        (
            label,
            "migrations + collectstatic in all (Redis ready to first gateway spawned)",
            redis_ready,
            first_gateway,
        ),
        (label, "last process ready to `up` returned (negative: ready after)", last_ready, up_s),
        (label, "`cluster up` in all", 0.0, up_s),
    ]
    return rows


def _span(start: object, end: object) -> object:
    if isinstance(start, float) and isinstance(end, float):
        return end - start
    return "-"


def cluster_part(root: Path) -> dict[str, Any]:
    """Part 1, four ``up``s of a 3-node raft cluster, each followed by ``down``: with no
    template to copy (the baseline: the launcher migrates and collects), a fresh run
    folder copying the templates the first one left, a restart of that folder (stamped:
    nothing to do), and the same restart with its stamps removed (the baseline: migrate
    and collectstatic run with nothing to change)."""
    # A template folder of its own: the first up finds it empty, as a fresh checkout does.
    env = {**os.environ, preparation.TEMPLATES_DIR_ENV: str(root / "templates")}
    cold_dir, run_dir = root / "cold", root / "run"
    ups: dict[str, float] = {}
    downs: dict[str, float] = {}
    rows: list[tuple[object, ...]] = []
    for label, folder in (
        ("first up, no template", cold_dir),
        ("first up", run_dir),
        ("restart", run_dir),
        ("restart, stamps removed", run_dir),
    ):
        if label.endswith("stamps removed"):
            for stamp in folder.rglob(f"*{preparation.STAMP_SUFFIX}"):
                stamp.unlink()
        try:
            ups[label], seen = watched_up(folder, env)
            rows += up_rows(label, ups[label], seen)
        finally:
            downs[label], _ = cluster_cli("down", "--run-dir", str(folder))
    _util.print_table(
        "cluster up/down, 3-node raft cluster, empty (wall s of the command)",
        ("`cluster up`", "up s", "baseline", "baseline s", "ratio", "`down` s"),
        [
            (
                "fresh run folder, templates copied",
                ups["first up"],
                "no template: migrate + collectstatic",
                ups["first up, no template"],
                ups["first up"] / ups["first up, no template"],
                downs["first up"],
            ),
            (
                "same folder again (restart), stamped",
                ups["restart"],
                "stamps removed: migrate + collectstatic",
                ups["restart, stamps removed"],
                ups["restart"] / ups["restart, stamps removed"],
                downs["restart"],
            ),
        ],
    )
    _util.print_table(
        "inside `cluster up`: s after the command started (spawn: the kernel's start time, "
        f"10 ms ticks; ready: polled every {POLL_S * 1000:.0f} ms)",
        ("up", "step", "from s", "to s", "took s"),
        [(*r, _span(r[2], r[3])) for r in rows],
    )
    return {
        "up_s": ups,
        "down_s": downs,
        "steps": [[str(r[0]), str(r[1]), r[2], r[3]] for r in rows],
    }


# ---------------------------------------------------------------------- part 2


def fixed_env(folder: Path) -> dict[str, str]:
    """The environment of an eventual-mode node's processes in ``folder`` (no Redis)."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "namesrv_site.settings",
        "NAMESRV_DEBUG": "false",
        "NAMESRV_MODE": "eventual",
        "NAMESRV_DB_PATH": str(folder / "namesrv.sqlite3"),
        "DATABASE_URL": f"sqlite:///{folder / 'shared.sqlite3'}",
        "NAMESRV_STATIC_ROOT": str(folder / "static"),
        "NAMESRV_LOG_LEVEL": "WARNING",
    }


def timed_run(argv: Sequence[str], env: Mapping[str, str]) -> float:
    """Wall seconds of one run of ``argv`` (fails loudly: a broken row is no figure)."""
    start = time.perf_counter()
    done = subprocess.run(
        list(argv),
        cwd=_util.REPO_ROOT,
        env=dict(env),
        capture_output=True,
        check=False,
        timeout=CLI_TIMEOUT_S,
    )
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr.decode(errors='replace')}")
    return took


PY = sys.executable
MIGRATE = [
    [PY, "manage.py", "migrate", "--noinput", "-v", "0", "--database", database]
    for database in ("default", "projection")
]
COLLECT = [PY, "manage.py", "collectstatic", "--noinput", "-v", "0"]
IMPORTS = {
    "`python -c pass` (floor)": "pass",
    "`import django` (floor)": "import django",
    "`django.setup()` (settings, apps)": "import django; django.setup()",
    "web app: `import namesrv_site.asgi`": "import namesrv_site.asgi",
    "gateway without Django: `import gateway.server`": "import gateway.server",
    "gateway command: setup + `import ...commands.run_gateway`": (
        "import django; django.setup(); import namesrv_app.management.commands.run_gateway"
    ),
    "Celery app: `import namesrv_site.celery`": "import namesrv_site.celery",
}


def _twice(folder: Path, argvs: Sequence[Sequence[str]]) -> tuple[float, float]:
    """Seconds of ``argvs`` in a fresh ``folder``, then of the same again (now up to date)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    env = fixed_env(folder)
    first = sum(timed_run(argv, env) for argv in argvs)
    again = sum(timed_run(argv, env) for argv in argvs)
    return first, again


def fixed_part(root: Path, repeats: int) -> dict[str, Any]:
    """Part 2: every fixed cost, ``repeats`` fresh processes each (interleaved)."""
    samples: dict[str, list[float]] = {}
    env = fixed_env(root / "fixed-imports")
    for _ in range(repeats):
        for label, code in IMPORTS.items():
            samples.setdefault(label, []).append(timed_run([PY, "-c", code], env))
        migrate = _twice(root / "fixed-migrate", MIGRATE)
        samples.setdefault("`migrate` both databases, empty", []).append(migrate[0])
        samples.setdefault("`migrate` both databases, up to date", []).append(migrate[1])
        collect = _twice(root / "fixed-static", [COLLECT])
        samples.setdefault("`collectstatic`, empty folder", []).append(collect[0])
        samples.setdefault("`collectstatic`, filled folder", []).append(collect[1])
    floor = min(samples["`python -c pass` (floor)"])
    django_floor = min(samples["`import django` (floor)"])
    rows = [
        (
            label,
            min(values),
            statistics.median(values),
            min(values) - floor,
            min(values) - django_floor,
        )
        for label, values in samples.items()
    ]
    _util.print_table(
        f"fixed costs before serving: fresh processes, {repeats} each (wall s)",
        ("process", "best s", "median s", "best - `pass` s", "best - `import django` s"),
        rows,
    )
    return {
        label: {"best_s": min(v), "median_s": statistics.median(v), "all_s": v}
        for label, v in samples.items()
    }


def heaviest_imports(code: str, env: Mapping[str, str], top: int) -> list[tuple[str, float]]:
    """The ``top`` costliest packages of ``python -X importtime -c code``: each top-level
    package's own import time (its modules' ``self`` column summed), in s."""
    done = subprocess.run(
        [PY, "-X", "importtime", "-c", code],
        cwd=_util.REPO_ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        check=True,
        timeout=CLI_TIMEOUT_S,
    )
    totals: dict[str, float] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        own, _, name = line.removeprefix("import time:").split("|")
        if not own.strip().isdigit():
            continue  # the header line
        package = name.strip().split(".")[0]
        totals[package] = totals.get(package, 0.0) + int(own) / 1e6
    return sorted(totals.items(), key=lambda item: -item[1])[:top]


def importtime_part(root: Path, top: int = 8) -> dict[str, Any]:
    """``-X importtime`` of the web app, the gateway command and the Celery app."""
    env = fixed_env(root / "fixed-imports")
    figures: dict[str, Any] = {}
    rows = []
    for label in (
        "web app: `import namesrv_site.asgi`",
        "gateway command: setup + `import ...commands.run_gateway`",
        "Celery app: `import namesrv_site.celery`",
    ):
        heavy = heaviest_imports(IMPORTS[label], env, top)
        figures[label] = heavy
        rows += [(label, package, seconds) for package, seconds in heavy]
    _util.print_table(
        f"costliest packages to import (python -X importtime, one run; the {top} largest: "
        "the own time of the package's modules summed, s)",
        ("process", "package", "s"),
        rows,
    )
    return figures


# ---------------------------------------------------------------------- part 3


def _register_all(addr: str, topic_count: int, brokers: int, broker: Credentials) -> None:
    """``brokers`` brokers register ``topic_count`` topics in all, each topic served by
    one, signed with the run's broker account (the launched cluster's ACL is on)."""
    per_broker = topic_count // brokers
    with BlockingClient(addr, timeout_s=REQUEST_TIMEOUT_S) as client:
        for index in range(brokers):
            wrapper = _util.topic_wrapper(_util.broker_topics(index, per_broker, topic_count))
            answer = client.invoke(acl.sign(_util.register_request(index, wrapper), broker))
            if answer.code != ResponseCode.SUCCESS:
                raise SystemExit(f"registration {index} refused: {answer.remark}")


def _routes(addr: str, topics: Sequence[str]) -> bool:
    """True when ``addr`` answers every one of ``topics`` with a route.

    The requests go out together on one connection (pipelined, as a client with many
    topics sends them), so a sweep of 5,000 topics costs the node's answers, not 5,000
    round trips of this poller."""
    host, _, port = addr.rpartition(":")
    decoder = FrameDecoder()
    answers: list[RemotingCommand] = []
    try:
        with socket.create_connection((host, int(port)), timeout=REQUEST_TIMEOUT_S) as sock:
            # In batches: all 5,000 at once could fill both socket buffers (the node's
            # answers unread while this side still sends) and stall.
            for first in range(0, len(topics), PIPELINE_DEPTH):
                batch = topics[first : first + PIPELINE_DEPTH]
                sock.sendall(
                    b"".join(
                        encode_frame(dataclasses.replace(_util.route_request(t), opaque=first + i))
                        for i, t in enumerate(batch)
                    )
                )
                wanted = first + len(batch)
                while len(answers) < wanted:
                    data = sock.recv(1 << 16)
                    if not data:
                        return False
                    answers += decoder.feed(data)
    except OSError:
        return False
    return all(answer.code == ResponseCode.SUCCESS for answer in answers)


def _wait_for(check: Callable[[], bool], what: str) -> float:
    """Poll ``check`` every ``POLL_S``; the boot-clock second it first held."""
    deadline = time.monotonic() + ROUTE_WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not within {ROUTE_WAIT_S:.0f} s")
        time.sleep(POLL_S)
    return _now_boot_s()


def timed_restart(run_dir: Path, addr: str, topics: Sequence[str]) -> dict[str, float]:
    """``cluster restart n1`` while n1's remoting port is polled: seconds from the new
    gateway process's start to the last topic answered, and to every topic answered."""
    pid_path = run_dir / "n1" / "gateway.pid"
    old = read_pid_file(pid_path)
    log_path = run_dir / "bench-restart.log"
    with log_path.open("ab") as log:
        restarting = subprocess.Popen(
            [sys.executable, "manage.py", "cluster", "restart", "n1", "--run-dir", str(run_dir)],
            cwd=_util.REPO_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    started = time.perf_counter()
    try:

        def new_gateway() -> bool:
            record = read_pid_file(pid_path)
            if record is not None and (old is None or record.pid != old.pid):
                return True
            if restarting.poll() not in (None, 0):
                raise SystemExit(f"cluster restart n1 failed:\n{log_path.read_text()[-2000:]}")
            return False

        _wait_for(new_gateway, "n1's new gateway")
        record = read_pid_file(pid_path)
        assert record is not None
        spawned = record.start_ticks / CLK_TCK
        last = _wait_for(lambda: _routes(addr, topics[-1:]), "n1 routes the last topic")
        sweep_start = _now_boot_s()
        every = _wait_for(lambda: _routes(addr, topics), "n1 routes every topic")
    finally:
        code = restarting.wait(timeout=CLI_TIMEOUT_S)
    restart_s = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"cluster restart n1 failed (exit {code})")
    return {
        "cluster_restart_s": restart_s,
        "last_topic_s": last - spawned,
        "every_topic_s": every - spawned,
        "sweep_s": every - sweep_start,
    }


def table_part(root: Path, topic_count: int, brokers: int) -> dict[str, Any]:
    """Part 3: n1 restarted holding two topics a broker, then ``topic_count`` topics."""
    run_dir = root / "table-run"
    topics = [_util.topic_name(i) for i in range(topic_count)]
    try:
        _, out = cluster_cli(
            "up", "--mode", "raft", "--run-dir", str(run_dir), "--json", *FREE_PORTS
        )
        summary = json.loads(out.strip().splitlines()[-1])
        addrs = [str(node["remoting_addr"]) for node in summary["nodes"]]
        secrets = read_run_secrets(run_dir)
        broker = Credentials(BROKER_ACCESS_KEY, secrets.broker_secret_file.read_text().strip())
        # Two topics a broker (one alone is upstream's "register broker failed" guard).
        _register_all(addrs[0], 2 * brokers, brokers, broker)
        baseline = [_util.topic_name(i) for i in range(2 * brokers)]
        _wait_for(lambda: _routes(addrs[0], baseline), "n1 routes the baseline topics")
        empty = timed_restart(run_dir, addrs[0], baseline)
        _register_all(addrs[0], topic_count, brokers, broker)
        _wait_for(lambda: _routes(addrs[0], topics), "n1 routes the table")
        full = timed_restart(run_dir, addrs[0], topics)
    finally:
        cluster_cli("down", "--run-dir", str(run_dir))
    base = empty["every_topic_s"]
    _util.print_table(
        f"n1 of a launched 3-node raft cluster restarted (`cluster restart n1`): s from the "
        f"new gateway process's start ({brokers} brokers)",
        (
            "table",
            "`restart` wall s",
            "last topic answered s",
            "every topic answered s",
            "of which the sweep s",
            "ratio",
        ),
        [
            (
                f"{2 * brokers} topics (baseline)",
                empty["cluster_restart_s"],
                empty["last_topic_s"],
                base,
                empty["sweep_s"],
                1.0,
            ),
            (
                f"{topic_count:,} topics",
                full["cluster_restart_s"],
                full["last_topic_s"],
                full["every_topic_s"],
                full["sweep_s"],
                full["every_topic_s"] / base,
            ),
        ],
    )
    return {"empty": empty, "full": full, "topics": topic_count, "brokers": brokers}


# ---------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    parser = ExactArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help=f"comma-separated parts to run, of {', '.join(PARTS)} (default all)",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="fresh processes timed per fixed cost (default 3)"
    )
    parser.add_argument(
        "--topics", type=int, default=5000, help="topics in the table part (default 5000)"
    )
    parser.add_argument(
        "--brokers", type=int, default=20, help="brokers sharing the topics (default 20)"
    )
    parser.add_argument(
        "--importtime",
        action="store_true",
        help="also list the heaviest imports (python -X importtime; default off)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown parts: {', '.join(unknown)}")
    if args.repeats < 1 or args.brokers < 1 or args.topics < 2 * args.brokers:
        parser.error("--repeats and --brokers at least 1, --topics at least 2 x --brokers")
    print(_util.machine_notes())
    figures: dict[str, Any] = {"machine": _util.machine_notes()}
    root = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    try:
        if "cluster" in parts:
            figures["cluster"] = cluster_part(root)
        if "fixed" in parts:
            figures["fixed"] = fixed_part(root, args.repeats)
            if args.importtime:
                figures["importtime"] = importtime_part(root)
        if "table" in parts:
            figures["table"] = table_part(root, args.topics, args.brokers)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load_1m, load_5m, _ = os.getloadavg()
    print(f"\nload average {load_1m:.2f}/{load_5m:.2f} at the end")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
