"""Every command of README.md, run as written.

Each ```sh block of the README is one of these, named by an HTML comment on the line
before it (``<!-- readme-test: KIND (reason) -->``; no comment: ``run``):

* ``run``: run in bash, in a terminal, against the cluster the ``background`` block
  started. Blocks run in README order and share their shell variables (``TOKEN=$(...)``);
  a password prompt is answered with ``OPERATOR_PASSWORD``, the variable the README tells
  the user to set. Each must exit 0; curl reads a ``.curlrc`` with ``fail-with-body`` so
  an HTTP error fails it too.
* ``background``: the README's "beside another cluster" command (``make run`` with its own
  run folder and free ports), started first; the test waits until it says it is up.
* ``last``: run after every other block (it stops the cluster).
* ``parse-only``: cannot run inside a test (fixed ports, the suite itself, minutes of
  work); each command's arguments are parsed, as written, by the program they are for:
  ``make -n`` (and the ``manage.py`` lines it would run), the Django command's own parser,
  pytest's.
* ``synopsis``: options in ``[brackets]``, each parsed on its own after the command.

The only rewriting is :func:`substitutions`: the run folders and the fixed ports of
``make run``'s cluster become the test cluster's. A block that is neither runnable nor
marked with a reason fails.
"""

from __future__ import annotations

import json
import os
import pty
import re
import secrets
import select
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.core.management import get_commands, load_command_class

from localcluster.launcher import cluster_down
from tests.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.integration]

REPO_ROOT = Path(__file__).resolve().parents[1]
README = REPO_ROOT / "README.md"
MARKER = re.compile(r"<!-- readme-test: ([a-z-]+) \((.+)\) -->")
KINDS = ("run", "background", "last", "parse-only", "synopsis")
FENCE = "```"
SHELL_FENCE = "```sh"
PYTHON = ".venv/bin/python"
UP_TIMEOUT_S = 240.0
BLOCK_TIMEOUT_S = 90.0
DOWN_TIMEOUT_S = 60.0
MAKE_DRY_RUN_TIMEOUT_S = 60.0
PYTEST_PARSE_TIMEOUT_S = 120.0
POLL_S = 0.2
READ_BYTES = 4096
UP_LINE = "Press Ctrl-C (or run `cluster down`) to stop the cluster."
PASSWORD_PROMPTS = ("Password: ", "Password (again): ")
LOOPBACK_ADDR = re.compile(r"127\.0\.0\.1:(\d+)")
SHELL_ASSIGNMENT = re.compile(r"^([A-Z_][A-Z0-9_]*)=\$\(", re.MULTILINE)
WORD_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")
# What a runnable block's output must show, besides its exit status: the block that
# contains the key must print the text.
EXPECTED_OUTPUT = (
    ("create_operator alice", "alice with role operator"),
    ("create_operator bob", "bob with role viewer"),
    ("/api/v1/routes/TopicTest/", '"brokerDatas"'),
    ("/api/v1/topics/", "Orders"),
    ("send_message", '"code": 0'),
    ("consume", "consumed 10 message(s) of TopicTest"),
    ("cluster status", "on what clients see"),
    ("cluster down", "stopped in"),
)
# pytest's own argument parsing, without collecting (a collection of the whole suite
# takes most of a minute): an unknown option or a bad value exits non-zero.
PYTEST_PARSE = (
    "import sys\n"
    "from _pytest.config import _prepareconfig\n"
    "_prepareconfig(sys.argv[1:])._ensure_unconfigure()\n"
)


@dataclass(frozen=True, slots=True)
class Block:
    """One ```sh block of the README: where it starts, its text, what the test does with it."""

    line: int
    text: str
    kind: str
    reason: str

    def where(self) -> str:
        """``README.md:LINE`` of the opening fence."""
        return f"README.md:{self.line}"


