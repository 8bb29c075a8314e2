"""Leader SIGKILL to the first acknowledged registration of a new broker, on fresh
raft clusters: the first kill after ``cluster up`` and the ones after it.

Each cluster is three ``run_gateway --mode raft`` processes started together, or with
``--launcher cluster`` what ``manage.py cluster up --mode raft`` starts (gateways with
their read fronts, web processes, Redis, Celery), as a user meets it. After
``--settle-s`` the leader's gateway is SIGKILLed; a broker new to the cluster then sends its
REGISTER_BROKER every 50 ms to each survivor, and the time from the kill to the first
answer 0 is the failover. The killed node is restarted, the cluster converges, and
the next kill takes the new leader (a launched cluster is killed once: its first
failover). Every kill of every cluster is printed (the first
of each cluster apart), with the term the new leader was elected in and how long
each survivor took to see it (NODE_STATUS, polled every 20 ms).

Run: ``.venv/bin/python -m bench.first_failover [--clusters 5] [--kills 3]
[--settle-s 3] [--launcher gateways|cluster]``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import _util
from gateway.private_codes import InternalCode
from remoting.blocking import BlockingClient
from remoting.client import RemotingClientError
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from tools.cli import ExactArgumentParser

INTERNAL_SECRET = "bench-first-failover-secret"
SEND_EVERY_S = 0.05
POLL_S = 0.02
FAILOVER_TIMEOUT_S = 20.0
_brokers = itertools.count(1)


@dataclass
class Member:
    """One node as the bench sees it: where it answers, and its gateway's process."""

    node_id: str
    addr: str
    internal_port: int
    secret: str
    pid: int

    def kill(self) -> None:
        """SIGKILL the gateway. Its sockets close as it exits; the bench does not wait
        for it to be reaped (a launched gateway's parent is init, which may take a
        second: that is no part of the failover)."""
        os.kill(self.pid, signal.SIGKILL)


def _members(gateways: list[_util.BenchGateway]) -> list[Member]:
    return [
        Member(g.node_id, g.addr, g.internal_port, INTERNAL_SECRET, g.proc.pid)
        for g in gateways
        if g.proc.poll() is None
    ]


def _status(member: Member) -> dict[str, Any] | None:
    request = RemotingCommand.request(int(InternalCode.NODE_STATUS), {"secret": member.secret})
    try:
        with BlockingClient(f"127.0.0.1:{member.internal_port}", timeout_s=2.0) as client:
            answer = client.invoke(request)
    except (OSError, RemotingClientError):
        return None
    if answer.code != ResponseCode.SUCCESS or answer.body is None:
        return None
    status: dict[str, Any] = json.loads(answer.body)
    return status


