"""``run_node --force-new-cluster``, the per-host recovery after quorum loss (node/force.py):
three raft nodes started from their config files (as in test_run_node.py), two of them
lost for good, and the survivor started again from its unchanged file with the flag. It
comes up as a one-member cluster holding its applied state, commits at once, says so
loudly, leaves the marker and the old Raft folder and an audit entry; a later start
whose peers still name a lost member is refused, and with the peers set to none it
starts (docs/DEPLOY.md, "Recovery after quorum loss"; the local-cluster equivalent,
``cluster recover``, is tests/integration/test_cluster_recover.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gateway.restore import FORCED_MARKER_FILE
from node import force, internal, processes
from node.config import NodeConfig, load_node_config, write_node_config
from remoting.acl import Credentials, read_secret_file
from remoting.blocking import BlockingClient
from remoting.client import RemotingClientError
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.node.hosts import (
    PROJECT_DIR,
    HostPorts,
    NodeProcess,
    free_host_ports,
    wait_for,
    write_configs,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ADDRESSES = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
COMMIT_BOUND_S = 10.0
"""From the forced node's first one-member NODE_STATUS to a KV put it acknowledged."""
META_SAVE_S = 2.0
"""PySyncObj saves a node's commit index with its journal about once a second: the
survivor runs this long after it applied the write, so its replay reaches it."""
GONE_BOUND_S = 10.0
START_BOUND_S = 60.0
BEFORE = {"namespace": "ops", "key": "owner", "value": "team-a"}
AFTER = {"namespace": "ops", "key": "after", "value": "1"}
LATER = {"namespace": "ops", "key": "later", "value": "2"}


def _remoting(host: HostPorts) -> str:
    return f"{host.address}:{host.remoting}"


def _invoke(
    addr: str, admin: Credentials | None, code: RequestCode, fields: dict[str, str]
) -> RemotingCommand | None:
    """The answer to a signed request; None when nothing answered."""
    try:
        with BlockingClient(addr, timeout_s=5.0, credentials=admin) as client:
            return client.invoke(RemotingCommand.request(code, fields))
    except (RemotingClientError, OSError):
        return None


def _put(addr: str, admin: Credentials | None, fields: dict[str, str]) -> bool:
    answer = _invoke(addr, admin, RequestCode.PUT_KV_CONFIG, fields)
    return answer is not None and answer.code == ResponseCode.SUCCESS


def _get(addr: str, admin: Credentials | None, fields: dict[str, str]) -> str | None:
    """The value GET_KV_CONFIG answers for ``fields``' namespace and key, or None."""
    key = {"namespace": fields["namespace"], "key": fields["key"]}
    answer = _invoke(addr, admin, RequestCode.GET_KV_CONFIG, key)
    if answer is None or answer.code != ResponseCode.SUCCESS:
        return None
    return (answer.ext_fields or {}).get("value")


def _status(config: NodeConfig) -> dict[str, Any] | None:
    """The node's NODE_STATUS over its internal port, or None when it does not answer."""
    try:
        secret = read_secret_file(processes.internal_secret_file(config), "internal secret")
        return internal.node_status(config.internal_port, secret)
    except (internal.InternalRequestError, RemotingClientError, OSError, ValueError):
        return None


def _lose(node: NodeProcess) -> None:
    """SIGKILL the node's supervisor and its process group (its gateway and web process),
    and wait until none of them is left."""
    assert node.popen is not None
    group = node.popen.pid  # the supervisor leads its own session and process group
    os.killpg(group, signal.SIGKILL)
    node.popen.wait(timeout=GONE_BOUND_S)

    def group_gone() -> bool:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        return False

    wait_for(group_gone, f"process group of {node.config_path}", timeout_s=GONE_BOUND_S)