def readme_blocks(text: str) -> list[Block]:
    """Every fenced block, with the kind its marker comment gives it."""
    lines = text.splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        if not lines[index].startswith(FENCE):
            index += 1
            continue
        where = f"README.md:{index + 1}"
        assert lines[index] == SHELL_FENCE, f"{where}: a command block opens with ```sh"
        end = lines.index(FENCE, index + 1)
        previous = lines[index - 1] if index else ""
        marker = MARKER.fullmatch(previous)
        assert marker is not None or "readme-test" not in previous, (
            f"{where}: write the marker as <!-- readme-test: KIND (reason) -->"
        )
        kind, reason = marker.groups() if marker else ("run", "")
        assert kind in KINDS, f"{where}: unknown kind {kind!r} (one of {', '.join(KINDS)})"
        blocks.append(Block(index + 1, "\n".join(lines[index + 1 : end]), kind, reason))
        index = end + 1
    return blocks


def indented_code(text: str) -> list[int]:
    """Lines that Markdown would show as an indented code block (outside fences)."""
    found: list[int] = []
    fenced = False
    previous = ""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith(FENCE):
            fenced = not fenced
        elif not fenced and line.startswith("    ") and not previous.strip():
            found.append(number)
        previous = line
    return found


def commands(block_text: str) -> list[str]:
    """The block's commands, continuation lines joined."""
    joined = block_text.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip()]


def parse_command(command: str) -> None:
    """Parse ``command``'s arguments with the program it is for; AssertionError if refused."""
    words = shlex.split(command, comments=True)
    while words and WORD_ASSIGNMENT.fullmatch(words[0]):
        words = words[1:]
    if words[0] == "make":
        parse_make(words[1:])
    elif words[:2] == [PYTHON, "manage.py"]:
        parse_django(words[2], words[3:])
    elif words[:3] == [PYTHON, "-m", "pytest"]:
        parse_pytest(words[3:])
    else:
        raise AssertionError(f"no way to parse {command!r}: run it or teach this test its parser")


