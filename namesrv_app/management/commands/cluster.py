"""``manage.py cluster up|down|status|add-node|remove-node``: a local NameServer cluster.

Each verb is a subcommand with only its own options (``cluster down --nodes 5`` is a
usage error, not a silently ignored option). ``add-node`` and ``remove-node ID``
change the Raft membership of a raft-mode cluster one node at a time (refused while
a change is pending).

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
from namesrv_app.agreement import mark_agreement
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
        "Start (up), inspect (status) or stop (down) a local NameServer cluster, or grow "
        "(add-node) or shrink (remove-node) a raft-mode one; `cluster VERB --help` lists "
        "the verb's options."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        """One subcommand per verb, each with only its own options."""
        verbs = parser.add_subparsers(
            dest="verb", required=True, metavar="up|down|status|add-node|remove-node"
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
        self._up_arguments(up)

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
                self._emit(launcher.cluster_down(run_dir), options["json"], self._down_text)
            elif verb == "add-node":
                summary = launcher.cluster_add_node(run_dir)
                self._emit(summary, options["json"], self._up_text)
            elif verb == "remove-node":
                summary = launcher.cluster_remove_node(run_dir, options["node_id"])
                self._emit(summary, options["json"], self._up_text)
            else:
                self._status(run_dir, options["json"])
        except launcher.LauncherError as exc:
            raise CommandError(str(exc)) from exc

    def _up(self, run_dir: Path, options: dict[str, Any]) -> None:
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
        summary = launcher.cluster_up(
            plan,
            demo=options["demo"],
            demo_sim=options["demo_sim"],
            demo_broker_base_port=demo_ports,
        )
        self._emit(summary, options["json"], self._up_text)
        if options["foreground"]:
            self._stay_attached(plan.run_dir)

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
        self._emit(status, as_json, self._status_text)
        if not status["running"]:
            raise SystemExit(STATUS_EXIT_DEAD)

    def _emit(self, data: dict[str, Any], as_json: bool, text: Any) -> None:
        if as_json:
            self.stdout.write(json.dumps(data))
        else:
            self.stdout.write(text(data))
        self.stdout.flush()

    @staticmethod
    def _up_text(summary: dict[str, Any]) -> str:
        lines = [f"NameServer cluster up ({summary['mode']} mode), run folder {summary['run_dir']}"]
        for node in summary["nodes"]:
            lines.append(
                f"  {node['id']}: remoting {node['remoting_addr']}  console {node['console_url']}"
                f"  logs {node['log_dir']}"
            )
        addrs = ";".join(node["remoting_addr"] for node in summary["nodes"])
        lines.append(f"  redis {summary['redis']['url']}  celery logs {summary['run_dir']}/celery")
        lines.append(f"  clients: namesrvAddr={addrs}")
        for broker in summary.get("brokers", []):
            lines.append(f"  broker {broker['label']}: {broker['addr']} (pid {broker['pid']})")
        acl = summary.get("acl") or {}
        if acl.get("enabled"):
            lines.append(
                f"  remoting ACL on: admin account {acl['admin_access_key']}, secret key in "
                f"{acl['admin_secret_file']}; accounts in {acl['file']}"
            )
        else:
            lines.append("  remoting ACL OFF (--no-acl): any local process may change routes")
        tls = summary.get("tls") or {}
        if tls.get("ca_file"):
            lines.append(
                f"  TLS {tls['mode']}: clients check the nodes against {tls['ca_file']}; "
                f"NAMESRV_TLS_CONFIG_FILE={tls['client_config']} makes a tool speak TLS"
            )
        if summary.get("demo_pid"):
            lines.append(f"  demo brokers (pid {summary['demo_pid']}): {summary['run_dir']}/demo")
        metrics = [n["metrics_url"] for n in summary["nodes"] if n.get("metrics_url")]
        if metrics:
            lines.append(f"  gateway metrics (Prometheus): {'  '.join(metrics)}")
        lines.append(
            "  console login: there are no default accounts. Accounts are shared by every node"
            " of the cluster; create an operator with\n"
            f"    .venv/bin/python manage.py create_operator alice --run-dir {summary['run_dir']}"
        )
        return "\n".join(lines)

    @staticmethod
    def _status_text(status: dict[str, Any]) -> str:
        if not status["processes"]:
            return f"no cluster processes recorded in {status['run_dir']}"
        rows = [
            f"{p['name']:<12} pid {p['pid']:<8} {'alive' if p['alive'] else 'DEAD'}"
            for p in status["processes"]
        ]
        for node in status["nodes"]:
            facts = node["status"] or {}
            scalars = ", ".join(
                f"{key}={value}"
                for key, value in sorted(facts.items())
                if not isinstance(value, (list, dict))
            )
            rows.append(f"{node['id']}: {scalars or node['error']}")
            # Raft safety alarms, the scan fallback, a Raft port that is not listening.
            rows.extend(f"{node['id']} ALARM: {alarm}" for alarm in facts.get("alarms", ()))
        if "agree" in status:
            rows.append(
                "the nodes agree on what clients see (routes, cluster info, topics, KV, config)"
                if status["agree"]
                else "THE NODES DISAGREE on what clients see (routes, cluster info, topics, "
                "KV or config)"
            )
            for node_id, missing in sorted(status.get("live_missing", {}).items()):
                rows.append(f"{node_id} does not (yet) count as alive: {', '.join(missing)}")
        return "\n".join([f"cluster in {status['run_dir']}:", *rows])

    @staticmethod
    def _down_text(result: dict[str, Any]) -> str:
        stopped = ", ".join(result["stopped"]) or "nothing was running"
        killed = (
            f" (killed after the grace period: {', '.join(result['killed'])})"
            if result["killed"]
            else ""
        )
        return f"stopped in {result['run_dir']}: {stopped}{killed}"

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
            self.stdout.write("stopping the cluster ...")
            self.stdout.write(self._down_text(launcher.cluster_down(run_dir)))
            foreground.unlink(missing_ok=True)
            self.stdout.flush()

    def _report_deaths(self, run_dir: Path, reported: set[str]) -> set[str]:
        """Say once per process when one died while attached; return the names reported.
        Exits during a ``down`` from another shell are a stop, not deaths."""
        launcher.reap_children()
        if launcher.stopping(run_dir):
            if "(down)" not in reported:
                self.stdout.write("`cluster down` from another shell is stopping the cluster ...")
                self.stdout.flush()
            return reported | {"(down)"}
        dead = {
            p["name"]: p
            for p in launcher.cluster_status(run_dir, ask_nodes=False)["processes"]
            if not p["alive"] and p["name"] not in reported
        }
        for name, process in dead.items():
            self.stderr.write(f"{name} (pid {process['pid']}) exited; see {process['log']}")
        return set(dead)
