"""Test hosts in Linux network namespaces, joined by a bridge (needs root and iproute2).

Each host is a namespace with its own loopback and one interface ``eth0`` holding
its address; the other end of its veth pair sits on a bridge in a "switch"
namespace of its own, so nothing is added to the machine's own namespace and the
addresses (10.199.N.0/24) are reachable only from inside the test hosts. Cutting a
host off is what unplugging its cable does: its switch port goes down.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[2]
SUBNET_PREFIX = "10.199"


def unavailable_reason() -> str | None:
    """Why network namespaces cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs the suite as root)"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    probe = f"nsprobe{os.getpid() % 100000}"
    made = subprocess.run(
        ["ip", "netns", "add", probe], capture_output=True, text=True, check=False
    )
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


@dataclass
class Network:
    """A bridge and the hosts plugged into it."""

    tag: str
    subnet: int
    hosts: dict[str, str] = field(default_factory=dict)
    """host name -> its address."""

    @property
    def switch(self) -> str:
        return f"{self.tag}sw"

    def namespace(self, host: str) -> str:
        return f"{self.tag}{host}"

    def _switch_port(self, host: str) -> str:
        return f"{self.tag}{host}p"[:15]

    def create(self, names: Sequence[str]) -> Network:
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for index, name in enumerate(names, start=1):
            namespace = self.namespace(name)
            address = f"{SUBNET_PREFIX}.{self.subnet}.{index}"
            _ip("netns", "add", namespace)
            _ip("-n", namespace, "link", "set", "lo", "up")
            port = self._switch_port(name)
            _ip(
                "-n",
                self.switch,
                "link",
                "add",
                port,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                namespace,
            )
            _ip("-n", self.switch, "link", "set", port, "master", "br0")
            _ip("-n", self.switch, "link", "set", port, "up")
            _ip("-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
            _ip("-n", namespace, "link", "set", "eth0", "up")
            self.hosts[name] = address
        return self

    def cut(self, host: str) -> None:
        """Unplug ``host``: its switch port goes down (``ip link set ... down``)."""
        _ip("-n", self.switch, "link", "set", self._switch_port(host), "down")

    def heal(self, host: str) -> None:
        """Plug ``host`` back in."""
        _ip("-n", self.switch, "link", "set", self._switch_port(host), "up")

    def destroy(self) -> None:
        """Delete every namespace (their interfaces go with them)."""
        for name in [*self.hosts, None]:
            namespace = self.switch if name is None else self.namespace(name)
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)
        self.hosts.clear()

    def python(self, host: str, *args: str, timeout_s: float = 60.0) -> str:
        """Run ``python ARGS`` inside ``host``; its standard output."""
        done = subprocess.run(
            ["ip", "netns", "exec", self.namespace(host), sys.executable, *args],
            cwd=PROJECT_DIR,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"python {' '.join(args)} in {host}: {done.stderr[-2000:]}")
        return done.stdout