def _leader(members: list[Member], timeout_s: float = 30.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for index, member in enumerate(members):
            status = _status(member)
            if status is not None and status["state"] == "leader":
                return index
        time.sleep(POLL_S)
    raise SystemExit("no leader elected")


def _register_until_acknowledged(addr: str, index: int, done: threading.Event) -> float | None:
    """Send a new broker's registration every 50 ms until answered 0; when."""
    # Two topics: a new broker registering a one-topic table is refused, as upstream
    # (registerIncrementBrokerData's guard).
    topics = [_util.topic_name(index), _util.topic_name(index + 1)]
    request = _util.register_request(index, _util.topic_wrapper(topics))
    while not done.is_set():
        sent = time.monotonic()
        # A refused connection (the node being killed) is one more unanswered try.
        with (
            contextlib.suppress(OSError, RemotingClientError),
            BlockingClient(addr, timeout_s=5.0) as client,
        ):
            fresh = RemotingCommand.request(request.code, request.ext_fields, request.body)
            if client.invoke(fresh).code == ResponseCode.SUCCESS:
                return time.monotonic()
        done.wait(max(0.0, SEND_EVERY_S - (time.monotonic() - sent)))
    return None


def _kill_and_time(members: list[Member]) -> dict[str, Any]:
    """SIGKILL the leader; seconds to the first acknowledged registration, and to
    each survivor seeing a new leader."""
    leader = _leader(members)
    old_leader = (_status(members[leader]) or {}).get("self_addr")
    survivors = [m for i, m in enumerate(members) if i != leader]
    broker = 1000 + next(_brokers)
    done = threading.Event()
    acked: list[float] = []
    seen: dict[str, float] = {}

    def send(addr: str) -> None:
        when = _register_until_acknowledged(addr, broker, done)
        if when is not None:
            acked.append(when)
            done.set()

    members[leader].kill()
    killed_at = time.monotonic()
    senders = [threading.Thread(target=send, args=(m.addr,)) for m in survivors]
    for sender in senders:
        sender.start()
    term = None
    while time.monotonic() - killed_at < FAILOVER_TIMEOUT_S and len(seen) < len(survivors):
        for member in survivors:
            status = _status(member)
            if (
                status is not None
                and member.node_id not in seen
                and status["leader"] not in (None, "", old_leader)
                and status["has_quorum"]
            ):
                seen[member.node_id] = time.monotonic() - killed_at
                term = status["term"]
        time.sleep(POLL_S)
    done.wait(FAILOVER_TIMEOUT_S)
    done.set()
    for sender in senders:
        sender.join()
    return {
        "failover_s": min(acked) - killed_at if acked else None,
        "term": term,
        "leader_seen_s": sorted(seen.values()),
        "killed": members[leader].node_id,
    }


def run_gateways(root: Path, kills: int, settle_s: float) -> list[dict[str, Any]]:
    """One fresh cluster of bare gateways: ``kills`` leader kills, each node restarted
    after its kill."""
    env = {"NAMESRV_INTERNAL_SECRET": INTERNAL_SECRET}
    gateways = _util.start_gateways(root, "raft", env=env)
    try:
        time.sleep(settle_s)
        results = []
        for _ in range(kills):
            results.append(_kill_and_time(_members(gateways)))
            gateways = _util.restart_stopped(gateways)
            time.sleep(settle_s)
        return results
    finally:
        for gateway in gateways:
            if gateway.proc.poll() is None:
                gateway.proc.terminate()
                gateway.proc.wait()


def _cluster_cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", "cluster", *args],
        cwd=_util.REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"cluster {args[0]} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def run_launched(root: Path, settle_s: float) -> list[dict[str, Any]]:
    """One ``cluster up --mode raft`` on free ports: its leader's gateway SIGKILLed
    ``settle_s`` after ``up`` returned."""
    free = ("base-port", "web-base-port", "internal-base-port", "redis-port")
    ports = [f"--{key}=0" for key in (*free, "metrics-base-port", "raft-base-port")]
    run_dir = root / "run"
    up = json.loads(
        _cluster_cli("up", "--mode", "raft", "--run-dir", str(run_dir), "--json", *ports)
        .strip()
        .splitlines()[-1]
    )
    try:
        secret = (run_dir / "secret").read_text().strip()
        status = json.loads(_cluster_cli("status", "--run-dir", str(run_dir), "--json"))
        pids = {
            p["name"].removesuffix("-gateway"): int(p["pid"])
            for p in status["processes"]
            if p["name"].endswith("-gateway")
        }
        members = [
            Member(n["id"], n["remoting_addr"], int(n["internal_port"]), secret, pids[n["id"]])
            for n in up["nodes"]
        ]
        time.sleep(settle_s)
        return [_kill_and_time(members)]
    finally:
        _cluster_cli("down", "--run-dir", str(run_dir))


def main(argv: list[str] | None = None) -> int:
    parser = ExactArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", type=int, default=5, help="fresh clusters started")
    parser.add_argument(
        "--kills",
        type=int,
        default=3,
        help="leader kills per cluster of bare gateways (a launched cluster is killed once)",
    )
    parser.add_argument(
        "--settle-s", type=float, default=3.0, help="seconds between start (or restart) and a kill"
    )
    parser.add_argument(
        "--launcher",
        choices=("gateways", "cluster"),
        default="gateways",
        help="bare run_gateway processes, or what 'manage.py cluster up --mode raft' starts",
    )
    args = parser.parse_args(argv)
    rows: list[list[object]] = []
    firsts: list[float] = []
    laters: list[float] = []
    for cluster in range(1, args.clusters + 1):
        with tempfile.TemporaryDirectory(prefix="bench-first-failover-") as folder:
            results = (
                run_launched(Path(folder), args.settle_s)
                if args.launcher == "cluster"
                else run_gateways(Path(folder), args.kills, args.settle_s)
            )
            for kill, result in enumerate(results, 1):
                seconds = result["failover_s"]
                if seconds is not None:
                    (firsts if kill == 1 else laters).append(seconds)
                rows.append(
                    [
                        cluster,
                        kill,
                        result["killed"],
                        "none" if seconds is None else f"{seconds:.2f}",
                        result["term"],
                        ", ".join(f"{s:.2f}" for s in result["leader_seen_s"]),
                    ]
                )
    _util.print_table(
        f"leader SIGKILL to the first acknowledged registration, {args.launcher}, "
        f"{args.settle_s:g} s after start ({_util.machine_notes()})",
        ["cluster", "kill", "killed", "failover s", "new term", "survivors saw a leader at s"],
        rows,
    )
    if firsts and laters:
        print(
            f"\nfirst kills: median {statistics.median(firsts):.2f} s, max {max(firsts):.2f} s; "
            f"later kills: median {statistics.median(laters):.2f} s, max {max(laters):.2f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
