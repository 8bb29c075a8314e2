"""``manage.py topic create|delete``: the console's and the API's topic operations, scripted.

Both subcommands call :mod:`namesrv_app.topic_admin`, as the console's forms and
``/api/v1/topics/`` do: through the brokers first by default (UPDATE_AND_CREATE_TOPIC /
DELETE_TOPIC_IN_BROKER), then every NameServer; ``--method namesrv`` is the
NameServer-only path. The command prints the sentence, then one line per broker and
per node, and exits non-zero unless the change went through everywhere (2 when
partly done, 1 otherwise), so a script can tell.

It acts as one node's web process would, so it needs that node's settings (its
gateway's ports, the internal secret, the ACL account it signs with, its database):
``--run-dir RUN`` (``make run``'s ``run/local`` when it exists and nothing else is
given) with ``--node ID`` reads ``RUN/ID/node.toml``; ``--config FILE`` reads a node
config on a host (docs/DEPLOY.md). The command then starts itself again with that
node's environment, as ``--run-dir`` does for ``create_operator``
(:mod:`namesrv_app.management.run_dir`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError, CommandParser

from broker_app.management.command import ProjectCommand
from namesrv_app import topic_admin
from namesrv_app.gateway_client import GatewayError
from namesrv_app.management.run_dir import REEXEC_MARK, add_run_dir_argument, default_run_dir
from namesrv_app.web.forms import (
    DEFAULT_QUEUE_NUMS,
    PERM_VALUES,
    QUEUE_NUMS_MAX,
    QUEUE_NUMS_MIN,
    validate_topic,
)
from node.config import NodeConfigError, load_node_config
from node.processes import node_env
from remoting.model import QueueData

NODE_CONFIG_FILE_NAME = "node.toml"
DEFAULT_NODE = "n1"
PARTLY_DONE_EXIT = 2


def _queue_nums(text: str) -> int:
    value = int(text)
    if not QUEUE_NUMS_MIN <= value <= QUEUE_NUMS_MAX:
        raise ValueError(text)
    return value


class Command(ProjectCommand):
    """Create or delete a topic through the one topic service."""

    help = (
        "Create or delete a topic: through the brokers first, then every NameServer "
        "(the console's and the API's way), or on the NameServers only with --method namesrv."
    )
    # A client of the node's gateway: the node's own processes run the settings checks.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        """Two subcommands, each with the node to act through."""
        actions = parser.add_subparsers(dest="action", required=True, metavar="create|delete")
        create = actions.add_parser(
            "create",
            help="create a topic on broker groups",
            description="Create a topic on each chosen broker group's master, which "
            "registers it with every NameServer (or on the NameServers only).",
            allow_abbrev=False,
        )
        create.add_argument("topic", help="the topic name (^[%%|a-zA-Z0-9_-]+$, <= 127 chars)")
        create.add_argument(
            "--brokers",
            nargs="+",
            required=True,
            metavar="GROUP",
            help="the broker groups (brokerName) that serve the topic",
        )
        for name in ("--read-queue-nums", "--write-queue-nums"):
            create.add_argument(
                name,
                type=_queue_nums,
                default=DEFAULT_QUEUE_NUMS,
                metavar="N",
                help=f"queues per group, {QUEUE_NUMS_MIN}-{QUEUE_NUMS_MAX} (default: %(default)s)",
            )
        create.add_argument(
            "--perm",
            type=int,
            choices=sorted(PERM_VALUES),
            default=6,
            help="2 write, 4 read, 6 read+write (default: %(default)s)",
        )
        delete = actions.add_parser(
            "delete",
            help="delete a topic",
            description="Delete a topic on every broker of its clusters (masters, then "
            "slaves), then on every NameServer (or on the NameServers only).",
            allow_abbrev=False,
        )
        delete.add_argument("topic", help="the topic name")
        delete.add_argument(
            "--cluster", default="", help="delete only this cluster's queues (default: all)"
        )
        for sub in (create, delete):
            self._common(sub)

    def _common(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--method",
            choices=topic_admin.METHODS,
            default=topic_admin.METHOD_BROKERS,
            help=f"{topic_admin.METHOD_HELP} (default: %(default)s)",
        )
        parser.add_argument(
            "--node",
            default=DEFAULT_NODE,
            metavar="ID",
            help="with --run-dir: the node to act through (default: %(default)s)",
        )
        parser.add_argument(
            "--config",
            type=Path,
            default=None,
            metavar="FILE",
            help="act through the node of this config file (node.toml) instead of a run folder",
        )
        parser.add_argument(
            "--json", action="store_true", help="print the API's JSON answer instead of text"
        )
        add_run_dir_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        """Switch to the node's settings, run the change, print and exit by its status."""
        self._use_node(options)
        try:
            change = self._change(options)
        except GatewayError as exc:
            raise CommandError(str(exc)) from exc
        if options["json"]:
            self.stdout.write(json.dumps({**change.body(), "status": change.http_status}))
        else:
            self._report(change)
        if not change.complete:
            code = PARTLY_DONE_EXIT if change.http_status == 207 else 1
            raise CommandError("the change did not go through everywhere", returncode=code)

    def _change(self, options: dict[str, Any]) -> topic_admin.TopicChange:
        topic, method = options["topic"], options["method"]
        if options["action"] == "delete":
            return topic_admin.delete_topic(topic, options["cluster"] or None, method)
        try:
            validate_topic(topic)
        except ValidationError as exc:
            raise CommandError(f"topic {topic!r}: {' '.join(exc.messages)}") from None
        queues = [
            QueueData(
                name, options["read_queue_nums"], options["write_queue_nums"], options["perm"]
            )
            for name in dict.fromkeys(options["brokers"])
        ]
        return topic_admin.create_topic(topic, queues, method)

    def _report(self, change: topic_admin.TopicChange) -> None:
        self.stdout.write(change.detail)
        for broker in change.brokers:
            state = "done" if broker.done else f"FAILED: {broker.error}"
            self.stdout.write(f"  broker {broker.label()}: {state}")
        for node in change.outcome.per_node() if change.outcome else []:
            state = "done" if node["ok"] else f"FAILED: {node['error']}"
            self.stdout.write(f"  node {node['node']}: {state}")

    def _use_node(self, options: dict[str, Any]) -> None:
        """Start again with the chosen node's environment (once; the mark says so)."""
        if os.environ.get(REEXEC_MARK) == "1":
            return
        source = options["config"]
        if source is None:
            run_dir = options["run_dir"] or default_run_dir()
            if run_dir is None:
                return  # this shell's own settings (NAMESRV_* in the environment)
            if options["run_dir"] is None:
                self.stderr.write(
                    f"acting through {options['node']} of {run_dir} "
                    "(--run-dir chooses another cluster)"
                )
            source = run_dir / options["node"] / NODE_CONFIG_FILE_NAME
            if not source.exists():
                raise CommandError(f"{run_dir} has no node {options['node']} ({source} is missing)")
        try:
            env = node_env(load_node_config(source), os.environ)
        except (NodeConfigError, OSError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        if Path(sys.argv[0]).name not in ("manage.py", "raft-namesrv"):
            raise CommandError("--run-dir and --config work from the command line only")
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, *sys.argv], {**env, REEXEC_MARK: "1"})
