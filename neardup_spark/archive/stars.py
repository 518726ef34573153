"""Keeper linkage in the archive index: a batch re-clusters the whole components it touches.

With `cluster.linkage = "keeper"` a cluster is a star inside a connected
component of verified pairs (`stages.linkage`), and which stars a component
splits into depends on all of it: a newcomer that ranks first becomes a keeper
and takes the members it has a pair with. So a nightly
batch, and the removal of replaced texts, re-runs `keeper_stars` over every
component it touches, whole:

* the touched components: those of the archived documents that a batch
  document has a verified pair or an exact copy with (the assign table stores
  each document's `component_id`);
* their archived members (ids and keeper columns from the index)
  and the batch's new documents;
* the edges: the stored pairs among those members and the batch's own pairs.

`keeper_stars` treats components independently, so with `index.sticky_keeper`
off the stars are those of one full run over the archive and the batch (except
in buckets above `lsh.all_pairs_bucket_limit`, where a run and a batch propose
different pairs: docs/nightly.md). With
it on, archived keepers rank first, then archived documents, then newcomers:
a newcomer keeps a story only where no archived document ranks before it.

Ids stay put. A star keeps the cluster id of its member named by it (the
document whose id is its old cluster id), else takes its smallest doc_id; a
component keeps its component id the same way. Every id so names one of its
own members, so no two clusters (or components) share one, and a full run's
ids (the smallest doc_id) satisfy the same rule.

The work grows with the touched components, not the archive, except for one
scan of the stored pairs (two id columns) to find those among the members.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from neardup_spark import columns as C
from neardup_spark.archive import index as ix
from neardup_spark.plan import Plan
from neardup_spark.runtime.runner import Runner
from neardup_spark.stages.components import connected_components
from neardup_spark.stages.keepers import TEXT_LEN, keeper_columns, ranked
from neardup_spark.stages.linkage import keeper_stars
from neardup_spark.stages.pipeline import CLUSTER_COLUMNS

FROM_BATCH = "_from_batch"
MOVED = "_moved"  # the cluster, keeper or status changed (not only the component id)
_OLD_CLUSTER = "_old_cluster"
_OLD_COMPONENT = "_old_component"
_WAS_KEEPER = "_was_keeper"
_COMP = "_comp"
_STAR = "_star"
_NEW = "_new_nid"
ROWS = (*CLUSTER_COLUMNS, C.COMPONENT_ID)


def named(window: Window, old: str) -> Column:
    """A group's id: that of its member whose id is its `old` id, else its smallest doc_id."""
    naming = F.min(F.when(F.col(C.DOC_ID) == F.col(old), F.col(C.DOC_ID))).over(window)
    return F.coalesce(naming, F.min(C.DOC_ID).over(window))


def sticky_keys(plan: Plan) -> list[Column]:
    """The ranking keys ahead of the keeper rules: with index.sticky_keeper, archived keepers
    first, then archived documents, then the batch's."""
    return [~F.col(_WAS_KEEPER), F.col(FROM_BATCH)] if plan.cfg.index.sticky_keeper else []


def view(frame: DataFrame, plan: Plan, from_batch: bool, id_type: str | None = None) -> DataFrame:
    """frame(_nid, doc_id, is_empty, exact_hash, text_len, keeper columns[, cluster_id,
    component_id, is_keeper]: an archived document's current row) -> what `restar` reads."""
    own = [C.NID, C.DOC_ID, C.IS_EMPTY, C.EXACT_HASH, TEXT_LEN, *keeper_columns(plan.keeper)]
    if from_batch:
        none = F.lit(None).cast(id_type or dict(frame.dtypes)[C.DOC_ID])
        old = [none.alias(_OLD_CLUSTER), none.alias(_OLD_COMPONENT), F.lit(False).alias(_WAS_KEEPER)]
    else:
        old = [F.col(C.CLUSTER_ID).alias(_OLD_CLUSTER), F.col(C.COMPONENT_ID).alias(_OLD_COMPONENT),
               F.col(C.IS_KEEPER).alias(_WAS_KEEPER)]
    return frame.select(*own, F.lit(from_batch).alias(FROM_BATCH), *old)


def restar(plan: Plan, documents: DataFrame, edges: DataFrame, run: Runner) -> DataFrame:
    """documents (`view` rows: every member of the touched components, and the batch's new
    documents) + edges(doc_a, doc_b) among them, both by internal id -> (cluster columns, component_id, _from_batch) of every document."""
    cfg = plan.cfg
    first = sticky_keys(plan)
    comps = run.keep(connected_components(edges, cfg, run.work, run.scratch), now=True)
    ranking = documents.select(C.NID, C.DOC_ID, C.IS_EMPTY, C.EXACT_HASH, TEXT_LEN, *keeper_columns(plan.keeper),
                               FROM_BATCH, _WAS_KEEPER)
    stars = keeper_stars(edges, ranking, plan, run, first=first, components=comps)
    grouped = (
        documents.join(comps.select(F.col(C.DOC_ID).alias(C.NID), F.col(C.CLUSTER_ID).alias(_COMP)), C.NID, "left")
        .join(stars.select(F.col(C.DOC_ID).alias(C.NID), F.col(C.CLUSTER_ID).alias(_STAR)), C.NID, "left")
        .withColumn(_COMP, F.coalesce(_COMP, C.NID))
        .withColumn(_STAR, F.coalesce(_STAR, C.NID))
    )
    grouped = grouped.withColumn(C.COMPONENT_ID, named(Window.partitionBy(_COMP), _OLD_COMPONENT))
    # The star's keeper again: the same keys order it, and the round's keeper ranked first in
    # a component that holds the whole star.
    decided = ranked(grouped, plan.keeper, _STAR, lambda w: named(w, _OLD_CLUSTER), first,
                     keep=[C.COMPONENT_ID, FROM_BATCH])
    return decided.select(*ROWS, FROM_BATCH)


