"""A replaced document's old text taken out of the archive index (`index.replace`).

`remove` writes a removal part, uncommitted: the replaced ids, and the new
assignment of every other member of their clusters (keeper linkage: their
components), re-clustered from the stored pairs without them. The append
then treats the new texts as newcomers.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from neardup_spark import columns as C
from neardup_spark.archive import index as ix
from neardup_spark.archive import stars
from neardup_spark.archive.night import PAIR_COLUMNS, Night, changed_only
from neardup_spark.stages.components import connected_components
from neardup_spark.stages.keepers import ranked


def remove(night: Night, changed: DataFrame) -> tuple[Night, DataFrame]:
    """Take the old versions of replaced documents out of the archive, uncommitted.

    Writes a removal part: their ids (earlier rows of them stop counting) and
    the new assignment of every other member of their clusters (keeper
    linkage: components), re-clustered from the stored pairs without them (a
    cluster held together by a replaced document splits). Returns the index
    with that part as its newest, and the changed assignments (with _moved)."""
    spark, plan, idx, run = night.spark, night.plan, night.idx, night.run
    keeper = plan.cfg.cluster.linkage == "keeper"
    group = C.COMPONENT_ID if keeper else C.CLUSTER_ID  # what a replaced document can split
    with_old = idx.assignments_of(spark, changed)
    clusters = run.keep(with_old.select(group).distinct(), now=True)
    rest = run.keep(idx.members_of(spark, clusters, by=group).join(changed, C.DOC_ID, "left_anti")
                    .withColumn(C.NID, F.monotonically_increasing_id()), now=True)
    stored = idx.pairs(spark)
    if stored is None:  # pragma: no cover - every part of this format stores its pairs
        raise ix.IndexError_("this index stores no pairs to re-cluster from; rebuild it to replace documents")
    copies, heirs = _copies_and_heirs(night, rest, changed)
    heirs = run.keep(heirs, now=True)
    inherited = _inherited_pairs(stored, heirs, rest)
    stored = _inherit(_inherit(stored, heirs, C.DOC_A), heirs, C.DOC_B)
    ida = rest.select(F.col(C.DOC_ID).alias(C.DOC_A), F.col(C.NID).alias("_na"))
    idb = rest.select(F.col(C.DOC_ID).alias(C.DOC_B), F.col(C.NID).alias("_nb"))
    edges = stored.join(ida, C.DOC_A).join(idb, C.DOC_B).select(F.col("_na").alias(C.DOC_A), F.col("_nb").alias(C.DOC_B))
    edges = edges.where(F.col(C.DOC_A) != F.col(C.DOC_B)).unionByName(copies)
    if keeper:
        docs = rest.join(idx.docs(spark), C.DOC_ID)
        decided = stars.restar(plan, stars.view(docs, plan, False), edges, run).select(*stars.ROWS)
        changes = run.keep(stars.changed_rows(decided, rest.select(*stars.ROWS)), now=True)
    else:
        changes = run.keep(_recluster(night, rest, edges), now=True)
    run.counts["replaced_clusters_recomputed"] = clusters.count()
    part = ix.new_part_name(idx.manifest["version"] + 1)
    ix.write_part(f"{idx.path}/parts/{part}", None, None, changes, outputs={"pairs": inherited}, removed=changed)
    return night.with_index(idx.with_part(part)), changes


def _inherited_pairs(stored: DataFrame, heirs: DataFrame, rest: DataFrame) -> DataFrame:
    """The stored pairs of replaced documents passed on to their heirs (pairs rows, doc_a <
    doc_b, both ends remaining). The removal part stores them: the stored pairs of a replaced
    document stop counting, and a later re-clustering (a replacement, or a keeper-linkage
    batch) reads the pairs, not this night's re-clustering."""
    gone = F.broadcast(heirs.select("_gone"))
    touched = stored.join(gone.withColumnRenamed("_gone", C.DOC_A), C.DOC_A, "left_semi").unionByName(
        stored.join(gone.withColumnRenamed("_gone", C.DOC_B), C.DOC_B, "left_semi"))
    moved = _inherit(_inherit(touched.select(*PAIR_COLUMNS), heirs, C.DOC_A), heirs, C.DOC_B)
    ids = rest.select(C.DOC_ID)
    moved = moved.where(F.col(C.DOC_A) != F.col(C.DOC_B)).join(
        ids.withColumnRenamed(C.DOC_ID, C.DOC_A), C.DOC_A, "left_semi").join(
        ids.withColumnRenamed(C.DOC_ID, C.DOC_B), C.DOC_B, "left_semi")
    swap = F.col(C.DOC_A) > F.col(C.DOC_B)

    def either(col: str, other: str) -> F.Column:
        return F.when(swap, F.col(other)).otherwise(F.col(col)).alias(col)

    return moved.select(either(C.DOC_A, C.DOC_B), either(C.DOC_B, C.DOC_A), C.JACCARD,
                        either(C.CONTAINMENT_A, C.CONTAINMENT_B), either(C.CONTAINMENT_B, C.CONTAINMENT_A),
                        C.MATCH).distinct()


