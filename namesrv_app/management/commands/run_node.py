"""``manage.py run_node --config node.toml``: one NameServer node on this host.

Starts the node's gateway, web process and (with Redis configured) its scan
worker and beat from one config file (node/config.py documents the keys,
docs/DEPLOY.md walks through three hosts), and keeps them together until
SIGTERM or Ctrl-C. ``--check`` reads the file, prints what would run, and exits.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from namesrv_app.management.command import ProjectCommand
from node import processes
from node.config import NodeConfigError, load_node_config, node_config_document
from node.supervise import SupervisorError, run_node


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

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            config = load_node_config(options["config"])
        except NodeConfigError as exc:
            raise CommandError(str(exc)) from exc
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
