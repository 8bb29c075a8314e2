"""``manage.py cluster up|down|status|add-node|remove-node|restart|backup|recover``: a
local NameServer cluster.

Each verb is a subcommand with only its own options (``cluster down --nodes 5`` is a
usage error, not a silently ignored option). ``add-node`` and ``remove-node ID``
change the Raft membership of a raft-mode cluster one node at a time (refused while
a change is pending). ``backup FILE`` saves a consistent backup of the cluster's state
and ``up --restore FILE`` starts a new cluster from one (:mod:`localcluster.backups`).
``restart ID`` stops one node's processes if they still run and
starts them again; ``up --node ID`` starts those of its processes that are not running
(:mod:`localcluster.restart`). ``recover --survivor ID`` starts the survivor of a lost
majority again as a one-member cluster and takes the others out
(:mod:`localcluster.recover`; this command writes its audit entry, as it does for
``add-node``, ``remove-node`` and ``up --restore``, refusals included:
:mod:`namesrv_app.cluster_audit`).

A thin shell over :mod:`localcluster.launcher`, which holds every step as a plain
function (the integration tests call the same functions).
"""

from __future__ import annotations

import dataclasses
import json
import signal
import time
from pathlib import Path
from types import FrameType
from typing import Any

from django.core.management.base import CommandError, CommandParser

from broker_app.management.command import ProjectCommand
from localcluster import launcher
from namesrv_app import cluster_audit, recovery
from namesrv_app.agreement import mark_agreement
from namesrv_app.management import cluster_text
from raftstore import vocab
from remoting.tls import TlsMode

FOREGROUND_POLL_S = 1.0
STATUS_EXIT_DEAD = 3


def _raise_interrupt(_signum: int, _frame: FrameType | None) -> None:
    """Turn SIGTERM into KeyboardInterrupt so ``up`` stops what it started."""
    raise KeyboardInterrupt


