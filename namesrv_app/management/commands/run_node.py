"""``manage.py run_node --config node.toml``: one NameServer node on this host.

Starts the node's gateway, web process and (with Redis configured) its scan
worker and beat from one config file (node/config.py documents the keys,
docs/DEPLOY.md walks through three hosts), and keeps them together until
SIGTERM or Ctrl-C. ``--check`` reads the file, prints what would run, and exits;
``--print-config`` prints the gateway's effective NamesrvConfig and exits.
``--force-new-cluster`` first starts the node as a new one-member cluster holding its
applied state (recovery after quorum loss, node/force.py), writes the audit entry and
warns; every start checks the marker that leaves (a config whose peers still name a lost
member is refused).
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from broker_app.management.command import ProjectCommand
from namesrv_app import recovery
from node import force, processes
from node.config import NodeConfig, NodeConfigError, load_node_config, node_config_document
from node.supervise import SupervisorError, run_node
from raftstore.backup import BackupError, read_backup_file

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


def with_restore(config: NodeConfig, path: Path) -> NodeConfig:
    """``config`` whose gateway starts from the backup in ``path``, checked here first, so
    a damaged or foreign file stops the node before anything starts (the gateway checks
    its Raft folder: gateway/restore.py)."""
    try:
        read_backup_file(path)
    except BackupError as exc:
        raise CommandError(f"--restore-state {exc}; nothing was started") from exc
    return dataclasses.replace(config, restore_state_file=path.resolve())


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
        parser.add_argument(
            "--force-new-cluster",
            action="store_true",
            help="recovery after quorum loss (a majority of the members gone for good): "
            "replay this node's journal, start it as a new one-member cluster holding its "
            "applied state (old Raft folder kept aside), then run as usual; grow it back "
            "with add-node. Writes the lost majority acknowledged after this node's last "
            "applied entry are lost (docs/DEPLOY.md, Recovery after quorum loss)",
        )
        parser.add_argument(
            "--restore-state",
            type=Path,
            default=None,
            metavar="FILE",
            help="a new cluster's first start: the node starts from this backup, on every "
            "host the same file, each into an empty Raft folder (docs/DEPLOY.md, Restoring a "
            "backup); a folder already restored from this file starts as it is",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            config = load_node_config(options["config"])
        except NodeConfigError as exc:
            raise CommandError(str(exc)) from exc
        forcing = options["force_new_cluster"]
        if forcing and options["restore_state"] is not None:
            raise CommandError(
                "--force-new-cluster starts from this node's own state; --restore-state "
                "starts a new cluster from a backup: give one of them"
            )
        if options["restore_state"] is not None:
            config = with_restore(config, options["restore_state"])
        try:
            if forcing:
                force.check_forceable(config)
            else:
                # Every later start after a forced recovery, and a first start alone.
                force.refuse_previous_members(config)
                force.refuse_lonely_first_start(config)
        except force.ForceError as exc:
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
            code = run_node(
                config,
                say=self.stdout.write,
                before_start=self._force_new_cluster if forcing else None,
            )
        except (SupervisorError, force.ForceError, ValueError, OSError) as exc:
            raise CommandError(str(exc)) from exc
        if code != 0:
            raise CommandError(f"{config.node_id}: a process of the node died (see above)")

    def _force_new_cluster(self, config: NodeConfig, env: Mapping[str, str]) -> NodeConfig:
        """``--force-new-cluster``, once the databases are migrated: the steps
        (node/force.py), then the audit entry and the warning; the config to start from."""
        outcome = force.force_new_cluster(config, env, say=self.stdout.write)
        summary = outcome.summary()
        lines = recovery.forced_lines(
            config.node_id, force.HOW_RUN_NODE, summary["state"], summary["lost_members"]
        )
        lines.append(
            f"Saved state {outcome.marker.backup_file}; old Raft folder "
            f"{outcome.marker.previous_raft_dir}; marker {outcome.marker_file}. Set [peers] in "
            f"{config.source} to none before the next start."
        )
        failed = recovery.record(
            env["DATABASE_URL"], node_id=config.node_id, detail=summary, result=lines[0]
        )
        recovery.announce([*lines, *([failed] if failed else [])], self.stderr.write)
        self.stdout.flush()
        return outcome.config
