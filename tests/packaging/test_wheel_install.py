"""The wheel a host installs: built by ``pip wheel``, installed into a fresh virtualenv from the
runtime lock, and a node started by its ``raft-namesrv`` script from a ``node.toml``, in a
folder outside the checkout, answering on the wire and serving its console and static files.

Slow: the runtime lock takes about a minute to install (pip's wheel cache holds the built
pyspark and pysyncobj), the node some seconds to start; about 2 minutes in all.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
import zipfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from localcluster.demo import DemoBroker
from remoting.blocking import BlockingClient
from remoting.codes import ResponseCode
from tests.integration.cluster_fixtures import TEST_CLUSTER, query_route, register_broker
from tests.node.hosts import free_host_ports, http_status, write_configs
from tests.packaging.declared import (
    DEV_MODULES_IN_RUNTIME_PACKAGES,
    PROJECT_DIR,
    RUNTIME_LOCK,
    shipped_packages,
)
from tests.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.timeout(900)]

INSTALL_TIMEOUT_S = 600.0
NODE_READY_S = 120.0
STOP_TIMEOUT_S = 40.0


def run(argv: list[str], *, env: Mapping[str, str], cwd: Path) -> str:
    """Run ``argv`` to its end; its output, or a failure that shows it."""
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"{argv} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def outside_the_checkout() -> dict[str, str]:
    """This environment without what would point a process back at the checkout or its venv."""
    dropped = {"PYTHONPATH", "VIRTUAL_ENV", "DJANGO_SETTINGS_MODULE"}
    return {k: v for k, v in os.environ.items() if k not in dropped}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``pip wheel . --no-deps`` of the checkout's pyproject.toml and packages, copied first
    so that setuptools' build/ and egg-info land beside the copy (the dev venv's setuptools,
    from the lock, builds it)."""
    source = tmp_path_factory.mktemp("source")
    shutil.copy2(PROJECT_DIR / "pyproject.toml", source)
    for package in shipped_packages():
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(PROJECT_DIR / package, source / package, ignore=ignore)
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    run([*pip_wheel, "-w", str(source / "dist"), "."], env=os.environ, cwd=source)
    [built] = (source / "dist").glob("raft_namesrv-*.whl")
    return built


def test_the_wheel_carries_every_file_of_the_shipped_packages_and_names_its_script(
    wheel: Path,
) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(entry_points).decode("utf-8")
    in_checkout = {
        path.relative_to(PROJECT_DIR).as_posix()
        for package in shipped_packages()
        for path in (PROJECT_DIR / package).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }

    checkout_packages = {path.parent.name for path in PROJECT_DIR.glob("*/__init__.py")}
    assert set(shipped_packages()) == checkout_packages - {"tests", "bench"}
    assert len(shipped_packages()) >= 12
    assert sorted(in_checkout - names) == []
    assert {
        "namesrv_app/templates/base.html",
        "namesrv_app/static/namesrv/console.css",
        "namesrv_app/migrations/0001_initial.py",
        "spark_jobs/log4j2-quiet.properties",
    } <= names
    assert not [n for n in names if n.startswith(("tests/", "bench/"))]
    assert "raft-namesrv = namesrv_site.cli:main" in scripts


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv holding the runtime lock (hash-checked) and then the wheel."""
    venv = tmp_path_factory.mktemp("host") / "venv"
    env = outside_the_checkout()
    run([sys.executable, "-m", "venv", str(venv)], env=env, cwd=venv.parent)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile"]
    run([*pip, "--require-hashes", "-r", str(RUNTIME_LOCK)], env=env, cwd=venv.parent)
    run([*pip, "--no-deps", str(wheel)], env=env, cwd=venv.parent)
    return venv


IMPORT_EVERY_MODULE = """
import importlib, os, pkgutil, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "namesrv_site.settings"
import django
django.setup()
skip, failed = set(sys.argv[2:]), []
for package in sys.argv[1].split(","):
    for info in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
        if info.name not in skip:
            try:
                importlib.import_module(info.name)
            except Exception as exc:
                failed.append(f"{info.name}: {exc!r}")
