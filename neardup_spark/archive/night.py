"""What the steps of a nightly append share: the night's state, the shared columns and limits.

A `Night` carries the session, the plan, the index as of this night and the
runner that keeps and counts the night's frames: the steps of `append`,
`replace` and `assign` take it instead of threading the four one by one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from neardup_spark import columns as C
from neardup_spark.archive import index as ix
from neardup_spark.config import Config
from neardup_spark.plan import Plan
from neardup_spark.runtime.runner import Runner
from neardup_spark.runtime.masters import is_local_master, master_of
from neardup_spark.runtime.storage import probe_executor_writes
from neardup_spark.stages.keepers import TEXT_LEN, keeper_columns
from neardup_spark.stages.pipeline import CLUSTER_COLUMNS, Matches

# The tables a nightly batch writes (clusters: the batch's and the archived ones it changed).
APPEND_TABLES = ("clusters", "pairs")

ADOC = C.ADOC  # an archived document's id
FROM_BATCH = "_from_batch"
IN_BATCH = "in_batch"  # append output: False for an archived document whose assignment changed
PAIR_COLUMNS = (C.DOC_A, C.DOC_B, C.JACCARD, C.CONTAINMENT_A, C.CONTAINMENT_B, C.MATCH)
BROADCAST_ROWS = ix.BROADCAST_ROWS
# The batch's band rows (_nid, bucket: 16 bytes) are broadcast into the archive's band rows up
# to this many (a ~500k-document batch at 42 bands; a few hundred MB on the driver, whatever
# the archive). A larger batch is joined by a shuffle, which moves every archived band row
# (42 a document) and so grows with the archive, not the batch.
BROADCAST_BAND_ROWS = 20_000_000


@dataclass(frozen=True)
class Night:
    """One append's shared state: the session, the plan, the index as of this night (a
    replacement adds its removal part) and the runner of its stages."""

    spark: SparkSession
    plan: Plan
    idx: ix.Index
    run: Runner

    @property
    def cfg(self) -> Config:
        return self.plan.cfg

    def with_index(self, idx: ix.Index) -> "Night":
        return dataclasses.replace(self, idx=idx)


def fingerprint_columns(plan: Plan) -> list[str]:
    return plan.matcher.simhash.columns if plan.matcher.simhash is not None else []


def doc_columns(plan: Plan) -> list[str]:
    return [C.DOC_ID, ix.TEXT_DIGEST, C.EXACT_HASH, C.SHINGLES, *fingerprint_columns(plan), TEXT_LEN, C.IS_EMPTY,
            *keeper_columns(plan.keeper)]


def maybe_broadcast(df: DataFrame, rows: int) -> DataFrame:
    return F.broadcast(df) if rows <= BROADCAST_ROWS else df


@dataclass(frozen=True)
class Matched:
    """What `_match` found for a batch, and what the later phases of an append read."""

    table: DataFrame  # the new documents' sketch table (internal ids)
    found: Matches  # within the batch and against the archive (met: archived documents, negative _nid)
    already: DataFrame  # batch ids already in the index with the same text
    removal: DataFrame | None = None  # re-clustered assignments after replaced documents (see `_remove`)

    @property
    def edges(self) -> DataFrame:  # verified pairs and exact copies, within the batch and to met archived documents
        return self.found.edges

    @property
    def met(self) -> DataFrame:  # archived documents met (_adoc, their negative internal _nid)
        return self.found.met

    @property
    def banded(self) -> DataFrame:  # the new representatives' (_nid, bucket) rows, appended to the index's bands
        return self.found.banded


def supported(cfg) -> None:
    """What the archive index does not do yet, refused before any work."""
    if cfg.match.mode != "jaccard":
        raise ix.IndexError_("the archive index supports match.mode = 'jaccard' only")


def probe_writes(spark: SparkSession, index_path: str, output: str | None) -> None:
    """On a cluster: the executors' files under the index and the output reach the driver."""
    if not is_local_master(master_of(spark)):
        probe_executor_writes(spark, index_path, "index")
        if output:
            probe_executor_writes(spark, output)


def changed_only(decided: DataFrame, before: DataFrame) -> DataFrame:
    """The rows of decided(cluster columns) that differ from before(cluster columns)."""
    was = before.select(C.DOC_ID, *[F.col(c).alias(f"_was_{c}") for c in CLUSTER_COLUMNS[1:]])
    same = F.lit(True)
    for c in CLUSTER_COLUMNS[1:]:
        same = same & F.col(f"_was_{c}").eqNullSafe(F.col(c))
    return decided.join(was, C.DOC_ID, "left").where(~same).select(*CLUSTER_COLUMNS)
