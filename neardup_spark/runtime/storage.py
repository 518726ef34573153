"""Storage the executors write and the driver reads: checked before the work, verified after.

On a cluster a path can mean different places to the driver and to the
executors: a directory on the driver's own disk, or a path without a scheme
that Spark qualifies with `fs.defaultFS`. Spark's file committer then leaves
the executors' files where the driver never looks, and the job "succeeds"
with tables that hold only `_SUCCESS`. So:

- `probe_executor_writes` (before any heavy work, on a non-local master):
  one tiny job writes a file from every task slot under the output; the
  driver lists them back through its own filesystem; a missing file stops
  the run with a one-line error;
- `verify_written` (after the writes, before success is reported): each
  table's row count as the driver reads it against the count the run
  computed.
"""

from __future__ import annotations

import os
import time
import uuid
from contextlib import contextmanager
from typing import Iterator

from pyspark.sql import SparkSession

from neardup_spark.config import Config
from neardup_spark.errors import NeardupError
from neardup_spark.runtime import paths
from neardup_spark.runtime.parallel import run_all

OWN_PREFIX = "_neardup"  # staging, probe and checkpoint directories under an output: ours, never user data
PROBE_PREFIX = "_neardup_probe-"
CHECKPOINT_PREFIX = "_neardup_checkpoints-"
PROBE_TASKS = 64  # at most this many probe files: enough to reach every executor of a modest cluster


def kill_point(name: str) -> None:
    """Fault injection for the crash-safety tests: NEARDUP_KILL_AT=<name> ends the process
    here, abruptly (no cleanup runs), as a killed job would. NEARDUP_HOLD_AT=<name> with
    NEARDUP_HOLD_FILE=<path> instead creates <path>.reached and waits (up to 10 minutes)
    for <path> to exist: a race test runs another job meanwhile."""
    if os.environ.get("NEARDUP_KILL_AT") == name:
        os._exit(137)
    if os.environ.get("NEARDUP_HOLD_AT") == name:
        hold = os.environ["NEARDUP_HOLD_FILE"]
        open(f"{hold}.reached", "w").close()
        deadline = time.monotonic() + 600
        while not os.path.exists(hold) and time.monotonic() < deadline:
            time.sleep(0.1)


def writer_mode(mode: str) -> str:
    """output.mode as DataFrameWriter takes it everywhere: Spark Connect refuses
    "errorifexists" (its alias "error" works on both)."""
    return "error" if mode == "errorifexists" else mode


class StorageError(NeardupError):
    """A path the executors write is not where the driver reads, or a table came out short."""


def _data_files(spark: SparkSession, path: str) -> int | None:
    """Data files (not _ or . bookkeeping) directly under path, as the driver's filesystem
    lists them; None without a JVM at hand (Spark Connect)."""
    jvm = paths.hadoop(spark)
    if jvm is None:
        return None
    vm, conf = jvm
    hpath = vm.org.apache.hadoop.fs.Path(path)
    fs = hpath.getFileSystem(conf)
    if not fs.exists(hpath):
        return 0
    names = [str(s.getPath().getName()) for s in fs.listStatus(hpath)]
    return sum(1 for n in names if not n.startswith(("_", ".")))


def _delete(spark: SparkSession, path: str) -> None:
    jvm = paths.hadoop(spark)
    if jvm is not None:
        vm, conf = jvm
        hpath = vm.org.apache.hadoop.fs.Path(path)
        hpath.getFileSystem(conf).delete(hpath, True)


