"""A small wire client the multi-host tests run *inside* a network namespace.

``ip netns exec HOST python -m tests.node.probe ...`` prints one JSON line:

* ``http URL``: the HTTP status of GET URL (0 when nothing answers);
* ``route ADDR TOPIC``: GET_ROUTEINFO_BY_TOPIC's code and the route's broker names;
* ``put ADDR NS KEY VALUE``: PUT_KV_CONFIG signed as the admin, its code and duration;
* ``kv ADDR NS``: GET_KVLIST_BY_NAMESPACE's code and the keys it holds;
* ``status PORT SECRET_FILE``: NODE_STATUS of this host's gateway (applied index,
  digest, leader);
* ``writer ADDR,ADDR,... OUT STOP``: PUT_KV_CONFIG of key 1, 2, 3, ... until the file
  STOP exists, each write retried on the next node until one acknowledges it; every
  acknowledged key is appended to OUT as it is acknowledged (a rolling restart must
  lose none of them).

The admin secret comes from the file in env ``PROBE_ADMIN_SECRET_FILE``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from localcluster.run_secrets import ADMIN_ACCESS_KEY
from remoting.acl import Credentials, read_secret_file, sign
from remoting.blocking import BlockingClient
from remoting.bodies import decode_kv_table, decode_topic_route_data
from remoting.client import RemotingClientError
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand

TIMEOUT_S = 5.0
WRITER_NAMESPACE = "rolling"


def _admin() -> Credentials:
    return Credentials(
        ADMIN_ACCESS_KEY, read_secret_file(os.environ["PROBE_ADMIN_SECRET_FILE"], "admin secret")
    )


def _invoke(addr: str, request: RemotingCommand) -> RemotingCommand:
    with BlockingClient(addr, timeout_s=TIMEOUT_S) as client:
        return client.invoke(request)


def http(url: str) -> dict[str, object]:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            return {"status": int(response.status)}
    except urllib.error.HTTPError as exc:
        return {"status": int(exc.code)}
    except (OSError, ValueError) as exc:
        return {"status": 0, "error": str(exc)}


def route(addr: str, topic: str) -> dict[str, object]:
    ext = {"topic": topic, "acceptStandardJsonOnly": "true"}
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext)
    try:
        answer = _invoke(addr, request)
    except RemotingClientError as exc:
        return {"code": -1, "error": str(exc)}
    brokers: dict[str, list[int]] = {}
    if answer.code == ResponseCode.SUCCESS and answer.body:
        data = decode_topic_route_data(answer.body)
        brokers = {b.broker_name: sorted(b.broker_addrs) for b in data.broker_datas}
    return {"code": answer.code, "brokers": brokers}


def put(addr: str, namespace: str, key: str, value: str) -> dict[str, object]:
    request = sign(
        RemotingCommand.request(
            RequestCode.PUT_KV_CONFIG, {"namespace": namespace, "key": key, "value": value}
        ),
        _admin(),
    )
    started = time.monotonic()
    try:
        answer = _invoke(addr, request)
    except RemotingClientError as exc:
        return {"code": -1, "error": str(exc), "elapsed_ms": _ms(started)}
    return {"code": answer.code, "remark": answer.remark, "elapsed_ms": _ms(started)}


def kv(addr: str, namespace: str) -> dict[str, object]:
    request = sign(
        RemotingCommand.request(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": namespace}),
        _admin(),
    )
    try:
        answer = _invoke(addr, request)
    except RemotingClientError as exc:
        return {"code": -1, "error": str(exc)}
    keys = sorted(decode_kv_table(answer.body).table) if answer.body else []
    return {"code": answer.code, "keys": keys}


def writer(addrs: list[str], out: Path, stop: Path) -> dict[str, object]:
    key, attempts, index = 0, 0, 0
    with out.open("a", encoding="utf-8") as acked:
        while not stop.exists():
            key += 1
            while not stop.exists():
                attempts += 1
                answer = put(addrs[index % len(addrs)], WRITER_NAMESPACE, str(key), "v")
                index += 1
                if answer["code"] == ResponseCode.SUCCESS:
                    acked.write(f"{key}\n")
                    acked.flush()
                    break
                time.sleep(0.05)
    return {"written": key, "attempts": attempts}


def status(internal_port: str, secret_file: str) -> dict[str, object]:
    """NODE_STATUS of the gateway on this host (its internal port is loopback-only)."""
    from localcluster.readiness import node_status

    body = node_status(int(internal_port), read_secret_file(secret_file, "internal secret"))
    return {key: body.get(key) for key in ("applied_index", "digest", "leader", "role")}


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def main(argv: list[str]) -> int:
    verb, *args = argv
    if verb == "http":
        result = http(args[0])
    elif verb == "route":
        result = route(args[0], args[1])
    elif verb == "put":
        result = put(*args[:4])
    elif verb == "kv":
        result = kv(args[0], args[1])
    elif verb == "status":
        result = status(args[0], args[1])
    elif verb == "writer":
        result = writer(args[0].split(","), Path(args[1]), Path(args[2]))
    else:
        print(f"unknown verb {verb!r}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
