"""The base of this project's management commands."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class ProjectCommand(BaseCommand):
    """A command whose options are matched exactly: argparse's abbreviations would take
    ``--node 3`` as ``--nodes 3`` without a word, and a typo as another option."""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        """Django's parser, without abbreviations."""
        return super().create_parser(prog_name, subcommand, allow_abbrev=False, **kwargs)
