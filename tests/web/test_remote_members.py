"""A member on another host is shown as remote (its status lives on its own console),
not as a node that is down, and does not count in this console's agreement."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.test import Client

from namesrv_app.web import reads
from tests.web.conftest import RunningGateway, log_in, node_settings


def test_a_member_on_another_host_is_remote_not_down(
    settings: Any, gateway: RunningGateway, tmp_path: Path, client: Client, viewer: User
) -> None:
    cluster_file = tmp_path / "cluster.json"
    cluster_file.write_text(
        json.dumps(
            {
                "mode": "eventual",
                "nodes": [
                    {
                        "id": "n1",
                        "host": "127.0.0.1",
                        "remoting_port": gateway.port,
                        "internal_port": gateway.internal_port,
                    },
                    {
                        "id": "n2",
                        "host": "10.0.0.2",
                        "remoting_port": 9876,
                        "console_url": "http://10.0.0.2:8080/",
                    },
                ],
            }
        ),
        encoding="utf-8",
    )
    settings.NAMESRV = node_settings(gateway, cluster_file=str(cluster_file))

    local, remote = reads.node_panels()

    assert local["reachable"] and not local["remote"]
    assert remote["remote"] and not remote["disagrees"]
    assert log_in(client, viewer.username)
    page = client.get("/").content.decode()
    assert "on another host" in page and "http://10.0.0.2:8080/" in page
    assert 'class="badge down"' not in page