def _run_node(path: Path) -> subprocess.CompletedProcess[str]:
    """``run_node --config path`` to its end (a refused start ends at once)."""
    return subprocess.run(
        [sys.executable, str(PROJECT_DIR / "manage.py"), "run_node", "--config", str(path)],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_survivor_of_a_lost_majority_is_forced_into_a_one_member_cluster(
    tmp_path: Path,
) -> None:
    hosts = free_host_ports(ADDRESSES)
    paths, secrets = write_configs(tmp_path, hosts)
    admin = secrets.admin_credentials()
    config = load_node_config(paths[0])  # n1, the survivor
    survivor = _remoting(hosts[0])
    self_addr = f"{hosts[0].address}:{hosts[0].raft}"
    nodes = [NodeProcess(path).start() for path in paths]
    forced = NodeProcess(paths[0], args=("--force-new-cluster",), stderr_path=tmp_path / "err")
    running = [*nodes, forced]
    try:
        # A write the three commit, applied on the survivor.
        wait_for(lambda: _put(survivor, admin, BEFORE), "first write", processes=nodes)
        wait_for(
            lambda: _get(survivor, admin, BEFORE) == BEFORE["value"],
            "first write read back on n1",
            processes=nodes,
        )
        applied = time.monotonic()

        # Two hosts are lost for good; then the survivor is stopped too.
        for node in nodes[1:]:
            _lose(node)
        time.sleep(max(0.0, applied + META_SAVE_S - time.monotonic()))
        assert nodes[0].stop() == 0

        # The survivor, from its unchanged config file, with the flag.
        forced.start()
        status: dict[str, Any] = {}

        def one_member() -> bool:
            status.update(_status(config) or {})
            return status.get("members") == [self_addr]

        wait_for(one_member, "the forced one-member cluster", START_BOUND_S, [forced])
        started = time.monotonic()
        wait_for(lambda: _put(survivor, admin, AFTER), "a write after", COMMIT_BOUND_S, [forced])
        assert time.monotonic() - started < COMMIT_BOUND_S
        status.update(_status(config) or {})
        assert status["members"] == [self_addr] and status["leader"] == self_addr, status
        assert _get(survivor, admin, BEFORE) == BEFORE["value"]
        assert _get(survivor, admin, AFTER) == AFTER["value"]

        # Said loudly, on its stderr.
        assert forced.stderr_path is not None
        stderr = forced.stderr_path.read_text(encoding="utf-8")
        assert "n1 was FORCED into a new one-member raft cluster" in stderr, forced.log()
        assert f"{hosts[1].address}:{hosts[1].raft}" in stderr  # a member left behind

        # The marker in the new Raft folder; the old folder moved aside, not deleted.
        raft_dir = force.raft_dir(config)
        marker = json.loads((raft_dir / FORCED_MARKER_FILE).read_text(encoding="utf-8"))
        assert (marker["how"], marker["node"], marker["self_addr"]) == (
            "run_node --force-new-cluster",
            "n1",
            self_addr,
        )
        assert sorted(marker["previous_members"]) == sorted(f"{h.address}:{h.raft}" for h in hosts)
        moved = sorted(config.data_dir.glob(f"{force.MOVED_ASIDE_PREFIX}*"))
        assert [str(p) for p in moved] == [marker["previous_raft_dir"]]
        assert (moved[0] / "raft.journal").is_file()
        assert Path(marker["backup_file"]).stat().st_mode & 0o077 == 0

        # The audit entry, in the node's own database.
        with sqlite3.connect(config.data_dir / processes.SHARED_DB_FILE_NAME) as db:
            entries = db.execute(
                "SELECT node_id, action, target, ok, result FROM namesrv_app_auditentry"
            ).fetchall()
        assert [e[:4] for e in entries] == [("n1", "force-new-cluster", "n1", 1)]
        assert f"index {marker['index']}, term {marker['term']}" in entries[0][4]

        # Started again from the unchanged file, which still names the lost members:
        # refused, naming them.
        assert forced.stop() == 0
        refused = _run_node(paths[0])
        assert refused.returncode != 0
        error = refused.stderr.strip().splitlines()[-1]
        assert error.startswith(
            f"CommandError: {paths[0]}: [peers] still names "
            f"n2 ({hosts[1].address}:{hosts[1].raft}), n3 ({hosts[2].address}:{hosts[2].raft}), "
        ), refused.stderr
        assert "Set [peers] to the new membership" in error

        # With [peers] set to none it starts, elects itself and commits, with both writes.
        write_node_config(dataclasses.replace(config, peers=()), paths[0])
        again = NodeProcess(paths[0]).start()
        running.append(again)
        wait_for(lambda: _put(survivor, admin, LATER), "a write, restarted", START_BOUND_S, [again])
        assert (_status(config) or {}).get("members") == [self_addr]
        for fields in (BEFORE, AFTER, LATER):
            assert _get(survivor, admin, fields) == fields["value"]
        assert again.stop() == 0
    finally:
        for node in running:
            node.stop()
