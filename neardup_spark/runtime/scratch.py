"""Scratch tables: stage boundaries written out and read back, for sessions that cannot cache.

Databricks serverless (and any Spark Connect server set up like it) refuses
`DataFrame.persist`, `cache` and both kinds of checkpoint. A run there names a
schema it may write to (`cluster.scratch`, `--scratch`): every boundary the
runner would have kept (`runtime.runner.materialise`) becomes a table in that
schema, written once and read back, which cuts the lineage as a checkpoint
does. A table is dropped as soon as no later stage reads it (`Runner.drop`),
and the rest when the run releases its frames (`Runner.release`, or
`DedupResult.unpersist()` for the library's result).

The tables take the session's default format (Delta on Databricks, Parquet in
open-source Spark) and names `neardup_scratch_<run>_<n>`, so a killed run's
leftovers are easy to find and drop.
"""

from __future__ import annotations

import itertools
import threading
import uuid

from pyspark.sql import DataFrame, SparkSession

from neardup_spark.errors import NeardupError, one_line

PREFIX = "neardup_scratch_"


def qualified(schema: str, name: str) -> str:
    """`a.b` + `t` -> "`a`.`b`.`t`": each part quoted, so any schema name the user gives works."""
    parts = [p for p in schema.split(".") if p] + [name]
    return ".".join(f"`{p.replace('`', '``')}`" for p in parts)


class Scratch:
    """The scratch tables of one run in `schema`: `write` keeps a frame, `drop` forgets it."""

    def __init__(self, spark: SparkSession, schema: str):
        self.spark = spark
        self.schema = schema
        self.run = uuid.uuid4().hex[:12]
        self._numbers = itertools.count()
        self._tables: dict[int, str] = {}  # id(frame read back) -> its table
        self._lock = threading.Lock()

    def write(self, df: DataFrame) -> DataFrame:
        """df written as a new table of this run, and that table read back."""
        with self._lock:
            name = qualified(self.schema, f"{PREFIX}{self.run}_{next(self._numbers)}")
        df.write.mode("error").saveAsTable(name)
        back = self.spark.read.table(name)
        with self._lock:
            self._tables[id(back)] = name
        return back

    def drop(self, df: DataFrame) -> None:
        """Drop the table behind df (a frame `write` returned); nothing for other frames."""
        with self._lock:
            name = self._tables.pop(id(df), None)
        if name is not None:
            self.spark.sql(f"DROP TABLE IF EXISTS {name}")

    def drop_all(self) -> None:
        with self._lock:
            names, self._tables = list(self._tables.values()), {}
        for name in names:
            self.spark.sql(f"DROP TABLE IF EXISTS {name}")


def refused(exc: BaseException, what: str) -> NeardupError:
    """The one-line error for a session that will not persist or checkpoint (e.g. serverless)."""
    return NeardupError(
        f"this Spark session refused to {what} a DataFrame, as Databricks serverless does: set cluster.scratch "
        f"(--scratch) to a schema the run may write its intermediate tables to (cause: {one_line(exc, 160)})"
    )
