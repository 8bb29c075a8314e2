"""run_gateway --config: upstream's -c properties file, refused clearly when wrong;
``-p`` / ``run_node --print-config``: the effective config, printed without starting."""

from __future__ import annotations

import dataclasses
import io
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from namesrv_app.management.commands.run_gateway import namesrv_properties
from node.config import load_node_config, write_node_config
from raftstore.config import NamesrvConfig
from tests.node.hosts import PROJECT_DIR, free_host_ports, write_configs


def test_no_file_means_no_properties() -> None:
    assert namesrv_properties(None) == {}


def test_it_reads_java_properties_by_their_java_names(tmp_path: Path) -> None:
    path = tmp_path / "namesrv.properties"
    path.write_text("! comment\norderMessageEnable = true\nunknownKey=ignored-by-the-config\n")
    assert namesrv_properties(path) == {
        "orderMessageEnable": "true",
        "unknownKey": "ignored-by-the-config",
    }


def test_a_value_of_the_wrong_type_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "namesrv.properties"
    path.write_text("scanNotActiveBrokerInterval=soon\n")
    with pytest.raises(CommandError, match="scanNotActiveBrokerInterval"):
        namesrv_properties(path)


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="--config"):
        namesrv_properties(tmp_path / "nope.properties")


def test_dash_p_prints_the_effective_config_as_key_value_lines_and_starts_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "namesrv.properties"
    path.write_text(
        "orderMessageEnable=true\nlistenPort=19999\nserverChannelMaxIdleTimeSeconds=30\n"
    )
    out = io.StringIO()
    call_command("run_gateway", "-p", "--config", str(path), "--node", "nx", stdout=out)
    lines = out.getvalue().splitlines()
    printed = dict(line.split("=", 1) for line in lines)
    assert lines == sorted(lines) and set(printed) == set(NamesrvConfig().to_properties())
    assert printed["orderMessageEnable"] == "true"
    assert printed["listenPort"] == "19999"
    assert printed["serverChannelMaxIdleTimeSeconds"] == "30"
    assert printed["clusterTest"] == "false"
    with socket.socket() as probe:  # nothing listens: the port is still free
        probe.bind(("127.0.0.1", 19999))


def test_a_key_it_cannot_honour_stops_the_start_with_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "namesrv.properties"
    path.write_text("clientRequestThreadPoolNums=4\n")
    done = subprocess.run(
        [sys.executable, "manage.py", "run_gateway", "--config", str(path), "--port", "0"],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"CommandError: --config {path}: clientRequestThreadPoolNums=4 is refused: requests "
        "run on one asyncio event loop, not a thread pool (leave it at 8)"
    ]


def test_run_node_prints_its_gateways_effective_config(tmp_path: Path) -> None:
    """The node's [namesrv] config_file reaches its gateway as run_gateway --config."""
    (path,), _secrets = write_configs(tmp_path, free_host_ports(["127.0.0.1"]), mode="eventual")
    properties = tmp_path / "namesrv.properties"
    properties.write_text("serverChannelMaxIdleTimeSeconds=45\n")
    config = dataclasses.replace(load_node_config(path), namesrv_config_file=properties)
    write_node_config(config, path)
    out = io.StringIO()
    call_command("run_node", "--config", str(path), "--print-config", stdout=out)
    printed = dict(line.split("=", 1) for line in out.getvalue().splitlines())
    assert printed["listenPort"] == str(config.remoting.port)
    assert printed["serverChannelMaxIdleTimeSeconds"] == "45"
    assert printed["kvConfigPath"].startswith(str(config.data_dir))
