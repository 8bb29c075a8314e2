"""A whole node for the browser tests: Redis, a real gateway and the node's web process.

They share one SQLite file (the gateway's projection, the web process's reads)
and one Redis (the gateway publishes change events, the web process's
websockets receive them). Chromium is the Debian package at /usr/bin/chromium;
it is installed with apt-get when missing (the tests run as root in CI).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from localcluster.launcher import (
    accepts_connections,
    asgi_server_argv,
    find_redis_server,
    free_port,
    redis_answers,
    write_redis_config,
)
from tests.integration.gateway_harness import ADMIN
from tests.waiting import wait_until
from tests.web.conftest import BROKERS, SECRET, TOPICS, RunningGateway, start_gateway, stop_gateway

REPO_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
OPERATOR = "otto"
OPERATOR_PASSWORD = "browser-test-password-1"
SCREENSHOTS = REPO_ROOT / "docs" / "screenshots"
APT_TIMEOUT_S = 600
START_TIMEOUT_S = 60.0
# Two workers: the page, its websocket and its refreshes may land on different
# processes, so live updates must cross them through the Redis channel layer.
BROWSER_WEB_WORKERS = 2


@pytest.fixture(scope="session")
def chromium() -> Path:
    """The Debian chromium binary, installed on first use."""
    return installed_chromium()


def installed_chromium() -> Path:
    """The Debian chromium binary, installed with apt-get when missing (also used by
    tests outside this folder that open a page)."""
    if not CHROMIUM.exists():
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            pytest.fail("chromium is missing and cannot be installed (needs root and apt-get)")
        subprocess.run(
            ["apt-get", "install", "-y", "chromium"],
            check=True,
            timeout=APT_TIMEOUT_S,
            capture_output=True,
        )
    return CHROMIUM


@dataclass
class ConsoleNode:
    """A running node: its gateway, its console URL and the env they share."""

    gateway: RunningGateway
    url: str
    env: dict[str, str]


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=out, stderr=out)


@pytest.fixture(scope="session")
def console_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleNode]:
    """Redis + gateway (publishing to the console) + the launcher's web command, cast registered."""
    folder = tmp_path_factory.mktemp("console")
    redis_port = free_port()
    redis = _start(
        [find_redis_server(), str(write_redis_config(folder, redis_port))],
        dict(os.environ),
        folder / "redis.log",
    )
    procs: list[subprocess.Popen[bytes]] = [redis]
    gateway = None
    try:
        wait_until(lambda: redis_answers(redis_port), what="redis", timeout_s=START_TIMEOUT_S)
        redis_url = f"redis://127.0.0.1:{redis_port}/0"
        gateway = start_gateway(
            folder,
            extra_env={
                "REDIS_URL": redis_url,
                "NAMESRV_EVENT_PUBLISHER": "namesrv_app.live.publish_change",
            },
        )
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "namesrv_site.settings",
            "NAMESRV_DB_PATH": str(gateway.db_path),
            "NAMESRV_INTERNAL_SECRET": SECRET,
            "NAMESRV_PORT": str(gateway.port),
            "NAMESRV_INTERNAL_PORT": str(gateway.internal_port),
            "REDIS_URL": redis_url,
            "NAMESRV_LOG_LEVEL": "WARNING",
            "OPERATOR_PASSWORD": OPERATOR_PASSWORD,
            # Several web workers must share one key, or a session made by one is
            # refused by the next; and the console signs its writes as the test admin.
            "DJANGO_SECRET_KEY": "browser-tests-" + secrets.token_hex(16),
            "NAMESRV_ACL_ACCESS_KEY": ADMIN.access_key,
            "NAMESRV_ACL_SECRET_KEY_FILE": str(gateway.admin_secret_file),
            # The accounts of this test only, not the repository's run/dev.sqlite3.
            "DATABASE_URL": f"sqlite:///{folder / 'shared.sqlite3'}",
            # Collected below and served with hashed names, as on a launched node.
            "NAMESRV_STATIC_ROOT": str(folder / "static"),
        }
        collecting = _start(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
            env,
            folder / "collectstatic.log",
        )
        procs.append(collecting)
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=REPO_ROOT,
            env=env,
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [
                sys.executable,
                "manage.py",
                "create_operator",
                OPERATOR,
                "--password-env",
                "OPERATOR_PASSWORD",
            ],
            cwd=REPO_ROOT,
            env=env,
            check=True,
            capture_output=True,
        )
        assert collecting.wait(START_TIMEOUT_S) == 0, (folder / "collectstatic.log").read_text()
        web_port = free_port()
        procs.append(
            _start(
                asgi_server_argv("127.0.0.1", web_port, workers=BROWSER_WEB_WORKERS),
                env,
                folder / "web.log",
            )
        )
        wait_until(lambda: accepts_connections(web_port), what="web", timeout_s=START_TIMEOUT_S)
        for broker in BROKERS:
            assert gateway.register(broker, TOPICS) == 0
        yield ConsoleNode(gateway, f"http://127.0.0.1:{web_port}", env)
    finally:
        for proc in reversed(procs):
            proc.terminate()
            proc.wait(20)
        if gateway is not None:
            stop_gateway(gateway)


@pytest.fixture(scope="package")
def browser(chromium: Path) -> Iterator[Any]:
    # Package scope, not session: Playwright's sync API keeps an event loop running
    # on the main thread while it is open, and every asyncio test collected after
    # the browser tests would fail with "cannot be called from a running event loop".
    """Headless Chromium driven by Playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any, console_node: ConsoleNode) -> Iterator[Any]:
    """A fresh tab, logged in as the operator."""
    # The cast registers once per session and never heartbeats: register again, or
    # after a long test (the launched-cluster ones take minutes) the scan has expired it.
    for broker in BROKERS:
        assert console_node.gateway.register(broker, TOPICS) == 0
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        yield log_in(context.new_page(), console_node.url, OPERATOR, OPERATOR_PASSWORD)
    finally:
        context.close()


def log_in(tab: Any, url: str, username: str, password: str) -> Any:
    """Sign ``tab`` in to the console at ``url`` through its login form; the tab."""
    tab.goto(f"{url}/")
    tab.fill("input[name=username]", username)
    tab.fill("input[name=password]", password)
    tab.click("button[type=submit]")
    tab.wait_for_url(f"{url}/")
    return tab


def screenshot(tab: Any, name: str) -> None:
    """Save a screenshot for the README."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SCREENSHOTS / name), full_page=False)


def settle(seconds: float = 0.2) -> None:
    """Let a refresh land before a screenshot."""
    time.sleep(seconds)
