"""Three NameServer hosts and a broker host in network namespaces, started only with
``run_node`` and their config files: replication, a real link fault, a rolling restart.

Needs root (CI runs as root); skipped with the reason otherwise. Only addresses
inside the namespaces (10.199.N.0/24) and each host's own loopback are used.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster import broker_control
from localcluster.broker_control import BrokerSpec
from tests.node.hosts import NodeProcess, fixed_host_ports, write_configs
from tests.node.netns import PROJECT_DIR, Network, unavailable_reason
from tests.waiting import wait_until

pytestmark = pytest.mark.slow
NAMESERVERS = ("a", "b", "c")
BROKER_HOST = "d"
SUCCESS = 0
PROPOSE_BOUND_MS = 3000
"""The nodes' default propose timeout: an isolated node must refuse a write by then."""


@pytest.fixture
def network() -> Iterator[Network]:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    made = Network(tag=f"nr{os.getpid() % 10000}", subnet=os.getpid() % 200 + 20)
    try:
        yield made.create([*NAMESERVERS, BROKER_HOST])
    finally:
        made.destroy()


def _probe(net: Network, host: str, *args: str, env_file: Path) -> dict[str, Any]:
    os.environ["PROBE_ADMIN_SECRET_FILE"] = str(env_file)
    out = net.python(host, "-m", "tests.node.probe", *args)
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


STEP_S = 60.0
"""How long each step waits for the hosts (a node's /readyz: READY_S)."""
READY_S = 120.0
POLL_S = 0.5
APPLIED_INDEX_SPREAD_MAX = 5


def test_hosts_replicate_survive_a_cut_link_and_a_rolling_restart(
    network: Network, tmp_path: Path
) -> None:
    hosts = fixed_host_ports([network.hosts[h] for h in NAMESERVERS])
    paths, secrets = write_configs(tmp_path, hosts)
    admin = secrets.admin_secret_file
    nodes = {
        h: NodeProcess(p, netns=network.namespace(h))
        for h, p in zip(NAMESERVERS, paths, strict=True)
    }
    remoting = {h: f"{hp.address}:{hp.remoting}" for h, hp in zip(NAMESERVERS, hosts, strict=True)}
    web = {h: f"http://{hp.address}:{hp.web}" for h, hp in zip(NAMESERVERS, hosts, strict=True)}

    def probe(host: str, *args: str) -> dict[str, Any]:
        return _probe(network, host, *args, env_file=admin)

    def both_brokers_routed(host: str) -> bool:
        answer = probe(BROKER_HOST, "route", remoting[host], "broker-h")
        return bool(answer["brokers"] == {"broker-h": [0, 1]})

    def has_acked(host: str) -> bool:
        return acked <= keys(host, "rolling")

    def ready(host: str) -> bool:
        return bool(probe(BROKER_HOST, "http", f"{web[host]}/readyz")["status"] == 200)

    def put(host: str, key: str, *, via: str | None = None) -> dict[str, Any]:
        return probe(via or BROKER_HOST, "put", remoting[host], "fault", key, "v")

    def keys(host: str, namespace: str, via: str | None = None) -> set[str]:
        answer = probe(via or BROKER_HOST, "kv", remoting[host], namespace)
        return set(answer.get("keys", []))

    acked: set[str] = set()
    try:
        for node in nodes.values():
            node.start()
        for host in NAMESERVERS:
            wait_until(
                functools.partial(ready, host),
                what=f"/readyz of {host}",
                timeout_s=READY_S,
                interval_s=POLL_S,
            )

        # A master and a slave on the broker host register with all three, signed.
        run_dir = tmp_path / "broker-host"
        prefix = ["ip", "netns", "exec", network.namespace(BROKER_HOST)]
        broker_address = network.hosts[BROKER_HOST]
        for broker_id, port in ((0, 10911), (1, 10921)):
            spec = BrokerSpec(
                "broker-h",
                broker_id,
                port,
                port + 1,
                tuple(remoting.values()),
                host=broker_address,
                settings=secrets.broker_settings(),
            )
            broker_control.start_broker(run_dir, spec, prefix=prefix)
        for host in NAMESERVERS:
            wait_until(
                functools.partial(both_brokers_routed, host),
                what=f"broker routes on {host}",
                timeout_s=STEP_S,
                interval_s=POLL_S,
            )

        # Unplug c: a and b keep committing, c refuses writes within its bound.
        network.cut("c")
        wait_until(
            lambda: put("a", "during-cut")["code"] == SUCCESS,
            what="a write on the majority",
            timeout_s=STEP_S,
            interval_s=POLL_S,
        )
        assert "during-cut" in keys("b", "fault")
        isolated = put("c", "on-isolated", via="c")  # c's own address, from inside c
        assert isolated["code"] != SUCCESS, isolated
        assert isolated["elapsed_ms"] < PROPOSE_BOUND_MS + 2000, isolated
        network.heal("c")
        wait_until(
            lambda: "during-cut" in keys("c", "fault"),
            what="c catching up after the heal",
            timeout_s=STEP_S,
            interval_s=POLL_S,
        )
        assert "on-isolated" not in keys("a", "fault")
        statuses = {}

        def same_state() -> bool:
            for index, host in enumerate(NAMESERVERS):
                secret = paths[index].parent / "data" / "internal.secret"
                statuses[host] = probe(host, "status", str(hosts[index].internal), str(secret))
            # The leader's scan commits an entry about every second, so three statuses
            # read one after the other rarely name one index: the same client-visible
            # state within a few entries of each other is agreement.
            indexes = [s["applied_index"] for s in statuses.values()]
            same_digest = len({s["digest"] for s in statuses.values()}) == 1
            return same_digest and max(indexes) - min(indexes) <= APPLIED_INDEX_SPREAD_MAX

        wait_until(
            same_state, what="equal digests on all three", timeout_s=STEP_S, interval_s=POLL_S
        )

        # Rolling restart while a writer on the broker host writes through every node.
        acked_file, stop_file = tmp_path / "acked.txt", tmp_path / "stop"
        os.environ["PROBE_ADMIN_SECRET_FILE"] = str(admin)
        writer = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                network.namespace(BROKER_HOST),
                sys.executable,
                "-m",
                "tests.node.probe",
                "writer",
                ",".join(remoting.values()),
                str(acked_file),
                str(stop_file),
            ],
            cwd=PROJECT_DIR,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            time.sleep(2.0)
            for host in NAMESERVERS:
                assert nodes[host].stop() == 0
                nodes[host].start()
                wait_until(
                    functools.partial(ready, host),
                    what=f"/readyz of {host} after its restart",
                    timeout_s=READY_S,
                    interval_s=POLL_S,
                )
                time.sleep(1.0)
        finally:
            stop_file.touch()
            out, _ = writer.communicate(timeout=60)
        assert writer.returncode == 0, out
        acked.update(acked_file.read_text(encoding="utf-8").split())
        assert len(acked) >= 20, f"the writer got too few writes through: {out!r}"
        for host in NAMESERVERS:
            wait_until(
                functools.partial(has_acked, host),
                what=f"every acknowledged write on {host}",
                timeout_s=STEP_S,
                interval_s=POLL_S,
            )
    finally:
        broker_control_stop(tmp_path / "broker-host")
        for node in nodes.values():
            node.stop()


def broker_control_stop(run_dir: Path) -> None:
    for broker in broker_control.local_brokers(run_dir):
        if broker.running:
            broker_control.stop_broker(run_dir, broker.spec.label, kill=True)
