"""Helpers of the cluster, Celery and interop tests: a real cluster from the real CLI.

``start_cluster`` runs ``manage.py cluster up --json`` in a subprocess with every
port chosen free at run time (bases of 0) and returns the parsed summary;
``stop_cluster`` runs ``down``. Brokers register over the real wire with the
demo fleet's request builder, and routes are read back with GET_ROUTEINFO_BY_TOPIC.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from localcluster.demo import DemoBroker, register_request, topic_table
from localcluster.plan import CLUSTER_FILE_NAME
from localcluster.run_secrets import read_run_secrets
from remoting.blocking import BlockingClient
from remoting.bodies import decode_topic_route_data
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.model import DataVersion, TopicRouteData

PROJECT_DIR = Path(__file__).resolve().parents[2]
CLI_TIMEOUT_S = 120.0
FREE_PORTS = (
    "--base-port",
    "0",
    "--web-base-port",
    "0",
    "--internal-base-port",
    "0",
    "--raft-base-port",
    "0",
    "--redis-port",
    "0",
)
WIRE_TIMEOUT_S = 5.0
WEB_TIMEOUT_S = 15.0
TEST_CLUSTER = "DefaultCluster"


def cluster_cli(
    *args: str, env: Mapping[str, str] | None = None, timeout_s: float = CLI_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Run ``manage.py cluster ARGS`` the way an operator would."""
    return subprocess.run(
        [sys.executable, str(PROJECT_DIR / "manage.py"), "cluster", *args],
        cwd=PROJECT_DIR,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def start_cluster(
    run_dir: Path, *extra: str, nodes: int, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``cluster up --json [EXTRA]`` on free ports; the summary it printed."""
    done = cluster_cli(
        "up",
        "--nodes",
        str(nodes),
        "--run-dir",
        str(run_dir),
        "--json",
        *FREE_PORTS,
        *extra,
        env=env,
    )
    assert done.returncode == 0, f"cluster up failed:\n{done.stdout}\n{done.stderr}"
    summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return summary


def cli_json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON a successful ``cluster ... --json`` printed last."""
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def recorded_cluster(run_dir: Path) -> dict[str, Any]:
    """The run folder's cluster.json as it is now."""
    data: dict[str, Any] = json.loads((run_dir / CLUSTER_FILE_NAME).read_text())
    return data


def admin_request(
    run_dir: Path, addr: str, code: RequestCode, fields: dict[str, str]
) -> RemotingCommand:
    """One request signed as the run's admin (the launched cluster's ACL is on)."""
    admin = read_run_secrets(run_dir).admin_credentials()
    with BlockingClient(addr, timeout_s=8.0, credentials=admin) as client:
        return client.invoke(RemotingCommand.request(code, fields))


def stop_cluster(run_dir: Path) -> dict[str, Any]:
    """``cluster down --json``; what it stopped."""
    done = cluster_cli("down", "--run-dir", str(run_dir), "--json")
    assert done.returncode == 0, f"cluster down failed:\n{done.stdout}\n{done.stderr}"
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def make_broker(name: str, port: int, broker_id: int = 0) -> DemoBroker:
    """A broker of the test cluster announcing ``127.0.0.1:port``."""
    return DemoBroker(TEST_CLUSTER, name, broker_id, f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}")


def register_broker(
    client: BlockingClient,
    broker: DemoBroker,
    topics: list[str],
    *,
    heartbeat_timeout_ms: int | None = None,
) -> RemotingCommand:
    """Send one REGISTER_BROKER through ``client`` (whose connection stays open).

    Like a real broker, it also announces the topic named after itself: a 5.x
    NameServer refuses a *new* broker whose table holds exactly one topic (the
    single-topic guard of ``registerBroker``).
    """
    request = register_request(
        broker,
        topic_table([*topics, broker.broker_name]),
        DataVersion(timestamp=1, counter=1),
        heartbeat_timeout_ms=heartbeat_timeout_ms,
    )
    answer = client.invoke(request)
    assert answer.code == ResponseCode.SUCCESS, f"register answered {answer.code} {answer.remark}"
    return answer


def query_route(addr: str, topic: str) -> tuple[int, TopicRouteData | None]:
    """GET_ROUTEINFO_BY_TOPIC on a fresh connection: the code and the decoded route."""
    request = RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, "acceptStandardJsonOnly": "true"}
    )
    with BlockingClient(addr, timeout_s=WIRE_TIMEOUT_S) as client:
        answer = client.invoke(request)
    if answer.code != ResponseCode.SUCCESS or answer.body is None:
        return answer.code, None
    return answer.code, decode_topic_route_data(answer.body)


def remoting_addr(summary: Mapping[str, Any], index: int) -> str:
    """The remoting address of the ``index``-th node of a cluster summary."""
    return f"127.0.0.1:{summary['nodes'][index]['remoting_port']}"


def create_operator(
    run_dir: Path,
    username: str,
    *,
    role: str = "operator",
    token: bool = False,
    password: str | None = None,
) -> str:
    """``manage.py create_operator`` on ``run_dir``'s shared database, as a script runs it
    (no terminal); the last line it printed: the API token when ``token``."""
    args = [username, "--role", role, "--run-dir", str(run_dir)]
    args += ["--token"] if token else []
    args += ["--password-env", "OPERATOR_PASSWORD"] if password is not None else []
    done = subprocess.run(
        [sys.executable, "manage.py", "create_operator", *args],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "OPERATOR_PASSWORD": password or ""},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def api(base: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
    """GET (or POST ``body`` as JSON) ``base + path`` with an API token: status, JSON."""
    request = urllib.request.Request(
        base + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        method="GET" if body is None else "POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=WEB_TIMEOUT_S) as response:
            return int(response.status), json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return int(exc.code), json.loads(exc.read() or b"null")