print(importlib.import_module("namesrv_site").__file__)
print("\\n".join(failed))
"""


def test_every_shipped_module_imports_with_only_the_runtime_lock(
    installed: Path, tmp_path: Path
) -> None:
    dev_modules = [
        path.removesuffix(".py").replace("/", ".") for path in DEV_MODULES_IN_RUNTIME_PACKAGES
    ]
    python = str(installed / "bin" / "python")
    argv = [python, "-c", IMPORT_EVERY_MODULE, ",".join(shipped_packages()), *dev_modules]
    out = run(argv, env=outside_the_checkout(), cwd=tmp_path)
    where, *failed = out.splitlines()

    assert Path(where).is_relative_to(installed)  # the wheel's copy, not the checkout's
    assert [line for line in failed if line] == []


class InstalledNode:
    """``raft-namesrv node --config FILE`` of the installed venv, in its own session."""

    def __init__(self, script: Path, config: Path) -> None:
        self.log_path = config.parent / "run_node.log"
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(
                [str(script), "node", "--config", str(config)],
                cwd=config.parent,
                env=outside_the_checkout(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-4000:]

    def wait_until(self, predicate: Callable[[], object], what: str) -> None:
        """Poll ``predicate``; fail with the node's log when it exits or never holds."""

        def holds() -> bool:
            if predicate():
                return True
            assert self.popen.poll() is None, f"{what}: the node exited:\n{self.log()}"
            return False

        wait_until(
            holds, what=lambda: f"{what}\n{self.log()}", timeout_s=NODE_READY_S, interval_s=0.3
        )

    def stop(self) -> int:
        """SIGTERM the node (it stops its processes); its exit status."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
        return self.popen.returncode


@pytest.fixture
def node_config(tmp_path: Path) -> Path:
    """One node's ``node.toml`` on free loopback ports, with the cluster's secrets: eventual
    mode (a raft node waits for the other members its file must list) and the development web
    profile (production's redirects plain HTTP to HTTPS, and this node has no certificate)."""
    hosts = free_host_ports(["127.0.0.1"])
    [path], _secrets = write_configs(tmp_path, hosts, mode="eventual", profile="development")
    return path


@pytest.fixture
def node(installed: Path, node_config: Path) -> Iterator[InstalledNode]:
    started = InstalledNode(installed / "bin" / "raft-namesrv", node_config)
    yield started
    started.stop()


def fetch(url: str) -> tuple[str, str]:
    """GET ``url``: its content type and text."""
    with urllib.request.urlopen(url, timeout=10.0) as response:
        return response.headers.get_content_type(), response.read().decode("utf-8")


def test_the_installed_script_starts_a_node_that_serves_the_wire_console_and_static_files(
    node: InstalledNode, node_config: Path
) -> None:
    text = node_config.read_text(encoding="utf-8")
    remoting = re.search(r'\[remoting\]\s*listen = "([^"]+)"', text)
    web = re.search(r'\[web\]\s*listen = "([^"]+)"', text)
    assert remoting and web
    node.wait_until(lambda: http_status(f"http://{web[1]}/readyz") == 200, "/readyz")

    broker = DemoBroker(TEST_CLUSTER, "broker-w", 0, "127.0.0.1:30931", "127.0.0.1:30932")
    # Open while the route is read: in eventual mode a broker's routes go with its connection.
    with BlockingClient(remoting[1], timeout_s=5.0) as client:
        register_broker(client, broker, ["WheelOrders"])
        node.wait_until(
            lambda: query_route(remoting[1], "WheelOrders")[0] == ResponseCode.SUCCESS,
            "the route of the registered topic",
        )
    kind, page = fetch(f"http://{web[1]}/accounts/login/")
    [stylesheet] = re.findall(r'href="(/static/[^"]*console[^"]*\.css)"', page)
    css_kind, css = fetch(f"http://{web[1]}{stylesheet}")

    assert kind == "text/html" and "<form" in page
    assert css_kind == "text/css" and css.strip()
    assert node.stop() == 0
