"""spark_jobs runs inside plain Spark workers, so none of its modules may load Django."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MODULES = (
    "schema",
    "history",
    "checker",
    "clients",
    "simulate",
    "report",
    "metrics",
    "session",
    "cli",
)


def test_no_analysis_module_imports_django():
    code = (
        "import sys\n"
        + "".join(f"import spark_jobs.{name}\n" for name in MODULES)
        + "print(any(m == 'django' or m.startswith('django.') for m in sys.modules))"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.strip() == "False"
