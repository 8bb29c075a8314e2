"""``raft-namesrv``: the installed command line names manage.py's commands by short verbs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from namesrv_site.cli import VERBS, main
from tests.packaging.declared import PROJECT_DIR

CLI_TIMEOUT_S = 60.0


def test_the_usage_names_every_verb_with_the_command_it_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    printed = capsys.readouterr().out.splitlines()

    assert done.value.code == 0
    assert {line.split()[0] for line in printed if line.startswith("  ")} == set(VERBS)
    assert "  create-operator  manage.py create_operator" in printed


def test_no_verb_prints_the_usage_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([])

    assert done.value.code == 2
    assert capsys.readouterr().err.startswith("usage: raft-namesrv VERB")


def test_a_verb_runs_its_management_command_with_the_rest_of_the_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "namesrv_site.cli", "node", "--help"],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: raft-namesrv run_node")
    assert "--config" in done.stdout
