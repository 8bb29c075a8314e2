"""The base of every management command of the project (broker_app's and namesrv_app's).

It lives in broker_app because broker_app is the lowest layer that may use Django
(pyproject's import-linter contracts): namesrv_app may import it, not the other way round.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser, DjangoHelpFormatter

from tools.cli import DefaultsHelpFormatter, subparsers_of


class ProjectHelpFormatter(DefaultsHelpFormatter, DjangoHelpFormatter):
    """Django's layout (its own options last), each option's default named."""


class ProjectCommand(BaseCommand):
    """A command whose options are matched exactly: argparse's abbreviations would take
    ``--node 3`` as ``--nodes 3`` without a word, and a typo as another option. Its
    ``--help`` names every option's default (tools.cli)."""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        """Django's parser, without abbreviations, its subcommands' parsers too."""
        kwargs.setdefault("formatter_class", ProjectHelpFormatter)
        parser = super().create_parser(prog_name, subcommand, allow_abbrev=False, **kwargs)
        # add_arguments has built the subcommands by now; argparse does not pass these on.
        for sub in subparsers_of(parser):
            sub.allow_abbrev = False
            sub.formatter_class = kwargs["formatter_class"]
        return parser
