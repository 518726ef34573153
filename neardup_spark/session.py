"""Building a SparkSession, for entry points only (CLI, jobs/, notebooks, tests).

Library code never calls this: every stage takes the DataFrame it works on.
Local-mode defaults are sized for one laptop, since Spark's own defaults
(200 shuffle partitions, the UI) are sized for a cluster.
"""

from __future__ import annotations

import os
import sys
import tempfile

from pyspark.sql import SparkSession

from .config import SparkConfig

LOCAL_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def under_spark_submit() -> bool:
    """True when spark-submit (or a notebook runtime) started the JVM for us."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or "DATABRICKS_RUNTIME_VERSION" in os.environ


def build_session(spark_cfg: SparkConfig, checkpoint_dir: str | None = None) -> SparkSession:
    """A session as cfg.spark asks; local[*] when no master is named and none is given to us.

    Executors' Python is pinned to this interpreter (PYSPARK_PYTHON) unless the
    user set it, so Pandas UDFs find numpy and pandas.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(spark_cfg.app_name)
    master = spark_cfg.master or ("" if under_spark_submit() else "local[*]")
    if master:
        builder = builder.master(master)
    settings = dict(LOCAL_DEFAULTS) if master.startswith("local") else {}
    if spark_cfg.shuffle_partitions:
        settings["spark.sql.shuffle.partitions"] = str(spark_cfg.shuffle_partitions)
    settings.update(spark_cfg.conf)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if checkpoint_dir:
        spark.sparkContext.setCheckpointDir(checkpoint_dir)
    elif master.startswith("local") and not spark.sparkContext.getCheckpointDir():
        # GraphFrames and reliable checkpoints need one; on a cluster it must
        # be shared storage, so only local mode gets a temporary directory.
        spark.sparkContext.setCheckpointDir(tempfile.mkdtemp(prefix="neardup-ckpt-"))
    return spark
