"""Node config files for test "hosts": one address each, every node started by ``run_node``.

The hosts may be loopback aliases (127.0.0.2, 127.0.0.3: every Linux machine has
them) or addresses inside network namespaces (tests/integration/test_netns_hosts.py).
The cluster's secrets are made once, as an operator would, and every node's file
points at the same ones.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from localcluster.run_secrets import ADMIN_ACCESS_KEY, RunSecrets, create_run_secrets
from node.config import Endpoint, NodeConfig, Peer, write_node_config
from tests.waiting import wait_until
from tools import ports

PROJECT_DIR = Path(__file__).resolve().parents[2]
HTTP_TIMEOUT_S = 3.0


@dataclass(frozen=True, slots=True)
class HostPorts:
    """The ports one test host uses (on its own address)."""

    address: str
    remoting: int
    web: int
    internal: int
    raft: int
    metrics: int


def free_host_ports(addresses: Sequence[str]) -> list[HostPorts]:
    """Free ports on each address (loopback aliases share the port space, so none repeat)."""
    taken: set[int] = set()
    hosts = []
    for address in addresses:
        picked = []
        for _ in range(5):
            port = ports.free_port(address, avoid=taken)
            taken.add(port)
            picked.append(port)
        hosts.append(HostPorts(address, *picked))
    return hosts


def fixed_host_ports(addresses: Sequence[str]) -> list[HostPorts]:
    """The documented ports on each address (hosts of their own: nothing else binds them)."""
    return [HostPorts(address, 9876, 8080, 19876, 7101, 9100) for address in addresses]


def write_configs(
    folder: Path, hosts: Sequence[HostPorts], *, mode: str = "raft", profile: str = "production"
) -> tuple[list[Path], RunSecrets]:
    """One ``node.toml`` per host under ``folder/nK/``; the shared secrets in ``folder``."""
    secrets = create_run_secrets(folder / "secrets", acl=True)
    paths = []
    for index, host in enumerate(hosts):
        node_id = f"n{index + 1}"
        peers = tuple(
            Peer(
                f"n{i + 1}",
                Endpoint(h.address, h.remoting),
                Endpoint(h.address, h.raft),
                Endpoint(h.address, h.web),
            )
            for i, h in enumerate(hosts)
            if i != index
        )
        config = NodeConfig(
            source=folder / node_id / "node.toml",
            node_id=node_id,
            mode=mode,
            data_dir=folder / node_id / "data",
            remoting=Endpoint(host.address, host.remoting),
            web=Endpoint(host.address, host.web),
            web_profile=profile,
            internal_port=host.internal,
            metrics=Endpoint(host.address, host.metrics),
            raft=Endpoint(host.address, host.raft) if mode == "raft" else None,
            peers=peers,
            raft_secret_file=secrets.raft_secret_file,
            django_secret_file=secrets.django_secret_file,
            acl_file=secrets.acl_file,
            acl_access_key=ADMIN_ACCESS_KEY,
            acl_secret_key_file=secrets.admin_secret_file,
        )
        paths.append(write_node_config(config, config.source))
    return paths, secrets


@dataclass
class NodeProcess:
    """A ``manage.py run_node`` process (optionally inside a network namespace)."""

    config_path: Path
    netns: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    args: Sequence[str] = ()
    """More ``run_node`` arguments (``--force-new-cluster``)."""
    stderr_path: Path | None = None
    """Where its stderr goes; None: into :attr:`log_path` with its stdout."""
    popen: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.config_path.parent / "run_node.log"

    def start(self) -> NodeProcess:
        argv = [
            sys.executable,
            str(PROJECT_DIR / "manage.py"),
            "run_node",
            "--config",
            str(self.config_path),
            *self.args,
        ]
        if self.netns:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        with contextlib.ExitStack() as files:
            log = files.enter_context(open(self.log_path, "ab"))
            err = files.enter_context(open(self.stderr_path, "ab")) if self.stderr_path else None
            self.popen = subprocess.Popen(
                argv,
                cwd=PROJECT_DIR,
                env={**os.environ, **self.env},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT if err is None else err,
                start_new_session=True,
            )
        return self

    def log(self) -> str:
        paths = [self.log_path, *([self.stderr_path] if self.stderr_path else [])]
        texts = []
        for path in paths:
            with contextlib.suppress(OSError):
                texts.append(path.read_text(encoding="utf-8", errors="replace")[-4000:])
        return "\n".join(texts)

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM the supervisor (it stops its children); its exit status."""
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
        return self.popen.returncode


def http_status(url: str) -> int:
    """The status of GET ``url`` (0 when nothing answers)."""
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (OSError, ValueError):
        return 0


def wait_for(
    predicate: Callable[[], object],
    what: str,
    timeout_s: float = 90.0,
    processes: Sequence[NodeProcess] = (),
) -> None:
    """``tests.waiting.wait_until`` watching ``processes``: fail at once with the log of
    one that exited, and with all their logs at the timeout."""

    def holds() -> object:
        if predicate():
            return True
        dead = [p for p in processes if p.popen is not None and p.popen.poll() is not None]
        if dead:
            raise AssertionError(f"{what}: run_node exited:\n" + "\n".join(p.log() for p in dead))
        return False

    def described() -> str:
        return "\n".join([what, *(f"--- {p.config_path}\n{p.log()}" for p in processes)])

    wait_until(holds, what=described, timeout_s=timeout_s, interval_s=0.3)
