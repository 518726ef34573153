"""The runner: where a run's DataFrames become Spark jobs, named, timed and counted.

Stage functions only build DataFrames. Every entry point (a run, an index
build, a nightly append, a calibration) makes one `Runner` and chains the
stages inside `runner.stage(name)` blocks; the runner

- names the Spark jobs of a block after its stage (classic sessions), so the
  UI and event logs attribute shuffle bytes and task time to stages;
- times each block (`seconds`);
- materialises a stage boundary by one policy (`materialise`): persisted,
  and with `cut` also the lineage cut (a local checkpoint), for the nightly
  append's many small frames whose plans would otherwise nest every earlier one;
  or, where the session cannot cache (Databricks serverless), written to a scratch
  table and read back (`runtime.scratch`, cluster.scratch);
- drops a boundary as soon as no later stage reads it (`drop`), so that Spark's
  cleaner can delete the shuffle files behind it during the run rather than at
  its end (at 10M documents verify's shuffle alone is tens of GB of local disk);
- gathers the figures (`counts`: the same on any partitioning; `work`: how the
  run got there) into the frozen `Report` the entry point returns;
- shows progress (`runtime.progress`) when the entry point asked for it.

A boundary is counted once, when it is materialised: the count is the
report's figure and the job that computes the cached rows, so no action runs
just to log.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from neardup_spark.runtime.progress import current_progress, task_counter
from neardup_spark.runtime.report import Report
from neardup_spark.runtime.scratch import Scratch, refused


# --- How the pipeline caches what later stages read again ----------------------
#
# PySpark's StorageLevel.MEMORY_AND_DISK is the *serialized* level (Scala's is
# not): the cached column batches are serialized once more when stored and
# deserialized at every read, and the sketch table alone is read by four later
# stages. MEMORY_AND_DISK_DESER, PySpark's default for DataFrame.cache(), keeps
# them as they are in memory (and still serializes what spills to disk).
# Measured here at 100k (local[2]): reading a persisted sketch table three
# times took a median 10.4 s against 11.7 s; whole `neardup run`s, six
# alternating pairs, a median 27.6 s against 30.0 s (five pairs of six faster);
# at 1M, four pairs were within the machine's noise (108-144 s against 125-139 s).

CACHE_LEVEL = StorageLevel.MEMORY_AND_DISK_DESER


# How a boundary is kept: persisted (released by `Runner.release`), or its lineage cut by a
# local checkpoint (kept until the session drops it), or by a reliable checkpoint (written
# to the checkpoint directory: survives a lost executor).
KEEP, LOCAL, RELIABLE = "keep", "local", "reliable"


def materialise(df: DataFrame, how: str = KEEP, scratch: Scratch | None = None) -> DataFrame:
    """df, lazily kept by `how` (LOCAL, RELIABLE, or anything else, e.g. cluster.checkpoint
    "none": KEEP): the next action computes and stores it. With a `scratch`, whatever `how`
    says, df is written to a scratch table now and read back (see `runtime.scratch`).

    A session that refuses to persist or checkpoint (Databricks serverless) gets a one-line
    error naming cluster.scratch."""
    if scratch is not None:
        return scratch.write(df)
    try:
        if how == LOCAL:
            return df.localCheckpoint(eager=False)
        if how == RELIABLE:
            return df.checkpoint(eager=False)
        return df.persist(CACHE_LEVEL)
    except Exception as exc:  # persist and checkpoints only plan on classic sessions: a refusal
        raise refused(exc, "persist" if how not in (LOCAL, RELIABLE) else "checkpoint") from exc


def drop_checkpoint(df: DataFrame) -> None:
    """Remove the stored blocks of a local checkpoint (a DataFrame over a checkpointed RDD)."""
    try:
        plan = df._jdf.queryExecution().logical()
        if plan.getClass().getSimpleName() == "LogicalRDD":
            plan.rdd().unpersist(False)
    except Exception:  # Spark Connect (no JVM handle), or another plan: Spark's cleaner drops it later
        pass


def unkeep(df: DataFrame, how: str = KEEP, scratch: Scratch | None = None) -> None:
    """Undo `materialise(df, how, scratch)`: unpersisted, its checkpoint blocks or its scratch
    table dropped."""
    if scratch is not None:
        scratch.drop(df)  # nothing for a frame it did not write: a scratch run persists nothing
        return
    df.unpersist()
    if how == LOCAL:
        drop_checkpoint(df)


class Runner:
    """Stage names, wall times, kept frames and figures of one run (see the module doc).

    `cut`: boundaries are local checkpoints instead of persisted frames. `scratch`: a schema
    (cluster.scratch): every boundary is a table written there instead (`runtime.scratch`).
    """

    def __init__(self, spark: SparkSession, cut: bool = False, scratch: str = ""):
        self.spark = spark
        self.cut = cut
        self.scratch = Scratch(spark, scratch) if scratch else None
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, int] = {}  # figures of the result
        self.work: dict[str, int] = {}  # how the run got there (e.g. components_rounds): may vary with ids
        self.kept: list[tuple[DataFrame, str]] = []  # and how (KEEP, LOCAL or RELIABLE)
        self._kept_lock = threading.Lock()  # stages keep frames from several threads (run_all)
        self.progress = current_progress()
        self._collect = False  # frames were dropped: collect the JVM's garbage before the next stage
        try:
            self._context = spark.sparkContext
        except Exception:  # Spark Connect has no SparkContext
            self._context = None

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Name, time (and, with progress on, show) the Spark jobs run inside the block."""
        self._collect_garbage()
        if self._context is not None:
            self._context.setJobDescription(f"neardup: {name}")
        start = time.perf_counter()
        shown = self.progress.stage(name, task_counter(self._context), self.counts) if self.progress else nullcontext()
        try:
            with shown:
                yield
        finally:
            self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - start, 3)
            if self._context is not None:
                self._context.setJobDescription(None)

    def keep(self, df: DataFrame, now: bool = False, cut: bool | None = None, how: str | None = None) -> DataFrame:
        """df materialised by this run's policy (or, with `cut` given, with its lineage cut by a
        local checkpoint or not; or `how`, a `materialise` mode): lazily (its next action
        computes it), or `now` (one count job), for a frame read twice by one job or
        numbered by position."""
        if how is None:
            how = LOCAL if (self.cut if cut is None else cut) else KEEP
        kept = materialise(df, how, self.scratch)
        with self._kept_lock:
            self.kept.append((kept, how))
        if now:
            kept.count()
        return kept

    def counted(self, df: DataFrame, figure: str | None = None, cut: bool | None = None,
                how: str | None = None) -> tuple[DataFrame, int]:
        """(`keep(df, cut=cut, how=how)`, its row count): one job computes both; the count is
        recorded as counts[figure] when a figure is named."""
        kept = self.keep(df, cut=cut, how=how)
        n = kept.count()
        if figure is not None:
            self.counts[figure] = n
        return kept, n

    def release(self) -> None:
        """Drop every frame kept so far: persisted frames are unpersisted, and the blocks of
        local checkpoints removed (a long-lived session, e.g. a notebook running an append
        every night, would otherwise hold them until the JVM's garbage collector runs)."""
        with self._kept_lock:
            kept, self.kept = self.kept, []
        for df, how in kept:
            unkeep(df, how, self.scratch)
        if self.scratch is not None:
            self.scratch.drop_all()  # also the tables stages wrote themselves (components' rounds)

    @contextmanager
    def released_on_error(self) -> Iterator[None]:
        """`release` if the block raises (scratch tables are not left behind by a failed run);
        the block's error is the one raised."""
        try:
            yield
        except BaseException:
            try:
                self.release()
            except Exception:  # noqa: BLE001 - a dead session: the block's error says more
                pass
            raise

    def drop(self, *frames: DataFrame) -> None:
        """Release these kept frames now, as no later stage reads them. Spark's cleaner deletes
        a shuffle's files once the driver's JVM has collected every plan that refers to it,
        and a persisted frame refers to every shuffle in its plan; so the next `stage` first
        asks the JVM to collect its garbage, once the caller's own references are gone too."""
        ids = {id(df) for df in frames}
        with self._kept_lock:
            dropped = [kept for kept in self.kept if id(kept[0]) in ids]
            self.kept = [kept for kept in self.kept if id(kept[0]) not in ids]
        for df, how in dropped:
            unkeep(df, how, self.scratch)
        self._collect = True

    def _collect_garbage(self) -> None:
        if self._collect and self._context is not None:
            gc.collect()  # Python first: a DataFrame freed here releases its JVM handle
            try:
                self._context._jvm.System.gc()
            except Exception:  # pragma: no cover - no JVM handle: Spark's periodic GC does it later
                pass
        self._collect = False

    def report(self, **sections: Any) -> Report:
        """The run's report: these sections and the runner's figures as they are now."""
        return Report(counts=dict(self.counts), work=dict(self.work), stage_seconds=dict(self.seconds), **sections)
