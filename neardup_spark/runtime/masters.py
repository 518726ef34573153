"""Where a session runs: its master, spark-submit's, or a Spark Connect server."""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

from neardup_spark.config import SparkConfig


def under_spark_submit() -> bool:
    """True when spark-submit (or a notebook runtime) started the JVM for us."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or "DATABRICKS_RUNTIME_VERSION" in os.environ


def remote_of(spark_cfg: SparkConfig) -> str:
    """The Spark Connect server a session built from spark_cfg talks to ("" for classic)."""
    return spark_cfg.remote or os.environ.get("SPARK_REMOTE", "")


def planned_master(spark_cfg: SparkConfig) -> str:
    """The master a session built from spark_cfg will have ("" when spark-submit or a
    Spark Connect server decides)."""
    if remote_of(spark_cfg):
        return ""
    return spark_cfg.master or ("" if under_spark_submit() else "local[*]")


def is_local_master(master: str) -> bool:
    """local, local[N], local[N,F]: driver and executors are one JVM on one disk
    (local-cluster[...] is not: its executors are JVMs of their own)."""
    return master == "local" or master.startswith("local[")


def master_of(spark: SparkSession) -> str:
    """A running session's master; "" under Spark Connect (no SparkContext)."""
    try:
        return spark.sparkContext.master
    except Exception:  # Spark Connect
        return ""
