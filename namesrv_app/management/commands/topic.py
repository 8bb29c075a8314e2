"""``manage.py topic create|delete|list``: the console's and the API's topic operations, scripted.

``create`` and ``delete`` call :mod:`namesrv_app.topic_admin`, as the console's forms
and ``/api/v1/topics/`` do: through the brokers first by default (UPDATE_AND_CREATE_TOPIC /
DELETE_TOPIC_IN_BROKER), then every NameServer; ``--method namesrv`` is the
NameServer-only path. Their input is checked first, by the rules the console and the
API check (:mod:`namesrv_app.topic_rules`), with the same sentences: a refusal sends
nothing and exits 1. The command prints the sentence, then one line per broker and
per node, and exits non-zero unless the change went through everywhere (2 when
partly done, 1 otherwise), so a script can tell. Every change and every refusal is
an audit entry (channel ``cli``, the shell's OS account as the user), as the
console's and the API's are.

``list`` prints the topics this node's projection knows, the rows of
``GET /api/v1/topics/`` (all of them, unpaginated) as a table; ``--json`` prints
the API's JSON shape.

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
from namesrv_app import audit, topic_admin, topic_rules, topic_types
from namesrv_app.api.serializers import TopicSummarySerializer
from namesrv_app.gateway_client import GatewayError
from namesrv_app.management.run_dir import REEXEC_MARK, add_run_dir_argument, default_run_dir
from namesrv_app.topic_rules import DEFAULT_PERM, DEFAULT_QUEUE_NUMS, QUEUE_NUMS_MAX, QUEUE_NUMS_MIN
from namesrv_app.web import reads
from node.config import NodeConfigError, load_node_config
from node.processes import node_env
from remoting.model import QueueData

NODE_CONFIG_FILE_NAME = "node.toml"
DEFAULT_NODE = "n1"
PARTLY_DONE_EXIT = 2
REFUSED_STATUS = 400
"""A refusal is what the API answers 400: nothing was sent."""
OPTION_OF_FIELD = {
    "topic": "topic",
    "queue_datas": "--brokers",
    "read_queue_nums": "--read-queue-nums",
    "write_queue_nums": "--write-queue-nums",
    "perm": "--perm",
}
"""The API's field names as the command's options, for a refusal's sentence."""
NOT_AN_INTEGER = "A valid integer is required."
"""DRF's sentence for a number field that holds no integer (what the API answers)."""
LIST_COLUMNS = (
    ("TOPIC", "topic"),
    ("TYPE", "type"),
    ("BROKER GROUPS", "groups"),
    ("READ QUEUES", "read_queues"),
    ("WRITE QUEUES", "write_queues"),
    ("PERM", "perm"),
    ("VERSION", "version"),
)


class Refused(Exception):
    """Input a rule refuses: field -> messages, as the API's 400 has them."""

    def __init__(self, refusals: dict[str, list[str]]) -> None:
        self.refusals = refusals
        super().__init__(
            "; ".join(
                f"{OPTION_OF_FIELD.get(field, field)}: {' '.join(messages)}"
                for field, messages in refusals.items()
            )
        )


