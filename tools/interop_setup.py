"""Install the third-party RocketMQ clients the interop tests drive.

The clients stay out of the project's own virtualenv on purpose: ``rocketmq``
0.4.4 bundles a native library and its own dependency pins, and ali-ons is a
Node package. Both go under ``.cache/interop`` (gitignored):

* ``.cache/interop/node``: ``npm install --prefix .cache/interop/node ali-ons@3.12.0``
* ``.cache/interop/py``: a separate venv with ``rocketmq==0.4.4``

Run ``python tools/interop_setup.py`` (the interop tests call :func:`ensure_clients`).
A step that cannot reach its registry raises :class:`InteropSetupError` with the
command and its output, so a test fails with a readable reason instead of skipping.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
INTEROP_DIR = PROJECT_DIR / ".cache" / "interop"
ALI_ONS_SPEC = "ali-ons@3.12.0"
ALI_ONS_VERSION = "3.12.0"
ROCKETMQ_PY_SPEC = "rocketmq==0.4.4"
ROCKETMQ_PY_VERSION = "0.4.4"
INSTALL_TIMEOUT_S = 300
OUTPUT_TAIL_CHARS = 2000


class InteropSetupError(RuntimeError):
    """A client could not be installed (registry unreachable, tool missing ...)."""


@dataclass(frozen=True, slots=True)
class InteropClients:
    """Where the installed clients live."""

    node_prefix: Path
    node_executable: str
    python_executable: Path

    @property
    def node_modules(self) -> Path:
        """The ``node_modules`` folder that holds ali-ons."""
        return self.node_prefix / "node_modules"


def _run(argv: list[str], what: str) -> None:
    """Run one install step; turn any failure into an :class:`InteropSetupError`."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InteropSetupError(f"{what}: `{' '.join(argv)}` could not run: {exc}") from exc
    if done.returncode != 0:
        output = (done.stdout + done.stderr)[-OUTPUT_TAIL_CHARS:]
        raise InteropSetupError(
            f"{what}: `{' '.join(argv)}` exited {done.returncode} "
            f"(is the registry reachable?)\n{output}"
        )


def _installed_npm_version(prefix: Path, package: str) -> str | None:
    """The version of ``package`` installed under ``prefix``, if any."""
    manifest = prefix / "node_modules" / package / "package.json"
    if not manifest.exists():
        return None
    import json

    version = json.loads(manifest.read_text(encoding="utf-8")).get("version")
    return str(version) if version is not None else None


def ensure_ali_ons(interop_dir: Path = INTEROP_DIR) -> tuple[Path, str]:
    """Install ali-ons into ``<interop_dir>/node`` unless that exact version is there."""
    node = shutil.which("node")
    npm = shutil.which("npm")
    if node is None or npm is None:
        raise InteropSetupError("node and npm must be on PATH to install ali-ons (apt: nodejs npm)")
    prefix = interop_dir / "node"
    if _installed_npm_version(prefix, "ali-ons") != ALI_ONS_VERSION:
        prefix.mkdir(parents=True, exist_ok=True)
        _run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), ALI_ONS_SPEC],
            "installing ali-ons",
        )
    return prefix, node


def _venv_python(venv_dir: Path) -> Path:
    """The interpreter of a venv."""
    return venv_dir / "bin" / "python"


def _has_rocketmq(python: Path) -> bool:
    """True when ``python`` imports rocketmq at the pinned version."""
    probe = (
        "import importlib.metadata as m, sys; "
        f"sys.exit(0 if m.version('rocketmq') == '{ROCKETMQ_PY_VERSION}' else 1)"
    )
    done = subprocess.run([str(python), "-c", probe], capture_output=True, check=False)
    return done.returncode == 0


def ensure_rocketmq_py(interop_dir: Path = INTEROP_DIR) -> Path:
    """Create ``<interop_dir>/py`` with ``rocketmq==0.4.4`` unless it is there already."""
    venv_dir = interop_dir / "py"
    python = _venv_python(venv_dir)
    if python.exists() and _has_rocketmq(python):
        return python
    if not python.exists():
        venv.EnvBuilder(with_pip=True, clear=True).create(venv_dir)
    _run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            ROCKETMQ_PY_SPEC,
        ],
        "installing rocketmq 0.4.4",
    )
    return python


def ensure_clients(interop_dir: Path = INTEROP_DIR) -> InteropClients:
    """Install both interop clients (idempotent) and say where they are."""
    prefix, node = ensure_ali_ons(interop_dir)
    python = ensure_rocketmq_py(interop_dir)
    return InteropClients(node_prefix=prefix, node_executable=node, python_executable=python)


def main() -> int:
    """Command-line entry: install both clients and print where they went."""
    try:
        clients = ensure_clients(Path(os.environ.get("INTEROP_DIR", INTEROP_DIR)))
    except InteropSetupError as exc:
        print(f"interop setup failed: {exc}", file=sys.stderr)
        return 1
    print(f"ali-ons {ALI_ONS_VERSION}: {clients.node_modules}")
    print(f"rocketmq {ROCKETMQ_PY_VERSION}: {clients.python_executable}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
