"""The command line of a node's web process (what the launcher starts and bench/web.py measures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from localcluster.launcher import (
    WEB_WORKERS_ENV,
    NodePlan,
    asgi_server_argv,
    plan_ports,
    web_argv,
)


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def _node(folder: Path) -> NodePlan:
    plan = plan_ports(
        folder, nodes=1, base_port=0, web_base_port=0, internal_base_port=0, redis_port=0
    )
    return plan.nodes[0]


def test_the_web_process_is_uvicorn_with_the_fast_stack_and_websockets() -> None:
    argv = asgi_server_argv("127.0.0.1", 8123, workers=2)

    assert argv[1:4] == ["-m", "uvicorn", "namesrv_site.asgi:application"]
    assert (_option(argv, "--http"), _option(argv, "--loop")) == ("httptools", "uvloop")
    assert _option(argv, "--ws") == "websockets-sansio"
    assert (_option(argv, "--port"), _option(argv, "--workers")) == ("8123", "2")
    assert "--no-proxy-headers" in argv


def test_a_node_runs_the_worker_count_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = _node(tmp_path)
    monkeypatch.delenv(WEB_WORKERS_ENV, raising=False)
    assert _option(web_argv(node), "--workers") == "1"
    assert _option(web_argv(node), "--port") == str(node.web_port)
    monkeypatch.setenv(WEB_WORKERS_ENV, "3")
    assert _option(web_argv(node), "--workers") == "3"


@pytest.mark.parametrize("bad", ["0", "-1", "two", "1.5", "", "65"])
def test_a_bad_worker_count_is_refused_clearly(
    bad: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = _node(tmp_path)
    monkeypatch.setenv(WEB_WORKERS_ENV, bad)
    with pytest.raises(ValueError, match=WEB_WORKERS_ENV):
        web_argv(node)
