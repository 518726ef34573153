"""Building a SparkSession, for entry points only (CLI, jobs/, notebooks, tests).

Library code never calls this: every stage takes the DataFrame it works on.
Local-mode defaults are sized for one laptop, since Spark's own defaults
(200 shuffle partitions, the UI) are sized for a cluster.
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

from pyspark.sql import SparkSession

from neardup_spark.config import SparkConfig
from neardup_spark.runtime import sizing
from neardup_spark.runtime.jvm import DRIVER_JAVA_OPTIONS, class_archive, jit_options, log_options
from neardup_spark.runtime.masters import planned_master, remote_of, under_spark_submit
from neardup_spark.runtime.shipping import package_zip
from neardup_spark.runtime.tempdirs import process_temp_dir


LOCAL_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Workers fork with the stages' modules imported and tables built (see neardup_spark.worker_daemon).
    "spark.python.daemon.module": "neardup_spark.worker_daemon",
}


def session_settings(spark_cfg: SparkConfig, java_options: str = "", input_bytes: int | None = None,
                     fresh: bool = True, new_jvm: bool = True) -> tuple[str, dict[str, str]]:
    """(master, the settings a new session gets): local-mode defaults, then cfg.spark's, then
    (local mode, a `fresh` context: none running) shuffle partitions, and (a JVM not started
    yet) the driver heap, sized for `input_bytes` of input where cfg.spark names neither (see
    `sizing`), with `java_options` added to the driver JVM's own."""
    master = planned_master(spark_cfg)
    settings = dict(LOCAL_DEFAULTS) if master.startswith("local") else {}
    if spark_cfg.shuffle_partitions:
        settings["spark.sql.shuffle.partitions"] = str(spark_cfg.shuffle_partitions)
    settings.update(spark_cfg.conf)
    if fresh and not under_spark_submit():
        settings.update(sizing.local_settings(master, settings, input_bytes, heap=new_jvm))
    if java_options:
        own = settings.get(DRIVER_JAVA_OPTIONS, "")
        settings[DRIVER_JAVA_OPTIONS] = f"{own} {java_options}".strip()
    return master, settings


def build_session(spark_cfg: SparkConfig, checkpoint_dir: str | None = None,
                  java_options: str = "", input_bytes: int | None = None) -> SparkSession:
    """A session as cfg.spark asks; local[*] when no master is named and none is given to us.

    Executors' Python is pinned to this interpreter (PYSPARK_PYTHON) unless the
    user set it, so Pandas UDFs find numpy and pandas. `java_options` are
    added to the driver JVM's options (they matter only if this starts the JVM).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if remote_of(spark_cfg):
        return connect_session(spark_cfg)
    from pyspark import SparkContext  # classic only: a Connect-only client has none

    builder = SparkSession.builder.appName(spark_cfg.app_name)
    fresh = SparkContext._active_spark_context is None  # else getOrCreate keeps the running one's
    new_jvm = SparkContext._gateway is None  # a stopped context's JVM keeps its heap
    master, settings = session_settings(spark_cfg, java_options, input_bytes, fresh, new_jvm)
    if master:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if checkpoint_dir:
        spark.sparkContext.setCheckpointDir(checkpoint_dir)
    elif master.startswith("local") and not spark.sparkContext.getCheckpointDir():
        # GraphFrames and reliable checkpoints need one; on a cluster it must
        # be shared storage, so only local mode gets a temporary directory.
        spark.sparkContext.setCheckpointDir(process_temp_dir("neardup-ckpt-"))
    return spark


def connect_session(spark_cfg: SparkConfig) -> SparkSession:
    """A Spark Connect session to remote_of(spark_cfg), with this package shipped to the
    server (its Python workers run the sketch UDFs) unless the server starts here."""
    url = remote_of(spark_cfg)
    builder = SparkSession.builder.remote(url)
    if spark_cfg.shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(spark_cfg.shuffle_partitions))
    for key, value in spark_cfg.conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if url.startswith("sc://"):
        spark.addArtifacts(package_zip(), pyfile=True)
    return spark


@contextmanager
def owned_session(spark_cfg: SparkConfig, input_bytes: int | None = None) -> Iterator[SparkSession]:
    """The active session (a notebook's, a test's, spark-submit's), or one
    built for this command and stopped after it. A local JVM started here
    uses the class-data archive of `class_archive` (the first such run makes
    it and waits for its JVM to write it) and the JIT of `jit_options` for
    `input_bytes` of local input (None: unknown)."""
    existing = SparkSession.getActiveSession()
    # A Databricks job's session belongs to the runtime, which reuses it after this task.
    ours = existing is None and not os.environ.get("DATABRICKS_RUNTIME_VERSION")
    archive = None if not ours else class_archive(spark_cfg)
    if archive is not None and archive.making is not None:
        print(f"neardup: this run also writes a class-data archive of the JVM (once: later runs "
              f"start faster; ~20 s more now): {archive.path}", file=sys.stderr)
    options = [archive.java_options] if archive else []
    if ours:
        options.append(jit_options(spark_cfg, input_bytes))
        options.append(log_options(spark_cfg))
    spark = build_session(spark_cfg, java_options=" ".join(o for o in options if o), input_bytes=input_bytes)
    interrupted = False
    try:
        yield spark
    except BaseException as exc:
        interrupted = not isinstance(exc, Exception)  # Ctrl-C: stop, but do not wait for the archive
        raise
    finally:
        if ours:  # ours to stop; a notebook's, a test's or a Databricks job's session is not
            stop_without_waiting(spark)
            if archive is not None and archive.making is not None and not interrupted:
                archive.finish()


def stop_without_waiting(spark: SparkSession) -> None:
    """spark.stop(), less PySpark's wait for its accumulator server.

    That server's connection handler polls once a second and its accept loop
    every half second, and `stop` waits for both to notice (0-1.5 s, ~0.75 s
    on average here, at the end of every command). The JVM is stopped as
    before; the server is told to shut down in a background thread and ends
    on its next poll."""
    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect: no SparkContext, nothing to wait for
        spark.stop()
        return
    server = getattr(context, "_accumulatorServer", None)
    if server is not None:
        context._accumulatorServer = None
    spark.stop()
    if server is not None:
        threading.Thread(target=server.shutdown, name="neardup-accumulator-shutdown", daemon=True).start()