def _recluster(night: Night, rest: DataFrame, edges: DataFrame) -> DataFrame:
    """Connected components of the remaining members rest(assign columns, _nid) over edges,
    their keepers, and the rows that changed (with _moved)."""
    spark, plan, idx = night.spark, night.plan, night.idx
    comps = connected_components(edges, plan.cfg, scratch=night.run.scratch)
    comps = comps.select(F.col(C.DOC_ID).alias(C.NID), F.col(C.CLUSTER_ID).alias("_comp"))
    grouped = rest.join(comps, C.NID, "left").withColumn("_comp", F.coalesce("_comp", C.NID))
    view = grouped.select(C.DOC_ID, "_comp", F.col(C.CLUSTER_ID).alias("_old_cluster"),
                          F.col(C.KEEPER_ID).alias("_old_keeper")).join(idx.docs(spark), C.DOC_ID)
    sticky = [F.col(C.DOC_ID) != F.col("_old_keeper")] if plan.cfg.index.sticky_keeper else []
    # A part keeps its cluster's id while the document that names it is in the part.
    decided = ranked(view, plan.keeper, "_comp", lambda comp: stars.named(comp, "_old_cluster"), sticky)
    return changed_only(decided, rest).withColumn(stars.MOVED, F.lit(True))


def _copies_and_heirs(night: Night, rest: DataFrame, changed: DataFrame):
    """(exact edges among the remaining members, heirs(_gone, _heir)).

    The stored pairs name each text by one representative: its exact copies hang off it by
    exact pairs only. When a replaced document was that representative, its copies keep
    each other (a star to the smallest remaining id of the text) and its verified pairs
    pass to that copy, which has the same text and so the same Jaccard: as a full run
    over the final texts would find them."""
    spark, idx, run = night.spark, night.idx, night.run
    docs = idx.docs(spark).where(~F.col(C.IS_EMPTY)).select(C.DOC_ID, C.EXACT_HASH)
    hashed = run.keep(rest.select(C.DOC_ID, C.NID).join(docs, C.DOC_ID), now=True)
    first = hashed.groupBy(C.EXACT_HASH).agg(F.min(F.struct(C.DOC_ID, C.NID)).alias("_first"))
    copies = hashed.join(first, C.EXACT_HASH).where(F.col(C.DOC_ID) != F.col(f"_first.{C.DOC_ID}")).select(
        F.col(f"_first.{C.NID}").alias(C.DOC_A), F.col(C.NID).alias(C.DOC_B))
    heirs = changed.select(C.DOC_ID).join(docs, C.DOC_ID).join(first, C.EXACT_HASH).select(
        F.col(C.DOC_ID).alias("_gone"), F.col(f"_first.{C.DOC_ID}").alias("_heir"))
    return copies, heirs


def _inherit(pairs: DataFrame, heirs: DataFrame, end: str) -> DataFrame:
    """pairs with `end` renamed to its heir where that end is a replaced document with one."""
    joined = pairs.join(F.broadcast(heirs), F.col(end) == F.col("_gone"), "left")
    return joined.withColumn(end, F.coalesce(F.col("_heir"), F.col(end))).drop("_gone", "_heir")


__all__ = ["remove"]
