"""Clusters and keepers after a batch (component linkage): newcomers join what they match.

Connected components over the batch documents and the archived *clusters*
they touch: a newcomer joins the cluster it matches (its id is kept), bridges
merge clusters (the smallest of their ids is kept), other newcomers make new
clusters (their smallest doc id, as in a full run). Keepers follow the
configured rules over each touched cluster; with `index.sticky_keeper` an
archived keeper is never replaced. (Keeper linkage re-clusters each touched
component whole instead: see `stars`.)
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from neardup_spark import columns as C
from neardup_spark.archive import stars
from neardup_spark.archive.night import ADOC, FROM_BATCH, Matched, Night, changed_only
from neardup_spark.config import KeeperConfig
from neardup_spark.plan import Plan
from neardup_spark.stages.components import COMP, grouped_components, solved_on_driver
from neardup_spark.stages.keepers import TEXT_LEN, keeper_columns, ranked
from neardup_spark.stages.pipeline import CLUSTER_COLUMNS


def assign(night: Night, found: Matched) -> DataFrame:
    """New assignments: the batch's new documents and every member of a touched archived cluster."""
    spark, plan, idx, run = night.spark, night.plan, night.idx, night.run
    table, counts = found.table, run.counts
    with run.stage("components"):
        # Every edge is a verified pair or an exact copy (of a batch or an archived text).
        most = counts["verified_pairs"] + counts["exact_duplicates"] + counts["exact_archive_matches"]
        small = solved_on_driver(plan.cfg, most)
        # The graph: batch documents, and each touched archived cluster as one node.
        current = idx.assignments_of(spark, found.met.select(F.col(ADOC).alias(C.DOC_ID)))
        met_clusters = found.met.join(current.withColumnRenamed(C.DOC_ID, ADOC), ADOC).select(C.NID, C.CLUSTER_ID)
        if not small:  # read by several jobs of the distributed path
            met_clusters = run.keep(met_clusters, now=True)
        comps, arch_comp = grouped_components(found.edges, met_clusters, C.CLUSTER_ID, plan.cfg, run.work, most,
                                              run.scratch)
        counts["archived_clusters_touched"] = run.work.pop("groups")
        touched = arch_comp.select(C.CLUSTER_ID)
        members = run.keep(idx.members_of(spark, F.broadcast(touched) if small else touched), now=True)

    with run.stage("keepers"):
        # Every document whose assignment may change: batch documents (in a component or alone)
        # and the members of touched archived clusters; `_comp` names its component.
        batch = table.join(comps, C.NID, "left").select(
            *_keeper_view(plan.keeper, F.lit(True)),
            F.coalesce(F.col(COMP), F.col(C.NID)).alias(COMP),
            F.lit(None).cast(dict(table.dtypes)[C.DOC_ID]).alias("_old_cluster"),
        )
        arch_docs = idx.docs(spark)
        archived = members.join(arch_comp, C.CLUSTER_ID).join(arch_docs, C.DOC_ID).select(
            *_keeper_view(plan.keeper, F.lit(False)), COMP, F.col(C.CLUSTER_ID).alias("_old_cluster")
        )
        everyone = batch.unionByName(archived)
        return _decide(everyone, plan, members)


def _keeper_view(keeper: KeeperConfig, from_batch: F.Column) -> list:
    return [C.DOC_ID, C.IS_EMPTY, C.EXACT_HASH, TEXT_LEN, *keeper_columns(keeper), from_batch.alias(FROM_BATCH)]


def _decide(everyone: DataFrame, plan: Plan, members: DataFrame) -> DataFrame:
    """Per component: the cluster id (an archived one if any: the smallest), the keeper, statuses."""
    # Sticky keepers: archived members first, so newcomers win only in new clusters.
    sticky = [F.col(FROM_BATCH)] if plan.cfg.index.sticky_keeper else []

    def archived_first(comp: Window) -> F.Column:
        return F.coalesce(F.min("_old_cluster").over(comp), F.min(C.DOC_ID).over(comp))

    # Empty texts never join a component (they have no edges), so each is a component alone.
    decided = ranked(everyone, plan.keeper, COMP, archived_first, sticky, keep=["_old_cluster"])
    decided = decided.withColumn("_archived", F.col("_old_cluster").isNotNull()).drop("_old_cluster")
    # Archived documents only where something changed.
    batch = decided.where(~F.col("_archived")).select(*CLUSTER_COLUMNS, F.lit(False).alias("_archived"))
    changed = changed_only(decided.where(F.col("_archived")), members)
    return batch.unionByName(changed.withColumn("_archived", F.lit(True))).withColumn(stars.MOVED, F.lit(True))


__all__ = ["assign"]
