"""raftstore must import in a fresh interpreter without Django, Celery or Channels."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import importlib, pkgutil, sys
import raftstore
for module in pkgutil.iter_modules(raftstore.__path__):
    importlib.import_module("raftstore." + module.name)
loaded = sorted({name.split(".")[0] for name in sys.modules} & {"django", "celery", "channels"})
print(",".join(loaded))
"""


def test_raftstore_imports_without_django_celery_or_channels() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.strip() == ""
