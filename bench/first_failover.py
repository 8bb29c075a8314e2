"""Leader SIGKILL to the first acknowledged registration of a new broker, on fresh
raft clusters: the first kill after ``cluster up`` and the ones after it.

Each cluster is three ``run_gateway --mode raft`` processes started together. After
``--settle-s`` the leader is SIGKILLed; a broker new to the cluster then sends its
REGISTER_BROKER every 50 ms to each survivor, and the time from the kill to the first
answer 0 is the failover. The killed node is restarted, the cluster converges, and
the next kill takes the new leader. Every kill of every cluster is printed (the first
of each cluster apart), with the term the new leader was elected in and how long
each survivor took to see it (NODE_STATUS, polled every 20 ms).

Run: ``.venv/bin/python -m bench.first_failover [--clusters 5] [--kills 3]
[--settle-s 3]``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import statistics
import tempfile
import threading
import time
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


def _status(gateway: _util.BenchGateway) -> dict[str, Any] | None:
    request = RemotingCommand.request(int(InternalCode.NODE_STATUS), {"secret": INTERNAL_SECRET})
    try:
        with BlockingClient(f"127.0.0.1:{gateway.internal_port}", timeout_s=2.0) as client:
            answer = client.invoke(request)
    except (OSError, RemotingClientError):
        return None
    if answer.code != ResponseCode.SUCCESS or answer.body is None:
        return None
    status: dict[str, Any] = json.loads(answer.body)
    return status


def _leader(gateways: list[_util.BenchGateway], timeout_s: float = 30.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for index, gateway in enumerate(gateways):
            if gateway.proc.poll() is None:
                status = _status(gateway)
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


def _kill_and_time(gateways: list[_util.BenchGateway]) -> dict[str, Any]:
    """SIGKILL the leader; seconds to the first acknowledged registration, and to
    each survivor seeing a new leader."""
    leader = _leader(gateways)
    old_leader = (_status(gateways[leader]) or {}).get("self_addr")
    survivors = [g for i, g in enumerate(gateways) if i != leader]
    broker = 1000 + next(_brokers)
    done = threading.Event()
    acked: list[float] = []
    seen: dict[str, float] = {}

    def send(addr: str) -> None:
        when = _register_until_acknowledged(addr, broker, done)
        if when is not None:
            acked.append(when)
            done.set()

    gateways[leader].proc.kill()
    gateways[leader].proc.wait()
    killed_at = time.monotonic()
    senders = [threading.Thread(target=send, args=(g.addr,)) for g in survivors]
    for sender in senders:
        sender.start()
    term = None
    while time.monotonic() - killed_at < FAILOVER_TIMEOUT_S and len(seen) < len(survivors):
        for gateway in survivors:
            status = _status(gateway)
            if (
                status is not None
                and gateway.node_id not in seen
                and status["leader"] not in (None, "", old_leader)
                and status["has_quorum"]
            ):
                seen[gateway.node_id] = time.monotonic() - killed_at
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
        "killed": gateways[leader].node_id,
    }


def run_cluster(root: Path, kills: int, settle_s: float) -> list[dict[str, Any]]:
    """One fresh cluster: ``kills`` leader kills, each node restarted after its kill."""
    env = {"NAMESRV_INTERNAL_SECRET": INTERNAL_SECRET}
    gateways = _util.start_gateways(root, "raft", env=env)
    try:
        time.sleep(settle_s)
        results = []
        for _ in range(kills):
            results.append(_kill_and_time(gateways))
            gateways = _util.restart_stopped(gateways)
            time.sleep(settle_s)
        return results
    finally:
        for gateway in gateways:
            if gateway.proc.poll() is None:
                gateway.proc.terminate()
                gateway.proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = ExactArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", type=int, default=5, help="fresh clusters started")
    parser.add_argument("--kills", type=int, default=3, help="leader kills per cluster")
    parser.add_argument(
        "--settle-s", type=float, default=3.0, help="seconds between start (or restart) and a kill"
    )
    args = parser.parse_args(argv)
    rows: list[list[object]] = []
    firsts: list[float] = []
    laters: list[float] = []
    for cluster in range(1, args.clusters + 1):
        with tempfile.TemporaryDirectory(prefix="bench-first-failover-") as folder:
            for kill, result in enumerate(run_cluster(Path(folder), args.kills, args.settle_s), 1):
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
        f"leader SIGKILL to the first acknowledged registration ({_util.machine_notes()})",
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