def probe_executor_writes(spark: SparkSession, root: str, what: str = "output") -> None:
    """Refuse `root` when files the executors write under it do not reach the driver.

    Writes `_neardup_probe-<uuid>/` under root (one small file per task) and removes
    it. Without a JVM at hand (Spark Connect) the server is the driver: nothing to do."""
    if paths.hadoop(spark) is None:
        return
    tasks = max(1, min(PROBE_TASKS, spark.sparkContext.defaultParallelism))
    probe = f"{root.rstrip('/')}/{PROBE_PREFIX}{uuid.uuid4().hex[:12]}"
    try:
        try:
            spark.range(0, tasks, 1, tasks).write.mode("error").parquet(probe)
        except Exception as exc:
            raise StorageError(f"the executors cannot write the {what} {root!r}: {paths.reason(exc)}") from None
        seen = _data_files(spark, probe)
        if seen is not None and seen < tasks:
            raise StorageError(
                f"the {what} {root!r} is not shared storage: the executors wrote {tasks} probe files there and the "
                f"driver sees {seen}; on a cluster use a path every node reaches (HDFS, S3, ABFS, GCS, DBFS, "
                "or a mount on every node)"
            )
    finally:
        try:
            _delete(spark, probe)
        except Exception:  # noqa: BLE001 - a leftover probe directory is harmless
            pass


def verify_written(spark: SparkSession, root: str, expected: dict[str, int], what: str = "output") -> None:
    """Each table root/name holds expected[name] rows as the driver reads it, or StorageError."""
    got: dict[str, int] = {}

    def count(name: str):
        def go():
            got[name] = spark.read.parquet(f"{root.rstrip('/')}/{name}").count()
        return go

    run_all([count(name) for name in expected], session=spark)
    short = [f"{name}/ has {got[name]} rows, the run made {n}" for name, n in expected.items() if got[name] != n]
    if short:
        raise StorageError(
            f"the {what} {root!r} did not come out whole ({'; '.join(short)}): if this is a cluster, the path is "
            "probably not shared storage (the executors' files stayed where the driver does not read)"
        )


@contextmanager
def checkpoint_dir(spark: SparkSession, cfg: Config, output: str | None = None) -> Iterator[None]:
    """The context has a checkpoint directory while the run needs one (cluster.checkpoint =
    "reliable", or the GraphFrames backend): cluster.checkpoint_dir, else the session's own,
    else a temporary directory under `output` (storage the executors share, once probed),
    removed afterwards. Without any of them: a one-line error before the work."""
    needs = cfg.cluster.checkpoint == "reliable" or cfg.cluster.backend == "graphframes"
    if not needs or paths.hadoop(spark) is None:
        yield
        return
    context = spark.sparkContext
    if cfg.cluster.checkpoint_dir:
        context.setCheckpointDir(cfg.cluster.checkpoint_dir)
    if cfg.cluster.checkpoint_dir or context.getCheckpointDir():
        yield
        return
    if not output:
        raise NeardupError(
            f"cluster.checkpoint = {cfg.cluster.checkpoint!r} with cluster.backend = {cfg.cluster.backend!r} needs a "
            "checkpoint directory on storage every executor reaches: set cluster.checkpoint_dir, or call "
            "spark.sparkContext.setCheckpointDir(...)"
        )
    remove_leftovers(spark, output, (CHECKPOINT_PREFIX,))
    temporary = f"{output.rstrip('/')}/{CHECKPOINT_PREFIX}{uuid.uuid4().hex[:12]}"
    context.setCheckpointDir(temporary)
    try:
        yield
    finally:
        try:
            _delete(spark, temporary)
        except Exception:  # noqa: BLE001 - leftover checkpoint files do not change the outputs
            pass


def remove_leftovers(spark: SparkSession, root: str, prefixes: tuple[str, ...]) -> None:
    """Remove what killed runs of ours left under root (folders whose names start with
    `prefixes`), never anything else. Staging folders: see `runtime.publish`."""
    jvm = paths.hadoop(spark)
    if jvm is None:
        return
    vm, conf = jvm
    hpath = vm.org.apache.hadoop.fs.Path(root)
    fs = hpath.getFileSystem(conf)
    if not fs.exists(hpath) or not fs.getFileStatus(hpath).isDirectory():
        return
    for status in fs.listStatus(hpath):
        if str(status.getPath().getName()).startswith(prefixes):
            fs.delete(status.getPath(), True)
