"""``run_gateway``'s command line comes from one typed builder (node.processes.GatewayArgs):
a node's config gives the same command line as before the builder, and every field is the
run_gateway option of its name, so renaming an option without the builder fails here."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields, replace
from pathlib import Path

from django.core.management import load_command_class

from node.config import Endpoint, NodeConfig, NodeTls, Peer
from node.processes import GatewayArgs, gateway_argv
from raftstore import vocab
from remoting.tls import TlsMode


def run_gateway_parser() -> argparse.ArgumentParser:
    """The command line of ``manage.py run_gateway``."""
    return load_command_class("namesrv_app", "run_gateway").create_parser(
        "manage.py", "run_gateway"
    )


def _raft_config(data_dir: Path) -> NodeConfig:
    return NodeConfig(
        source=data_dir / "node.toml",
        node_id="n1",
        mode=vocab.MODE_RAFT,
        data_dir=data_dir,
        remoting=Endpoint("10.0.0.1", 9876),
        web=Endpoint("10.0.0.1", 8080),
        internal_port=19876,
        raft=Endpoint("10.0.0.1", 7101),
        raft_bind_host="0.0.0.0",
        remoting_advertise=Endpoint("1.2.3.4", 9876),
        read_front=False,
        below_front_nice=7,
        propose_timeout_s=2.5,
        skew_allowance_ms=750,
        raft_dial=(("10.0.0.2:7101", "127.0.0.1:40001"),),
        peers=(Peer("n2", Endpoint("10.0.0.2", 9876), Endpoint("10.0.0.2", 7101)),),
        metrics=Endpoint("127.0.0.1", 9100),
        namesrv_config_file=Path("/etc/namesrv/namesrv.properties"),
        tls=NodeTls(mode=TlsMode.ENFORCING),
        restore_state_file=Path("/backups/state.json"),
    )


def test_a_node_config_gives_the_command_line_it_always_gave(tmp_path: Path) -> None:
    """The exact command line (``run_node`` and ``cluster up`` start the gateway with it):
    the options, their order and their spelling as before the builder."""
    config = _raft_config(tmp_path)

    assert gateway_argv(config) == [
        sys.executable,
        "-m",
        "namesrv_site.cli",
        "run_gateway",
        *("--node", "n1", "--host", "10.0.0.1", "--port", "9876"),
        *("--internal-port", "19876", "--mode", "raft"),
        *("--ready-file", str(tmp_path / "gateway.ready.json"), "--no-read-front"),
        *("--below-front-nice", "7", "--tls-config", str(tmp_path / "tls.properties")),
        *("--config", "/etc/namesrv/namesrv.properties"),
        *("--restore-state", "/backups/state.json"),
        *("--raft-port", "7101", "--raft-host", "10.0.0.1"),
        *("--raft-peers", "10.0.0.1:7101,10.0.0.2:7101", "--raft-dir", str(tmp_path / "raft")),
        *("--scan-interval-ms", "1000", "--propose-timeout-s", "2.5"),
        *("--skew-allowance-ms", "750", "--remoting-advertise", "1.2.3.4:9876"),
        *("--raft-bind-host", "0.0.0.0", "--raft-dial", "10.0.0.2:7101=127.0.0.1:40001"),
        *("--metrics-port", "9100", "--metrics-host", "127.0.0.1"),
    ]
    # Eventual mode, defaults: no Raft options, no empty ones, the read front on.
    eventual = replace(
        config,
        mode=vocab.MODE_EVENTUAL,
        raft=None,
        raft_bind_host="",
        raft_dial=(),
        read_front=True,
        metrics=None,
        tls=NodeTls(),
        namesrv_config_file=None,
        restore_state_file=None,
    )
    assert gateway_argv(eventual)[4:] == [
        *("--node", "n1", "--host", "10.0.0.1", "--port", "9876"),
        *("--internal-port", "19876", "--mode", "eventual"),
        *("--ready-file", str(tmp_path / "gateway.ready.json"), "--read-front"),
        *("--below-front-nice", "7"),
    ]


def test_every_field_is_the_run_gateway_option_of_its_name(tmp_path: Path) -> None:
    args = GatewayArgs(
        node="n1",
        host="127.0.0.1",
        port=0,
        internal_port=0,
        mode=vocab.MODE_RAFT,
        ready_file=tmp_path / "ready.json",
        read_front=False,
        below_front_nice=3,
        tls_config=tmp_path / "tls.properties",
        config=tmp_path / "namesrv.properties",
        restore_state=tmp_path / "state.json",
        raft_port=7101,
        raft_host="127.0.0.1",
        raft_peers=("127.0.0.1:7101", "127.0.0.1:7102"),
        raft_dir=tmp_path / "raft",
        scan_interval_ms=1000,
        propose_timeout_s=2.5,
        skew_allowance_ms=750,
        remoting_advertise="127.0.0.1:9876",
        raft_bind_host="0.0.0.0",
        raft_dial=(("127.0.0.1:7102", "127.0.0.1:40001"), ("127.0.0.1:7103", "127.0.0.1:40002")),
        metrics_port=9100,
        metrics_host="127.0.0.1",
        migrate=True,
        acl_file=tmp_path / "plain_acl.yml",
        scan_fallback_s=0.5,
    )
    # Every field is given, so a field added without an option here is caught too.
    values = [(f.name, getattr(args, f.name)) for f in fields(args)]
    unset = [name for name, value in values if value is None or value is False]
    assert unset == ["read_front"]  # given: False is --no-read-front

    parsed = vars(run_gateway_parser().parse_args(args.args()))

    joined = {
        "raft_peers": "127.0.0.1:7101,127.0.0.1:7102",
        "raft_dial": "127.0.0.1:7102=127.0.0.1:40001,127.0.0.1:7103=127.0.0.1:40002",
    }
    for field in fields(args):
        assert parsed[field.name] == joined.get(field.name, getattr(args, field.name)), field.name


def test_a_field_left_unset_is_left_off_and_an_empty_dial_map_is_written() -> None:
    assert GatewayArgs().args() == []
    assert GatewayArgs(read_front=True, migrate=False).args() == ["--read-front"]
    # A harness's empty dial map overrides NAMESRV_RAFT_DIAL of the environment.
    assert GatewayArgs(raft_dial=()).args() == ["--raft-dial", ""]
    assert GatewayArgs(node="n1").argv()[-3:] == ["run_gateway", "--node", "n1"]
