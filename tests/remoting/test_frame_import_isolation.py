"""The codec package stays free of the web stack (ARCHITECTURE: layers and imports)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("django", "celery", "channels")
CODEC_MODULES = [
    "remoting",
    "remoting.codes",
    "remoting.errors",
    "remoting.command",
    "remoting.frame",
    "remoting.fastjson",
    "remoting.bodies",
    "remoting.headers",
]


def test_importing_the_codec_loads_no_django_celery_or_channels() -> None:
    script = (
        "import importlib, json, sys\n"
        f"for name in {CODEC_MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=PROJECT_ROOT,
    )
    assert json.loads(result.stdout) == []
