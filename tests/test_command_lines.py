"""Every command line of the project takes its options exactly and explains each one.

argparse's abbreviations would take ``--top`` as ``--topic`` without a word; every parser
refuses them (tools.cli), and every option has help text naming its default.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import get_commands, load_command_class

from tools.cli import names_a_default, subparsers_of

PROJECT_DIR = Path(__file__).resolve().parents[1]
PROJECT_APPS = ("namesrv_app", "broker_app")
# The packages of the project whose modules may build a command line (pyproject's list).
PACKAGES = (
    "remoting",
    "raftstore",
    "gateway",
    "node",
    "localcluster",
    "experiments",
    "spark_jobs",
    "experiment_history",
    "experiment_reports",
    "namesrv_app",
    "namesrv_site",
    "broker_app",
    "tools",
    "bench",
)
# Django's own options of every command (--verbosity, --settings, ...), help included.
DJANGO_OPTIONS = {"--version", "-v", "--settings", "--pythonpath", "--traceback"}
CLI_TIMEOUT_S = 60.0


def project_commands() -> list[tuple[str, str]]:
    """(app, name) of every management command the project's apps ship."""
    return sorted((app, name) for name, app in get_commands().items() if app in PROJECT_APPS)


def parsers_of(app: str, name: str) -> Iterator[argparse.ArgumentParser]:
    """The command's parser and every subcommand parser under it."""
    parser = load_command_class(app, name).create_parser("manage.py", name)
    yield parser
    yield from subparsers_of(parser)


def own_actions(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    """The command's own options and arguments (not Django's, not help, not subcommands)."""
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if not DJANGO_OPTIONS & set(action.option_strings):
            yield action


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    """A command as an operator types it."""
    return subprocess.run(
        [sys.executable, *argv],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )


@pytest.mark.parametrize(("app", "name"), project_commands())
def test_every_management_command_takes_options_exactly_and_explains_each(
    app: str, name: str
) -> None:
    for parser in parsers_of(app, name):
        assert parser.allow_abbrev is False, parser.prog
        formatter = parser.formatter_class(prog=parser.prog)
        for action in own_actions(parser):
            where = f"{parser.prog} {action.option_strings or action.dest}"
            assert action.help, f"{where} has no help text"
            if names_a_default(action):
                assert str(action.default) in formatter._expand_help(action), where


def test_a_broker_command_refuses_an_abbreviated_option() -> None:
    # Before, --top was taken for --topic and the messages went to TopicB.
    done = run(
        "manage.py",
        "send_message",
        "--broker",
        "127.0.0.1:1",
        "--topic",
        "TopicA",
        "--top",
        "TopicB",
    )

    assert done.returncode == 2
    assert "unrecognized arguments: --top TopicB" in done.stderr


def test_a_plain_command_line_refuses_an_abbreviated_option_in_a_subcommand(
    tmp_path: Path,
) -> None:
    done = run("-m", "spark_jobs.cli", "simulate", "--out", str(tmp_path), "--bro", "3")

    assert done.returncode == 2
    assert "unrecognized arguments: --bro 3" in done.stderr
    assert not any(tmp_path.iterdir())


def plain_parser_calls() -> Iterator[tuple[Path, ast.Call]]:
    """Every ``ArgumentParser(...)`` and ``add_argument(...)`` call in the project's code."""
    for package in PACKAGES:
        for path in sorted((PROJECT_DIR / package).rglob("*.py")):
            source = path.read_text()
            if "ArgumentParser" not in source and "add_argument" not in source:
                continue  # parsing every module would cost seconds
            for node in ast.walk(ast.parse(source, str(path))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
                    yield path.relative_to(PROJECT_DIR), node


def called(node: ast.Call) -> str:
    """The called function's own name."""
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def test_every_parser_of_the_project_is_an_exact_one_and_helps_every_option() -> None:
    plain, silent = [], []
    for path, node in plain_parser_calls():
        if called(node) == "ArgumentParser" and path != Path("tools/cli.py"):
            plain.append(f"{path}:{node.lineno}")
        if called(node) == "add_argument" and not any(k.arg == "help" for k in node.keywords):
            silent.append(f"{path}:{node.lineno}")

    assert plain == [], "build tools.cli.ExactArgumentParser instead"
    assert silent == [], "give these options help text"
