"""``raft-namesrv``: the installed command line, with the commands of ``manage.py``.

A host that installed the wheel has no checkout and so no ``manage.py``; this console script
takes its place. It names the project's own commands by short verbs (``raft-namesrv node
--config /etc/namesrv/node.toml`` is ``manage.py run_node --config ...``) and hands any other
name (``migrate``, ``check``, ``shell``) to Django unchanged. A node's own processes run
through it too (``python -m namesrv_site.cli run_gateway ...``), so they need no checkout.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

PROG = "raft-namesrv"
SETTINGS_MODULE = "namesrv_site.settings"

VERBS: dict[str, str] = {
    "node": "run_node",
    "cluster": "cluster",
    "experiment": "run_experiment",
    "create-operator": "create_operator",
    "topic": "topic",
    "gateway": "run_gateway",
    "backup": "backup",
}
"""The console script's verbs and the management commands they run."""

HELP_FLAGS = frozenset({"-h", "--help"})


def usage() -> str:
    """The verbs, one a line, with the command each runs."""
    width = max(len(verb) for verb in VERBS)
    lines = [f"usage: {PROG} VERB [ARGS...]   ({PROG} VERB --help for a verb's options)", ""]
    lines += [f"  {verb:<{width}}  manage.py {command}" for verb, command in VERBS.items()]
    lines += [
        "",
        f"Any other Django management command passes through ({PROG} migrate, {PROG} check);",
        f"`{PROG} help --commands` lists them.",
    ]
    return "\n".join(lines)


def django_argv(args: Sequence[str]) -> list[str]:
    """Django's argv for ``raft-namesrv ARGS``: a verb becomes its management command."""
    if not args:
        return [PROG]
    verb, *rest = args
    return [PROG, VERBS.get(verb, verb), *rest]


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``raft-namesrv ARGS`` (``sys.argv[1:]`` by default) with the project's settings."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(usage(), file=sys.stderr)
        raise SystemExit(2)
    if args[0] in HELP_FLAGS:
        print(usage())
        raise SystemExit(0)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", SETTINGS_MODULE)
    from django.core.management import execute_from_command_line

    execute_from_command_line(django_argv(args))


if __name__ == "__main__":
    main()
