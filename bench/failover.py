"""Raft failover benchmark: SIGKILL a master, time until every node routes to the new one.

    .venv/bin/python -m bench.failover [--rounds 5] [--heartbeat-timeout-ms 3000]
        [--skew-allowance-ms 1000] [--scan-interval-ms 1000]

Starts 3 raft-mode gateways (``run_gateway --scan-interval-ms``) and broker-a as a
real master + slave (``enableRaftFailover``, 1 s heartbeats). Each round SIGKILLs
the current master, polls GET_ROUTEINFO_BY_TOPIC on every node every 20 ms until
all name the other broker as id 0, then restarts the killed broker (it comes back
as the slave) and waits until it follows. Prints one line per round, the summary
and a JSON line. The expected time is about timeout + skew + scan interval +
the touch staleness (up to timeout/4), plus one Raft commit.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench import _util
from localcluster import broker_control
from localcluster.broker_control import BrokerSpec
from localcluster.run_secrets import ha_secret
from remoting.blocking import BlockingClient
from remoting.bodies import decode_topic_route_data
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tools.cli import ExactArgumentParser

NODES = 3
BROKER_NAME = "broker-a"
POLL_S = 0.02
ROUND_TIMEOUT_S = 60.0


free_port = _util.free_port


def start_gateways(
    root: Path, args: argparse.Namespace
) -> list[tuple[subprocess.Popen[bytes], str]]:
    """3 raft gateways; (process, remoting address) each, once ready."""
    gateways = _util.start_gateways(
        root,
        "raft",
        nodes=NODES,
        args=(
            "--scan-interval-ms",
            str(args.scan_interval_ms),
            "--skew-allowance-ms",
            str(args.skew_allowance_ms),
        ),
    )
    return [(gateway.proc, gateway.addr) for gateway in gateways]


def master_of(addr: str) -> str | None:
    """broker-a's id 0 in one node's route for the broker-a topic."""
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": BROKER_NAME})
    try:
        with BlockingClient(addr, timeout_s=2.0) as client:
            response = client.invoke(request)
    except OSError:
        return None
    if response.code != ResponseCode.SUCCESS or response.body is None:
        return None
    for data in decode_topic_route_data(response.body).broker_datas:
        if data.broker_name == BROKER_NAME:
            return data.broker_addrs.get(0)
    return None


def wait_for(predicate: object, timeout_s: float = ROUND_TIMEOUT_S) -> bool:
    """Poll ``predicate`` every POLL_S; False on timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(POLL_S)
    return False


def run(args: argparse.Namespace) -> dict[str, object]:
    """Start everything, run the rounds, stop everything; the figures."""
    root = Path(tempfile.mkdtemp(prefix="bench-failover-"))
    gateways = start_gateways(root, args)
    namesrv = tuple(addr for _, addr in gateways)
    settings = {
        "fast_heartbeat": "true",
        "heartbeat_interval_ms": "1000",
        "heartbeat_timeout_ms": str(args.heartbeat_timeout_ms),
        "raft_failover": "true",
        "haSecretFile": str(ha_secret(root)),
    }
    specs = {
        i: BrokerSpec(BROKER_NAME, i, free_port(), free_port(), namesrv, settings=dict(settings))
        for i in (0, 1)
    }
    times_s: list[float] = []
    try:
        for spec in specs.values():
            broker_control.start_broker(root, spec)
        master, slave = specs[0], specs[1]
        if not wait_for(lambda: all(master_of(a) == master.addr for _, a in gateways)):
            raise SystemExit("the master never showed up in every route")
        for round_no in range(1, args.rounds + 1):
            killed_at = time.monotonic()
            broker_control.stop_broker(root, master.label, kill=True)
            if not wait_for(lambda s=slave: all(master_of(a) == s.addr for _, a in gateways)):
                raise SystemExit(f"round {round_no}: no failover within {ROUND_TIMEOUT_S} s")
            elapsed = time.monotonic() - killed_at
            times_s.append(elapsed)
            print(
                f"round {round_no}: every node names {slave.addr} as master after {elapsed:.2f} s"
            )
            broker_control.restart_broker(root, master.label)
            following = master
            wait_for(
                lambda f=following: broker_control.runtime_info(f.addr).get("haConnected") == "true"
            )
            master, slave = slave, master
    finally:
        for label in (s.label for s in specs.values()):
            broker_control.stop_broker(root, label, kill=True)
        for proc, _ in gateways:
            proc.kill()
            proc.wait()
    return {
        "bench": "failover",
        "rounds": len(times_s),
        "heartbeat_timeout_ms": args.heartbeat_timeout_ms,
        "skew_allowance_ms": args.skew_allowance_ms,
        "scan_interval_ms": args.scan_interval_ms,
        "min_s": round(min(times_s), 2),
        "median_s": round(statistics.median(times_s), 2),
        "max_s": round(max(times_s), 2),
    }


def main() -> None:
    """Parse the options, run, print the summary and the JSON line."""
    parser = ExactArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="master kills, one per round")
    parser.add_argument(
        "--heartbeat-timeout-ms", type=int, default=3000, help="a silent broker's expiry"
    )
    parser.add_argument(
        "--skew-allowance-ms",
        type=int,
        default=1000,
        help="the replicated expiry's clock-skew allowance",
    )
    parser.add_argument(
        "--scan-interval-ms", type=int, default=1000, help="the gateways' broker scan period"
    )
    result = run(parser.parse_args())
    print(
        f"failover: min {result['min_s']} s, median {result['median_s']} s, "
        f"max {result['max_s']} s over {result['rounds']} rounds"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
