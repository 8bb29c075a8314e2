"""``manage.py run_node --config node.toml``: one NameServer node on this host.

Starts the node's gateway, web process and (with Redis configured) its scan
worker and beat from one config file (node/config.py documents the keys,
docs/DEPLOY.md walks through three hosts), and keeps them together until
SIGTERM or Ctrl-C. ``--check`` reads the file, prints what would run, and exits;
``--print-config`` prints the gateway's effective NamesrvConfig and exits.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from broker_app.management.command import ProjectCommand
from node import processes
from node.config import NodeConfig, NodeConfigError, load_node_config, node_config_document
from node.supervise import SupervisorError, run_node

PRINT_CONFIG_TIMEOUT_S = 60.0


def gateway_config(config: NodeConfig) -> str:
    """The node's gateway's ``run_gateway --print-config``, asked of the very command
    line and environment the node would start it with (one source of truth)."""
    argv = [*processes.gateway_argv(config), "--print-config"]
    env = processes.node_env(config, os.environ)
    # The node writes its cluster file and internal secret when it starts; printing
    # the config starts nothing and reads neither, so the check need not find them.
    env.pop("NAMESRV_CLUSTER_FILE")
    if config.internal_secret_file is None:
        del env["NAMESRV_INTERNAL_SECRET_FILE"]
        env["NAMESRV_INTERNAL_SECRET"] = secrets.token_hex(16)
    try:
        done = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=PRINT_CONFIG_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CommandError(f"{config.node_id}: run_gateway --print-config failed: {exc}") from exc
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["no output"]
        raise CommandError(f"{config.node_id}: {lines[-1]}")
    return done.stdout


class Command(ProjectCommand):
    """Run one node (gateway + web + scan) from its config file."""

    help = "Run one NameServer node on this host from its config file (node.toml)."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--config",
            type=Path,
            required=True,
            metavar="FILE",
            help="the node's config file (TOML, see docs/DEPLOY.md)",
        )
        parser.add_argument(
            "--check",
            action="store_true",
            help="check the file, print the processes it starts, and exit",
        )
        parser.add_argument(
            "--print-config",
            action="store_true",
            help="print the gateway's effective NamesrvConfig (key=value lines) and exit",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            config = load_node_config(options["config"])
        except NodeConfigError as exc:
            raise CommandError(str(exc)) from exc
        if options["print_config"]:
            self.stdout.write(gateway_config(config), ending="")
            return
        if options["check"]:
            plan = {
                "config": node_config_document(config),
                "gateway": processes.gateway_argv(config),
                "web": processes.web_argv(config),
            }
            self.stdout.write(json.dumps(plan, indent=2))
            return
        try:
            code = run_node(config, say=self.stdout.write)
        except (SupervisorError, ValueError, OSError) as exc:
            raise CommandError(str(exc)) from exc
        if code != 0:
            raise CommandError(f"{config.node_id}: a process of the node died (see above)")