class Command(ProjectCommand):
    """Start, inspect or stop the gateways, web processes, Redis and Celery of a local cluster."""

    help = (
        "Start (up), inspect (status) or stop (down) a local NameServer cluster, start one "
        "of its nodes again (restart ID, or up --node ID), or grow (add-node), shrink "
        "(remove-node) or recover (recover --survivor ID, after a lost majority) a raft-mode "
        "one; `cluster VERB --help` lists the verb's options."
    )
    # The launcher's own settings (the shell's) are not the nodes': each gateway checks
    # its node's at start (run_gateway), so checking here only cost every verb ~0.7 s.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        """One subcommand per verb, each with only its own options."""
        verbs = parser.add_subparsers(
            dest="verb",
            required=True,
            metavar="up|down|status|add-node|remove-node|restart|backup|recover",
        )
        up = self._verb(
            verbs,
            "up",
            "start a cluster: its nodes' gateways and web processes, Redis and Celery",
        )
        self._verb(verbs, "down", "stop every process of the cluster")
        self._verb(verbs, "status", "what runs, and whether the nodes agree on what clients see")
        self._verb(verbs, "add-node", "raft mode: start one more node and add it to the Raft group")
        remove = self._verb(
            verbs, "remove-node", "raft mode: take one node out of the Raft group and stop it"
        )
        remove.add_argument("node_id", metavar="ID", help="the node to remove (e.g. n4)")
        restart = self._verb(
            verbs,
            "restart",
            "stop one node's gateway and web process if they still run and start them again "
            "from its node.toml and folder (raft: it rejoins and catches up)",
        )
        restart.add_argument("node_id", metavar="ID", help="the node to restart (e.g. n2)")
        launcher.backup_arguments(self._verb(verbs, "backup", launcher.BACKUP_HELP))
        launcher.recover_arguments(self._verb(verbs, "recover", launcher.RECOVER_HELP))
        self._up_arguments(up)
        up.add_argument(
            "--node",
            metavar="ID",
            help="start only this node of the running cluster again: those of its processes "
            "that are not running, from its node.toml, ports and folder (refused when they "
            "all run); takes no other option but --run-dir and --json",
        )
        # Which up options `--node` was given besides; an explicit default goes unnoticed,
        # and that is harmless: it asks for nothing `--node` ignores.
        self._up_defaults = {a.dest: a.default for a in up._actions if a.option_strings}

    @staticmethod
    def _verb(verbs: Any, name: str, text: str) -> CommandParser:
        """A verb's parser with the options every verb takes."""
        sub: CommandParser = verbs.add_parser(
            name, help=text, description=text[0].upper() + text[1:] + "."
        )
        sub.add_argument(
            "--run-dir",
            default="run/local",
            help="the cluster's folder: config, logs, databases, secrets, pids (default run/local)",
        )
        sub.add_argument(
            "--json", action="store_true", help="print a machine-readable summary (JSON)"
        )
        return sub

    @staticmethod
    def _up_arguments(up: CommandParser) -> None:
        """``up``'s node count, mode, port layout and extras."""
        up.add_argument(
            "--raft-base-port",
            type=int,
            default=launcher.DEFAULT_RAFT_BASE_PORT,
            help="raft mode: first Raft port (7101 + i by default; 0 = any free port)",
        )
        up.add_argument(
            "--nodes",
            type=int,
            default=launcher.DEFAULT_NODES,
            help=f"how many NameServer nodes (default {launcher.DEFAULT_NODES})",
        )
        up.add_argument(
            "--mode",
            choices=list(vocab.MODES),
            default=launcher.DEFAULT_MODE,
            help="eventual (each node applies what it hears, as upstream) or raft "
            f"(every write through a Raft log); default {launcher.DEFAULT_MODE}",
        )
        up.add_argument(
            "--base-port",
            type=int,
            default=launcher.DEFAULT_BASE_PORT,
            help=f"first remoting port, one per node (default {launcher.DEFAULT_BASE_PORT}; "
            "0 = free ports)",
        )
        up.add_argument(
            "--web-base-port",
            type=int,
            default=launcher.DEFAULT_WEB_BASE_PORT,
            help="first console/API port, one per node "
            f"(default {launcher.DEFAULT_WEB_BASE_PORT}; 0 = free ports)",
        )
        up.add_argument(
            "--internal-base-port",
            type=int,
            default=launcher.DEFAULT_INTERNAL_BASE_PORT,
            help="first internal port (scan, status), one per node "
            f"(default {launcher.DEFAULT_INTERNAL_BASE_PORT}; 0 = free ports)",
        )
        up.add_argument(
            "--redis-port",
            type=int,
            default=launcher.DEFAULT_REDIS_PORT,
            help=f"the cluster's Redis (default {launcher.DEFAULT_REDIS_PORT}; 0 = a free port)",
        )
        up.add_argument(
            "--metrics-base-port",
            type=int,
            default=None,
            help="first gateway metrics port (29876 + i; 0 = free ports; by default 0 when "
            "--base-port is 0); -1: no metrics ports",
        )
        up.add_argument(
            "--demo-broker-base-port",
            type=int,
            default=None,
            help="--demo: first broker port (10911 + 10 per broker; 0 = free ports; "
            "by default 0 when --base-port is 0)",
        )
        up.add_argument(
            "--raft-dial",
            action="append",
            default=[],
            metavar="NODE:PEER=HOST:PORT[,...]",
            help="raft mode, repeatable: node NODE dials Raft member PEER at HOST:PORT instead "
            "(e.g. a tools/faultproxy link), from its first start",
        )
        up.add_argument(
            "--skew-allowance-ms",
            action="append",
            default=[],
            metavar="[NODE=]MS",
            help="raft mode, repeatable: the replicated expiry's clock-skew allowance, for "
            "every node (MS) or one (NODE=MS); default: the gateway's",
        )
        up.add_argument(
            "--no-acl",
            action="store_true",
            help="run the gateways without the remoting ACL: ANY local process may then "
            "change routes, KV and config (by default admin writes need the admin account)",
        )
        up.add_argument(
            "--tls",
            choices=[mode.value for mode in TlsMode],
            default=TlsMode.DISABLED.value,
            help="the remoting ports' tls.server.mode: permissive serves TLS and plain "
            "clients, enforcing TLS only; makes a CA and certificates in the run folder "
            "(tls/), the web ports then serve HTTPS and every internal client speaks TLS",
        )
        up.add_argument(
            "--demo",
            action="store_true",
            help="also start real brokers: broker-a and broker-b, a master and a slave each",
        )
        up.add_argument(
            "--demo-sim",
            action="store_true",
            help="also start simulated brokers registering demo topics (experiments)",
        )
        launcher.restore_argument(up)
        up.add_argument(
            "--foreground",
            action="store_true",
            help="stay attached; Ctrl-C or SIGTERM stops the cluster",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Dispatch to the verb."""
        run_dir, verb = Path(options["run_dir"]), options["verb"]
        try:
            if verb == "up":
                self._up(run_dir, options)
            elif verb == "down":
                self._emit(launcher.cluster_down(run_dir), options["json"], cluster_text.down_text)
            elif verb == "add-node":
                summary = cluster_audit.add_node(run_dir, self.stderr.write)
                self._emit(summary, options["json"], cluster_text.up_text)
            elif verb == "remove-node":
                summary = cluster_audit.remove_node(run_dir, options["node_id"], self.stderr.write)
                self._emit(summary, options["json"], cluster_text.up_text)
            elif verb == "backup":
                saved = launcher.cluster_backup(run_dir, options["file"], options["from_node"])
                self._emit(saved, options["json"], launcher.backup_text)
            elif verb == "restart":
                summary = launcher.cluster_restart_node(run_dir, options["node_id"])
                self._emit(summary, options["json"], launcher.restart_text)
            elif verb == "recover":
                summary = launcher.cluster_recover(run_dir, options["survivor"])
                # The launcher never imports Django: the audit entry is written here.
                recovery.record_local(summary, self.stderr.write)
                self._emit(summary, options["json"], cluster_text.recover_text)
            else:
                self._status(run_dir, options["json"])
        except launcher.LauncherError as exc:
            raise CommandError(str(exc)) from exc

    def _up(self, run_dir: Path, options: dict[str, Any]) -> None:
        if options["node"] is not None:
            self._up_node(run_dir, options)
            return
        launcher.refuse_running(run_dir.resolve())
        plan = launcher.plan_ports(
            run_dir,
            nodes=options["nodes"],
            mode=options["mode"],
            base_port=options["base_port"],
            web_base_port=options["web_base_port"],
            internal_base_port=options["internal_base_port"],
            redis_port=options["redis_port"],
            raft_base_port=options["raft_base_port"],
            metrics_base_port=options["metrics_base_port"],
        )
        plan = launcher.with_gateway_options(
            plan,
            raft_dial=launcher.parse_node_raft_dial(options["raft_dial"]),
            skew_allowance_ms=launcher.parse_node_skew_allowance(
                options["skew_allowance_ms"], [n.node_id for n in plan.nodes]
            ),
        )
        plan = dataclasses.replace(plan, acl=not options["no_acl"], tls=TlsMode(options["tls"]))
        if options["foreground"]:
            # A SIGTERM while starting must roll back like Ctrl-C does, not orphan processes.
            signal.signal(signal.SIGTERM, _raise_interrupt)
        demo_ports = options["demo_broker_base_port"]
        if demo_ports is None:
            demo_ports = 0 if options["base_port"] == 0 else launcher.DEMO_BROKER_BASE_PORT
        restore = options["restore"]

        def start() -> dict[str, Any]:
            return launcher.cluster_up(
                plan,
                demo=options["demo"],
                demo_sim=options["demo_sim"],
                demo_broker_base_port=demo_ports,
                restore=restore,
            )

        if restore is None:
            summary = start()
        else:
            summary = cluster_audit.up_restore(run_dir, restore, start, self.stderr.write)
        self._emit(summary, options["json"], cluster_text.up_text)
        if options["foreground"]:
            self._stay_attached(plan.run_dir)

    def _up_node(self, run_dir: Path, options: dict[str, Any]) -> None:
        """``up --node ID``: the node starts from its recorded config, so an option that
        would plan a cluster is a usage error rather than silently ignored."""
        ignored = sorted(
            f"--{dest.replace('_', '-')}"
            for dest, default in self._up_defaults.items()
            if dest not in ("node", "run_dir", "json", "help") and options.get(dest) != default
        )
        if ignored:
            raise CommandError(
                f"up --node starts {options['node']} from its node.toml and the ports in "
                f"cluster.json; it takes no {', '.join(ignored)}"
            )
        summary = launcher.cluster_start_node(run_dir, options["node"])
        self._emit(summary, options["json"], launcher.restart_text)

    def _status(self, run_dir: Path, as_json: bool) -> None:
        status = launcher.cluster_status(run_dir)
        panels = [
            {"node_id": n["id"], "reachable": n["status"] is not None, **(n["status"] or {})}
            for n in status["nodes"]
        ]
        if panels:
            # What clients can see, as the consoles compare it (namesrv_app.agreement).
            status["agree"] = mark_agreement(panels)
            status["live_missing"] = {
                p["node_id"]: p["live_missing"] for p in panels if p["live_missing"]
            }
        self._emit(status, as_json, cluster_text.status_text)
        if not status["running"]:
            raise SystemExit(STATUS_EXIT_DEAD)

    def _emit(self, data: dict[str, Any], as_json: bool, text: Any) -> None:
        if as_json:
            self.stdout.write(json.dumps(data))
        else:
            self.stdout.write(text(data))
        self.stdout.flush()

    def _stay_attached(self, run_dir: Path) -> None:
        """Wait for Ctrl-C or SIGTERM, warn about processes that die, then run ``down``."""
        stop_requested: list[int] = []

        def request_stop(signum: int, _frame: FrameType | None) -> None:
            stop_requested.append(signum)

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        # `cluster down` from another shell signals this process through this file.
        foreground = launcher.record_foreground(run_dir)
        self.stdout.write("Press Ctrl-C (or run `cluster down`) to stop the cluster.")
        self.stdout.flush()
        reported: set[str] = set()
        try:
            while not stop_requested:
                time.sleep(FOREGROUND_POLL_S)
                reported |= self._report_deaths(run_dir, reported)
        finally:
            if foreground.exists():
                self.stdout.write("stopping the cluster ...")
                self.stdout.write(cluster_text.down_text(launcher.cluster_down(run_dir)))
                foreground.unlink(missing_ok=True)
            else:
                # `cluster down` from another shell removed the record once it had
                # stopped every process, then ended this one: nothing is left to stop.
                self.stdout.write(
                    f"the cluster in {run_dir} was stopped by `cluster down` from another shell"
                )
            self.stdout.flush()

    def _report_deaths(self, run_dir: Path, reported: set[str]) -> set[str]:
        """Say once per process when one died while attached; return what was reported
        (name and pid: a node's process that `cluster restart` started and that dies
        again is reported again). Exits during a ``down`` from another shell are a stop,
        not deaths."""
        launcher.reap_children()
        if launcher.stopping(run_dir):
            if "(down)" not in reported:
                self.stdout.write("`cluster down` from another shell is stopping the cluster ...")
                self.stdout.flush()
            return reported | {"(down)"}
        dead = {
            f"{p['name']} {p['pid']}": p
            for p in launcher.cluster_status(run_dir, ask_nodes=False)["processes"]
            if not p["alive"] and f"{p['name']} {p['pid']}" not in reported
        }
        for process in dead.values():
            self.stderr.write(
                f"{process['name']} (pid {process['pid']}) exited; see {process['log']}"
            )
        return set(dead)