def changed_rows(decided: DataFrame, before: DataFrame) -> DataFrame:
    """The rows of decided (`ROWS`) that differ from before (`ROWS`: the current assignments),
    with _moved: whether more than the component id changed."""
    was = before.select(C.DOC_ID, *[F.col(c).alias(f"_was_{c}") for c in ROWS[1:]])

    def same(cols) -> Column:
        out = F.lit(True)
        for c in cols:
            out = out & F.col(f"_was_{c}").eqNullSafe(F.col(c))
        return out

    kept = same(CLUSTER_COLUMNS[1:])
    return decided.join(was, C.DOC_ID, "left").where(~(kept & same([C.COMPONENT_ID]))).select(
        *ROWS, (~kept).alias(MOVED))


def assign(spark: SparkSession, plan: Plan, idx: ix.Index, table: DataFrame, edges: DataFrame, met: DataFrame,
           run: Runner) -> DataFrame:
    """A batch's new assignments under keeper linkage: table (the new documents' sketch table),
    edges (their verified pairs and exact copies; archived ends by negative _nid) and met
    (_adoc, _nid of the archived documents met) -> (`ROWS`, _archived, _moved): every new
    document, and each archived member of a touched component whose row changed."""
    with run.stage("components"):
        ends = edges.select(F.col(C.DOC_A).alias(C.NID)).unionByName(edges.select(F.col(C.DOC_B).alias(C.NID)))
        linked = met.join(ends.where(F.col(C.NID) < 0).distinct(), C.NID, "left_semi")
        current = run.keep(idx.assignments_of(spark, linked.select(F.col(C.ADOC).alias(C.DOC_ID))))
        clusters, components = current.agg(F.countDistinct(C.CLUSTER_ID), F.countDistinct(C.COMPONENT_ID)).first()
        run.counts["archived_clusters_touched"], run.counts["archived_components_touched"] = clusters, components
        touched = current.select(C.COMPONENT_ID).distinct()
        members, n_members = run.counted(idx.members_of(spark, F.broadcast(touched), by=C.COMPONENT_ID))
        docs = idx.docs(spark)  # live documents: a replaced one's old row is not a member any more
        arch = docs.join(F.broadcast(members) if n_members <= ix.BROADCAST_ROWS else members, C.DOC_ID)
        arch, _ = run.counted(arch.withColumn(C.NID, -1 - F.monotonically_increasing_id()),
                              "archived_documents_reclustered")
        # The batch's edges with the archived ends renumbered, and the stored pairs among the members.
        renumber = met.join(arch.select(F.col(C.DOC_ID).alias(C.ADOC), F.col(C.NID).alias(_NEW)), C.ADOC).select(
            C.NID, _NEW)
        batch_edges = _renumbered(_renumbered(edges.select(C.DOC_A, C.DOC_B), renumber, C.DOC_A), renumber, C.DOC_B)
        among = _stored_edges(spark, idx, arch.select(C.NID, C.DOC_ID), n_members)
        graph = batch_edges.unionByName(among)
        id_type = dict(table.dtypes)[C.DOC_ID]
        documents = view(table, plan, True, id_type).unionByName(view(arch, plan, False))
        decided = run.keep(restar(plan, documents, graph, run), now=True)
    with run.stage("keepers"):
        batch = decided.where(F.col(FROM_BATCH)).select(*ROWS, F.lit(False).alias("_archived"), F.lit(True).alias(MOVED))
        changed = changed_rows(decided.where(~F.col(FROM_BATCH)).select(*ROWS), members.select(*ROWS))
        return batch.unionByName(changed.withColumn("_archived", F.lit(True)))


def _renumbered(pairs: DataFrame, renumber: DataFrame, end: str) -> DataFrame:
    """pairs with the `end` ids found in renumber(_nid, _new_nid) replaced."""
    joined = pairs.join(F.broadcast(renumber.withColumnRenamed(C.NID, end)), end, "left")
    return joined.select(*[F.coalesce(_NEW, end).alias(end) if c == end else c for c in pairs.columns])


def _stored_edges(spark: SparkSession, idx: ix.Index, ids: DataFrame, rows: int) -> DataFrame:
    """The stored pairs with both ends among ids(_nid, doc_id), by internal id."""
    stored = idx.pairs(spark)
    if stored is None:  # pragma: no cover - every part of this format stores its pairs
        raise ix.IndexError_("this index stores no pairs to re-cluster from; rebuild it")
    small = rows <= ix.BROADCAST_ROWS
    a = ids.select(F.col(C.DOC_ID).alias(C.DOC_A), F.col(C.NID).alias("_na"))
    b = ids.select(F.col(C.DOC_ID).alias(C.DOC_B), F.col(C.NID).alias("_nb"))
    a, b = (F.broadcast(a), F.broadcast(b)) if small else (a, b)
    joined = stored.select(C.DOC_A, C.DOC_B).join(a, C.DOC_A).join(b, C.DOC_B)
    return joined.select(F.col("_na").alias(C.DOC_A), F.col("_nb").alias(C.DOC_B))


__all__ = ["assign", "changed_rows", "named", "restar", "view"]
