"""The one place a SparkSession is made (local by default, or an existing cluster)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[2]"
SHUFFLE_PARTITIONS = 2
APP_NAME = "namesrv-consistency"


def get_spark(master: str | None = None) -> SparkSession:
    """Return the shared SparkSession, creating it on first use.

    ``master`` is a Spark master URL (``spark://host:7077``); ``None`` means a local
    two-core session. The UI and the console progress bar are off because the jobs run
    in tests and batch scripts; workers use this interpreter so they see the same
    packages (pyarrow, this project) as the driver.
    """
    # Python workers unpickle functions of spark_jobs by module name, so they need the
    # project root on their path; they inherit this environment from the JVM.
    project_root = str(Path(__file__).resolve().parent.parent)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if project_root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([project_root, *paths])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.appName(APP_NAME)
        .master(master or DEFAULT_MASTER)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
        .config("spark.default.parallelism", str(SHUFFLE_PARTITIONS))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
