"""An archive index as an object with DataFrames in and out: for notebooks, streams and jobs.

    archive = Archive.create(spark, "/Volumes/main/news/index", articles, id_col="url", text_col="body")
    night = archive.append(tonight)       # checked against the archive and itself, in one commit
    night.clusters, night.pairs          # the batch's tables, as the index stores them
    archive.clusters()                    # every archived document's current cluster

`append` of a batch the archive already holds (the same ids and texts) is a replay: it
changes nothing and returns what the first append produced. So `append` is safe as a
Structured Streaming `foreachBatch` function: a micro-batch Spark runs again after a
failure (the same rows) commits once (see docs/streaming.md).

The path-and-Config functions (`build_index`, `append`, `export`, ...) and the `neardup`
command do the same from files; this object is for DataFrames a session already holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from neardup_spark.api import compact_index, options, package_on_workers, vacuum_index
from neardup_spark.archive import build as _build
from neardup_spark.archive import index as ix
from neardup_spark.archive import append as _append
from neardup_spark.archive.housekeeping import Compaction, Vacuum
from neardup_spark.config import Config
from neardup_spark.plan import resolve
from neardup_spark.runtime.report import Report
from neardup_spark.runtime.sizing import sized
from neardup_spark.stages.pipeline import CLUSTER_COLUMNS


@dataclass(frozen=True)
class Appended:
    """One batch appended (or replayed): its clusters (its documents, and archived documents
    whose cluster, keeper or status it changed) and verified pairs, as the index part stores
    them, and the run's report (`report.replayed`: the batch was there already)."""

    clusters: DataFrame  # doc_id, cluster_id, is_keeper, keeper_id, status, in_batch
    pairs: DataFrame  # doc_a, doc_b, jaccard, containment_a, containment_b, match
    report: Report


class Archive:
    """The archive index at `path`, read and appended to through `spark` with one Config (its
    match settings are the index's: a different setting is refused at `append`)."""

    def __init__(self, spark: SparkSession, path: str, config: Config):
        self.spark = spark
        self.path = path
        self.config = config.with_overrides({"index.path": path})
        self.report: Report | None = None  # the build's, for an archive `create` made

    @classmethod
    def create(cls, spark: SparkSession, path: str, df: DataFrame, config: Config | None = None, *,
               output: str = "", **settings: Any) -> Archive:
        """A new index at `path` holding `df` (id and text columns as `deduplicate` takes them;
        the keywords are `deduplicate`'s). With `output`, the build's clusters, pairs and
        report are written there too. The index is refused if `path` holds one already."""
        archive = cls(spark, path, options(config, **settings))
        with package_on_workers(), sized(spark):
            archive.report = _build.build(spark, resolve(archive.config), output or None, raw=df)
        return archive

    @classmethod
    def open(cls, spark: SparkSession, path: str, config: Config | None = None, **settings: Any) -> Archive:
        """The index at `path` (an error if there is none)."""
        archive = cls(spark, path, options(config, **settings))
        archive.manifest()  # refuses a path without an index now
        return archive

    def manifest(self) -> dict:
        """The newest committed version's manifest (version, documents, parts, ...)."""
        return dict(ix.open_index(self.path, self.spark).manifest)

    @property
    def version(self) -> int:
        return int(self.manifest()["version"])

    @property
    def documents(self) -> int:
        return int(self.manifest()["documents"])

    def append(self, df: DataFrame, *, output: str = "", table: str = "", overwrite: bool = False) -> Appended:
        """`df` as a batch: checked against the archive and itself, clustered, and appended in
        one commit. With `output` (a folder), the batch's tables and report are written there
        as `neardup run --append` writes them (and with `table`, a catalog table prefix, as
        tables). A batch appended before is a replay: nothing changes."""
        cfg = self.config.with_overrides({"index.append": True, "output.path": output, "output.table": table,
                                          "output.mode": "overwrite" if overwrite else None})
        with package_on_workers(), sized(self.spark):
            report = _append.append(self.spark, resolve(cfg), raw=df)
        part = report.index["part"]
        idx = ix.open_index(self.path, self.spark)
        clusters, pairs = (ix.read_table(self.spark, idx.store, f"parts/{part}/output/{name}")
                           for name in ("clusters", "pairs"))
        return Appended(clusters, pairs, report)

    def clusters(self) -> DataFrame:
        """Every archived document's current cluster: doc_id, cluster_id, is_keeper, keeper_id, status."""
        return ix.open_index(self.path, self.spark).assignments(self.spark).select(*CLUSTER_COLUMNS)

    def compact(self, set_layout: str = "auto") -> Compaction:
        """One part with the same meaning (`compact_index`)."""
        return compact_index(self.spark, self.path, set_layout)

    def vacuum(self, retain_days: float = 7.0, dry_run: bool = False) -> Vacuum:
        """Remove replaced and orphaned parts older than `retain_days` (`vacuum_index`)."""
        return vacuum_index(self.spark, self.path, retain_days, dry_run)

    def __repr__(self) -> str:
        return f"Archive({self.path!r})"


__all__ = ["Appended", "Archive"]
