"""``/rocketmq/nsaddr``, the address server, through the real Django stack: eventual mode
lists the configured nodes; the answer is public, read-only, plain text and passes the
host check; raft mode without its gateway says so; a production-profile process answers
upstream's plain-HTTP clients instead of redirecting them. Raft mode against a launched
cluster: tests/integration/test_address_server.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from namesrv_app.web.address_server import members_remoting
from remoting.namesrv_list import format_namesrv_list

REPO_ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
CONFIGURED = ("10.0.0.2:9876", "10.0.0.1:9876", "10.0.0.1:10000")
SUBPROCESS_TIMEOUT_S = 120


@pytest.fixture
def eventual_node(settings: Any, tmp_path: Path) -> str:
    """An eventual node whose cluster file names three members (not in order); the
    answer they make."""
    cluster_file = tmp_path / "cluster.json"
    nodes = [
        {"id": f"n{i}", "remoting_addr": addr, "internal_port": 1}
        for i, addr in enumerate(CONFIGURED, start=1)
    ]
    cluster_file.write_text(json.dumps({"mode": "eventual", "nodes": nodes}), encoding="utf-8")
    settings.NAMESRV = {
        "NODE_ID": "n1",
        "MODE": "eventual",
        "CLUSTER_FILE": str(cluster_file),
        "INTERNAL_PORT": 1,  # never asked: eventual mode answers from the configuration
    }
    return "10.0.0.1:9876;10.0.0.1:10000;10.0.0.2:9876"


@pytest.mark.django_db
def test_eventual_mode_lists_the_configured_nodes_for_every_subgroup(eventual_node: str) -> None:
    client = Client(HTTP_HOST=HOST)
    for path in ("/rocketmq/nsaddr", "/rocketmq/nsaddr-prod", "/rocketmq/nsaddr-unit_1.a?nofix=1"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert response.content.decode() == eventual_node
        assert response["Content-Type"] == "text/plain; charset=utf-8"
        assert "no-cache" in response["Cache-Control"]
        assert response["X-Content-Type-Options"] == "nosniff"
        assert not response.cookies  # no session, no CSRF cookie: nothing to log in to
    assert client.head("/rocketmq/nsaddr").status_code == 200


@pytest.mark.django_db
def test_it_is_read_only_and_behind_the_host_check(eventual_node: str) -> None:
    client = Client(HTTP_HOST=HOST, enforce_csrf_checks=True, raise_request_exception=False)
    for method in (client.post, client.put, client.delete, client.patch):
        assert method("/rocketmq/nsaddr").status_code == 405
    assert client.get("/rocketmq/nsaddr", HTTP_HOST="evil.example").status_code == 400
    assert client.get("/rocketmq/nsaddr-a/b").status_code == 404
    assert client.get("/rocketmq/nsaddr-" + "x" * 65).status_code == 404


@pytest.mark.django_db
def test_raft_mode_without_its_gateway_answers_503(settings: Any) -> None:
    settings.NAMESRV = {"NODE_ID": "n9", "MODE": "raft", "PORT": 1, "INTERNAL_PORT": 1}
    response = Client(HTTP_HOST=HOST).get("/rocketmq/nsaddr")
    assert response.status_code == 503
    assert response.content == b"the gateway does not answer"


def test_a_member_is_listed_by_its_record_else_by_the_config_else_not_at_all() -> None:
    answer = {
        "members": ["10.0.0.1:7101", "10.0.0.2:7101", "10.0.0.3:7101", "10.0.0.4:7101"],
        "remoting": {
            "10.0.0.1:7101": "10.0.0.1:9876",
            "10.0.0.2:7101": "not an address",  # a tampered record falls back
            "10.0.0.9:7101": "10.0.0.9:9876",  # not a member: never listed
        },
    }
    configured = {"10.0.0.2:7101": "10.0.0.2:9876", "10.0.0.3:7101": "10.0.0.3:9876"}
    found = members_remoting(answer, configured)
    assert found == ["10.0.0.1:9876", "10.0.0.2:9876", "10.0.0.3:9876"]  # 10.0.0.4 unknown
    assert members_remoting(answer, {})[0] == "10.0.0.1:9876"  # records need no config
    assert members_remoting({"members": "x", "remoting": []}, configured) == []
    assert format_namesrv_list(found[::-1]) == ";".join(found)


def test_the_production_profile_answers_plain_http_clients_instead_of_redirecting(
    tmp_path: Path,
) -> None:
    """MixAll.getWSAddr() is always http://: a redirect to HTTPS would lose every
    upstream client, while the console's pages are still redirected."""
    key_file = tmp_path / "django.secret"
    key_file.write_text("k" * 60, encoding="utf-8")
    key_file.chmod(0o600)
    script = (
        "from django.test import Client; c = Client(HTTP_HOST='ns1.example.com'); "
        "print(c.get('/rocketmq/nsaddr').status_code, c.get('/accounts/login/').status_code)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NAMESRV_", "DJANGO_"))}
    env |= {
        "DJANGO_SETTINGS_MODULE": "namesrv_site.settings",
        "NAMESRV_PROFILE": "production",
        "DJANGO_ALLOWED_HOSTS": "ns1.example.com",
        "DJANGO_SECRET_KEY_FILE": str(key_file),
        "NAMESRV_DB_PATH": str(tmp_path / "db.sqlite3"),
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == ["200", "301"]