def parse_make(args: list[str]) -> None:
    """``make -n`` with the same arguments, then the ``manage.py`` lines it would run."""
    done = subprocess.run(
        ["make", "-n", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=MAKE_DRY_RUN_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"make -n {shlex.join(args)}: {done.stderr}"
    for line in done.stdout.replace("\\\n", " ").splitlines():
        words = shlex.split(line)
        if "manage.py" in words:
            at = words.index("manage.py")
            parse_django(words[at + 1], words[at + 2 :])


def parse_django(name: str, args: list[str]) -> None:
    """The management command's own parser on ``args`` (a CommandError names the flag)."""
    app = get_commands().get(name)
    assert app is not None, f"manage.py has no command {name!r}"
    command = load_command_class(app, name)
    command.create_parser("manage.py", name).parse_args(args)


def parse_pytest(args: list[str]) -> None:
    """pytest's option parsing (with the repository's config and plugins) on ``args``."""
    done = subprocess.run(
        [sys.executable, "-c", PYTEST_PARSE, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=PYTEST_PARSE_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"pytest {shlex.join(args)}: {done.stderr[-2000:]}"


def synopsis_variants(line: str) -> tuple[str, list[list[str]]]:
    """The command before its first ``[``, and each bracketed option as its own argv;
    ``[--a | --b]`` gives both, ``[--tls x|y]`` one per value."""
    head, bracket, rest = line.partition("[")
    options = re.findall(r"\[([^\[\]]+)\]", bracket + rest)
    assert re.sub(r"\[[^\[\]]+\]", "", bracket + rest).strip() == "", line
    variants: list[list[str]] = [[]]
    for option in options:
        for alternative in option.split(" | "):
            words = shlex.split(alternative)
            values = words[-1].split("|") if "|" in words[-1] else [words[-1]]
            variants += [[*words[:-1], value] for value in values]
    return head.strip(), variants


def substitutions(run_dir: Path, summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The one rewriting of the README's commands: make run's folder and fixed ports
    become the test cluster's (its own folder, free ports)."""
    nodes = summary["nodes"]
    brokers = {broker["label"]: broker["addr"] for broker in summary["brokers"]}
    return [
        (
            "127.0.0.1:9876;127.0.0.1:9877;127.0.0.1:9878",
            ";".join(n["remoting_addr"] for n in nodes),
        ),
        ("127.0.0.1:8000", f"127.0.0.1:{nodes[0]['web_port']}"),
        ("127.0.0.1:10911", brokers["broker-a-0"]),
        ("run/local", str(run_dir)),
        ("run/second", str(run_dir)),
    ]


def rewrite(text: str, table: list[tuple[str, str]]) -> str:
    """``text`` with every README value of ``table`` replaced by the test's."""
    for readme_value, test_value in table:
        text = text.replace(readme_value, test_value)
    return text


def cluster_ports(summary: dict[str, Any]) -> set[int]:
    """Every port the test cluster listens on (remoting, web, brokers)."""
    ports = {n[key] for n in summary["nodes"] for key in ("remoting_port", "web_port")}
    return ports | {int(b["addr"].rsplit(":", 1)[1]) for b in summary["brokers"]}


@dataclass
class Terminal:
    """A bash that runs README blocks one after another, as a user in one shell would:
    its variables carry from block to block."""

    env: dict[str, str]
    password: str
    state: Path

    def run(self, block_text: str) -> tuple[int, str]:
        """Run ``block_text`` in a terminal; its exit status and what it printed."""
        script = (
            f"set -euo pipefail\nset -a\n{block_text}\nenv -0 > {shlex.quote(str(self.state))}\n"
        )
        pid, fd = pty.fork()
        if pid == 0:  # the child: become the block's bash
            os.chdir(REPO_ROOT)
            os.execvpe("bash", ["bash", "-c", script], self.env)
        try:
            output = self._talk(pid, fd)
        finally:
            os.close(fd)
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        if status == 0:
            pairs = self.state.read_bytes().split(b"\0")
            self.env = dict(p.decode().split("=", 1) for p in pairs if b"=" in p)
        return status, output

    def _talk(self, pid: int, fd: int) -> str:
        """Read until the block ends; type the password at each prompt."""
        output = b""
        answered_at = -1
        deadline = time.monotonic() + BLOCK_TIMEOUT_S
        while True:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                raise AssertionError(f"still running after {BLOCK_TIMEOUT_S} s:\n{output!r}")
            ready, _, _ = select.select([fd], [], [], POLL_S)
            if not ready:
                continue
            try:
                chunk = os.read(fd, READ_BYTES)
            except OSError:  # EIO: every process of the block has closed the terminal
                break
            if not chunk:
                break
            output += chunk
            text = output.decode(errors="replace")
            if text.endswith(PASSWORD_PROMPTS) and answered_at != len(output):
                answered_at = len(output)
                os.write(fd, self.password.encode() + b"\n")
        return output.decode(errors="replace").replace("\r\n", "\n")


@dataclass
class ReadmeCluster:
    """The cluster the README's background block started, and how to reach it."""

    run_dir: Path
    process: subprocess.Popen[bytes]
    summary: dict[str, Any]
    table: list[tuple[str, str]]


@pytest.fixture(scope="module")
def blocks() -> list[Block]:
    """The README's blocks."""
    return readme_blocks(README.read_text(encoding="utf-8"))


@pytest.fixture
def readme_cluster(blocks: list[Block], tmp_path: Path) -> Iterator[ReadmeCluster]:
    """The README's "beside another cluster" command, run in the background in a run
    folder of the test's, until it says the cluster is up."""
    (background,) = [b for b in blocks if b.kind == "background"]
    run_dir = tmp_path / "run"
    log = tmp_path / "make-run.log"
    script = background.text.replace("run/second", str(run_dir))
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["bash", "-c", script],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_up(process, log)
        summary = json.loads((run_dir / "cluster.json").read_text(encoding="utf-8"))
        yield ReadmeCluster(run_dir, process, summary, substitutions(run_dir, summary))
    finally:
        if process.poll() is None:
            cluster_down(run_dir)
            try:
                process.wait(DOWN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _wait_up(process: subprocess.Popen[bytes], log: Path) -> None:
    def up() -> bool:
        if UP_LINE in log.read_text(errors="replace"):
            return True
        assert process.poll() is None, f"make run exited:\n{log.read_text()[-3000:]}"
        return False

    wait_until(
        up,
        what=lambda: f"make run up\n{log.read_text()}",
        timeout_s=UP_TIMEOUT_S,
        interval_s=POLL_S,
    )


def test_every_command_block_is_fenced_and_marked_with_a_known_kind(blocks: list[Block]) -> None:
    """Indented code blocks would escape this test; a marker needs a reason."""
    assert indented_code(README.read_text(encoding="utf-8")) == []
    assert all(block.kind == "run" or block.reason.strip() for block in blocks)
    assert [b.kind for b in blocks].count("background") == 1
    assert any(b.kind == "run" for b in blocks)


def test_every_command_that_cannot_run_here_parses_as_written(blocks: list[Block]) -> None:
    """make -n, the Django command's parser or pytest's accept each exact command."""
    checked = [b for b in blocks if b.kind in ("parse-only", "background", "last")]
    for block in checked:
        for command in commands(block.text):
            try:
                parse_command(command)
            except Exception as exc:
                raise AssertionError(f"{block.where()}: {command}\n{exc}") from exc
    assert checked


def test_every_option_of_a_synopsis_parses_on_its_own(blocks: list[Block]) -> None:
    """``cluster up [--nodes 3] ...``: the command alone, then with each option."""
    synopses = [b for b in blocks if b.kind == "synopsis"]
    for block in synopses:
        for line in commands(block.text):
            head, variants = synopsis_variants(line)
            words = shlex.split(head)
            assert words[:2] == [PYTHON, "manage.py"], f"{block.where()}: {line}"
            for variant in variants:
                try:
                    parse_django(words[2], [*words[3:], *variant])
                except Exception as exc:
                    raise AssertionError(f"{block.where()}: {head} {variant}: {exc}") from exc
    assert synopses


def test_every_runnable_command_runs_as_written_against_a_launched_cluster(
    blocks: list[Block], readme_cluster: ReadmeCluster, tmp_path: Path
) -> None:
    """The account, token, curl, status, send and consume commands, then ``cluster down``."""
    curl_home = tmp_path / "curl"
    curl_home.mkdir()
    (curl_home / ".curlrc").write_text("fail-with-body\nshow-error\n", encoding="utf-8")
    password = secrets.token_urlsafe(18)
    env = {**os.environ, "OPERATOR_PASSWORD": password, "CURL_HOME": str(curl_home)}
    terminal = Terminal(env, password, tmp_path / "shell.env")
    ports = cluster_ports(readme_cluster.summary)
    runnable = [b for b in blocks if b.kind == "run"] + [b for b in blocks if b.kind == "last"]
    for block in runnable:
        text = rewrite(block.text, readme_cluster.table)
        foreign = {int(p) for p in LOOPBACK_ADDR.findall(text)} - ports
        assert not foreign, f"{block.where()}: fixed ports {foreign} the test cannot rewrite"
        status, output = terminal.run(text)
        assert status == 0, f"{block.where()} exited {status}:\n{text}\n{output[-3000:]}"
        for key, shown in EXPECTED_OUTPUT:
            if key in block.text:
                assert shown in output, f"{block.where()}: no {shown!r} in:\n{output[-3000:]}"
        for name in SHELL_ASSIGNMENT.findall(block.text):
            assert terminal.env.get(name), f"{block.where()}: ${name} is empty"
    # `cluster down` stopped the cluster under `make run`, which then ends by itself.
    assert readme_cluster.process.wait(DOWN_TIMEOUT_S) == 0
