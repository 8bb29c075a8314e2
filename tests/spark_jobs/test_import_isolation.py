"""spark_jobs runs inside plain Spark workers, so none of its modules (nor the experiment
history they read, nor the report format they write) may load Django."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MODULES = (
    "experiment_history.schema",
    "experiment_history.runs",
    "experiment_history.clients",
    "experiment_history.simulate",
    "experiment_history.simulate_run",
    "experiment_reports.report",
    "experiment_reports.seeds",
    "experiment_reports.text",
    "spark_jobs.checker",
    "spark_jobs.register_ops",
    "spark_jobs.register_zones",
    "spark_jobs.register_precedence",
    "spark_jobs.metrics",
    "spark_jobs.plot_series",
    "spark_jobs.analysis",
    "spark_jobs.session",
    "spark_jobs.cli",
)


def test_no_analysis_module_imports_django():
    code = (
        "import sys\n"
        + "".join(f"import {name}\n" for name in MODULES)
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
