"""The project's rule for command lines: options are matched exactly and ``--help`` names
every default.

argparse's abbreviations would take ``--top`` as ``--topic`` (or ``--node 3`` as
``--nodes 3``) without a word, and a typo as another option; so every parser of the
project, its subcommands' parsers included, has ``allow_abbrev=False``. The plain-argparse
tools (``bench``, ``python -m spark_jobs.cli``, ...) use :class:`ExactArgumentParser`; the
management commands use ``broker_app.management.command.ProjectCommand``, which applies the
same two rules to Django's parser.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any


def names_a_default(action: argparse.Action) -> bool:
    """True when ``--help`` should name the action's default: a value the option takes
    (not a flag) whose default is a real value (not None, empty or suppressed)."""
    if not action.option_strings or action.nargs == 0:
        return False
    default = action.default
    return default is not None and default is not argparse.SUPPRESS and default not in ("", [])


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Adds "(default: X)" to an option's help unless the help already speaks of its
    default: one rule, so no option's default has to be kept in its text by hand."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if not names_a_default(action) or "default" in text:
            return text
        return f"{text} (default: %(default)s)"


class ExactArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser without abbreviations whose help names the defaults; its
    subcommands' parsers are of the same class (argparse builds them with ``type(self)``)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(**kwargs)


def subparsers_of(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every subcommand parser under ``parser``, at any depth."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield sub
                yield from subparsers_of(sub)