def _integer(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _or(value: int | None, stand_in: int) -> int:
    return stand_in if value is None else value


def create_refusals(options: dict[str, Any]) -> dict[str, list[str]]:
    """The shared topic rules over ``create``'s options (a count that is no integer is
    refused as the API refuses it)."""
    fields = ("read_queue_nums", "write_queue_nums", "perm")
    numbers = {name: _integer(str(options[name])) for name in fields}
    refusals = {name: [NOT_AN_INTEGER] for name, value in numbers.items() if value is None}
    # A field that is no integer is refused above; a valid stand-in checks the rest.
    found = topic_rules.create_refusals(
        options["topic"],
        options["brokers"],
        _or(numbers["read_queue_nums"], QUEUE_NUMS_MIN),
        _or(numbers["write_queue_nums"], QUEUE_NUMS_MIN),
        _or(numbers["perm"], DEFAULT_PERM),
    )
    return {**found, **refusals}


class Command(ProjectCommand):
    """Create, delete or list topics through the one topic service."""

    help = (
        "Create or delete a topic: through the brokers first, then every NameServer "
        "(the console's and the API's way), or on the NameServers only with --method "
        "namesrv; or list the topics this node knows."
    )
    # A client of the node's gateway: the node's own processes run the settings checks.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        """Three subcommands, each with the node to act through."""
        actions = parser.add_subparsers(dest="action", required=True, metavar="create|delete|list")
        create = actions.add_parser(
            "create",
            help="create a topic on broker groups",
            description="Create a topic on each chosen broker group's master, which "
            "registers it with every NameServer (or on the NameServers only). Creating "
            "a topic that exists says what changed.",
            allow_abbrev=False,
        )
        create.add_argument("topic", help="the topic name (^[%%|a-zA-Z0-9_-]+$, <= 127 chars)")
        create.add_argument(
            "--brokers",
            nargs="+",
            required=True,
            metavar="GROUP",
            help="the broker groups (brokerName) that serve the topic, each named once",
        )
        # Plain text: the shared rules check them, with the API's sentences.
        for name in ("--read-queue-nums", "--write-queue-nums"):
            create.add_argument(
                name,
                default=str(DEFAULT_QUEUE_NUMS),
                metavar="N",
                help=f"queues per group, {QUEUE_NUMS_MIN} to {QUEUE_NUMS_MAX} "
                "(default: %(default)s)",
            )
        create.add_argument(
            "--perm",
            default=str(DEFAULT_PERM),
            metavar="PERM",
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
        listing = actions.add_parser(
            "list",
            help="list the topics this node knows",
            description="The topics of this node's projection, as GET /api/v1/topics/ "
            "lists them (every page): type, broker groups, queues, perm, version.",
            allow_abbrev=False,
        )
        listing.add_argument("--search", default="", help="a substring of the topic name")
        listing.add_argument("--cluster", default="", help="only topics on this cluster")
        listing.add_argument("--broker", default="", help="only topics on this broker group")
        listing.add_argument(
            "--type",
            choices=topic_types.TYPE_FILTERS,
            default=topic_types.ALL,
            help="normal, retry, dlq or system; user = all but system (default: %(default)s)",
        )
        for sub in (create, delete):
            sub.add_argument(
                "--method",
                choices=topic_admin.METHODS,
                default=topic_admin.METHOD_BROKERS,
                help=f"{topic_admin.METHOD_HELP} (default: %(default)s)",
            )
        for sub in (create, delete, listing):
            self._common(sub)

    def _common(self, parser: CommandParser) -> None:
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
        """Switch to the node's settings, then list, or check, run, record and print the
        change and exit by its status."""
        self._use_node(options)
        if options["action"] == "list":
            self._list(options)
            return
        action, topic = f"topic {options['action']}", options["topic"]
        detail = self._audit_detail(options)
        try:
            change = self._change(options)
        except Refused as exc:
            audit.record_command(
                action=action, target=topic, detail=detail, status=REFUSED_STATUS, result=str(exc)
            )
            if options["json"]:
                body = {"ok": False, "detail": str(exc), **exc.refusals, "status": REFUSED_STATUS}
                self.stdout.write(json.dumps(body))
            raise CommandError(f"refused, nothing changed: {exc}") from None
        except GatewayError as exc:
            audit.record_command(
                action=action, target=topic, detail=detail, status=exc.http_status, result=str(exc)
            )
            raise CommandError(str(exc)) from exc
        audit.record_command(
            action=action,
            target=topic,
            detail=detail,
            status=change.http_status,
            result=change.detail,
        )
        if options["json"]:
            self.stdout.write(json.dumps({**change.body(), "status": change.http_status}))
        else:
            self._report(change)
        if not change.complete:
            code = PARTLY_DONE_EXIT if change.http_status == 207 else 1
            raise CommandError("the change did not go through everywhere", returncode=code)

    @staticmethod
    def _audit_detail(options: dict[str, Any]) -> dict[str, Any]:
        """What was asked, as the API's audit entries keep the request's fields."""
        names = ("brokers", "read_queue_nums", "write_queue_nums", "perm", "cluster", "method")
        return {"topic": options["topic"], **{n: options[n] for n in names if n in options}}

    def _change(self, options: dict[str, Any]) -> topic_admin.TopicChange:
        topic, method = options["topic"], options["method"]
        if options["action"] == "delete":
            try:
                topic_rules.validate_deletable_topic(topic)
            except ValidationError as exc:
                raise Refused({"topic": list(exc.messages)}) from None
            return topic_admin.delete_topic(topic, options["cluster"] or None, method)
        refusals = create_refusals(options)
        if refusals:
            raise Refused(refusals)
        queues = [
            QueueData(
                name,
                int(options["read_queue_nums"]),
                int(options["write_queue_nums"]),
                int(options["perm"]),
            )
            for name in options["brokers"]
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

    def _list(self, options: dict[str, Any]) -> None:
        """The API list's rows, every page: JSON in its envelope, or a table."""
        rows = list(
            TopicSummarySerializer(
                reads.topic_summaries(
                    options["search"],
                    options["cluster"],
                    options["broker"],
                    type_filter=options["type"],
                ),
                many=True,
            ).data
        )
        if options["json"]:
            body = {"count": len(rows), "next": None, "previous": None, "results": rows}
            self.stdout.write(json.dumps(body))
            return
        groups = reads.topic_queues_by_broker(
            [r["topic"] for r in rows], options["cluster"], options["broker"]
        )
        self.stdout.write(list_table(rows, groups))

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


def list_table(rows: list[dict[str, Any]], groups: dict[str, list[dict[str, Any]]]) -> str:
    """The topic list as aligned columns under a header line, and a count line."""
    cells = [
        {
            **row,
            "groups": ", ".join(g["broker_name"] for g in groups.get(row["topic"], []))
            or str(row["brokers"]),
            "perm": str(row["perm_min"])
            if row["perm_min"] == row["perm_max"]
            else f"{row['perm_min']}-{row['perm_max']}",
        }
        for row in rows
    ]
    table = [[title for title, _ in LIST_COLUMNS]]
    table += [[str(cell[key]) for _, key in LIST_COLUMNS] for cell in cells]
    widths = [max(len(line[i]) for line in table) for i in range(len(LIST_COLUMNS))]
    lines = [
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in table
    ]
    count = len(rows)
    lines.append(f"{count} topic{'' if count == 1 else 's'}")
    return "\n".join(lines)
