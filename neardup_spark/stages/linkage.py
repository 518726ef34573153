"""Stage 7b, keeper linkage (the default, `[cluster] linkage = "keeper"`): clusters that do not chain.

Connected components link A~B~C even when A and C are not duplicates: a story
and its follow-ups, or licence texts that differ by a clause each, end in one
cluster, and the keeper stands in for texts it does not resemble. With keeper
linkage every removed document is a verified pair with its own keeper (the run's
test: Jaccard, containment or SimHash, at the configured threshold) or an exact
copy of one that is.

Within each connected component of verified pairs, texts (a document and its
exact copies) are taken in keeper order, the order the keeper rules rank them
(`keepers.rank_key`): a text that no earlier keeper took becomes a keeper, and
takes every later text it has a verified pair with. That is a greedy star cover,
exact in its acceptance: a text is left out of a star only when it has no
verified pair with that star's keeper, and then it joins the first later star
whose keeper it matches, or keeps its own. Two members of one star match the
keeper, not necessarily each other.

One pass, no rounds of Spark jobs: each document's rank within its component
(one window), then the greedy of `kernels.graph.greedy_stars` over whole
components, on the driver when the components stage solved the graph there
(`cluster.driver_max_edges`), else in an Arrow function over groups of whole
components. The output is deterministic (components, ranks and the greedy are),
and the keeper of a star is the keeper the final ranking over it picks: it ranks
first among the star's members.
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from neardup_spark import columns as C
from neardup_spark.kernels.graph import greedy_stars
from neardup_spark.plan import Plan
from neardup_spark.runtime.routing import shuffle_partitions
from neardup_spark.runtime.runner import Runner
from neardup_spark.stages.components import connected_components
from neardup_spark.stages.keepers import rank_key

_COMP = "_component"
_POS = "_pos"
_TEXT_POS = "_text_pos"
_BUCKET = "_bucket"
_SPLIT = "_split"
_STARS = StructType([StructField(C.DOC_ID, LongType(), False), StructField(C.CLUSTER_ID, LongType(), False),
                     StructField(_SPLIT, LongType(), False)])


def keeper_stars(edges: DataFrame, index: DataFrame, plan: Plan, run: Runner, first: Sequence[Column] = (),
                 components: DataFrame | None = None) -> DataFrame:
    """edges(doc_a, doc_b) of internal ids + index(_nid, doc_id, exact_hash, text_len, keeper
    columns) -> (doc_id, cluster_id) of every document in an edge, like `connected_components`
    (internal ids; cluster_id is the star's keeper), each cluster a star around its keeper.

    `first`: sort keys over index's columns ahead of the keeper rules (a nightly batch's
    sticky keepers; the final ranking over each star must use them too). `components`:
    the connected components of edges (doc_id, cluster_id), when the caller has them.
    run.work gets "linkage_on_driver" (1 or 0) and "linkage_reclustered" (documents not in
    the star of their component's first keeper)."""
    cfg = plan.cfg
    if components is None:
        components = connected_components(edges, cfg, run.work, run.scratch)
    limit = cfg.cluster.driver_max_edges
    n_edges = run.work.get("components_edges")
    on_driver = bool(limit) and n_edges is not None and n_edges <= limit
    members = ranks(index, components, plan, first)
    run.work["linkage_on_driver"] = int(on_driver)
    pairs = edges.select(C.DOC_A, C.DOC_B)
    if on_driver:  # the graph is small (the components stage collected it too)
        out = _stars(members.toPandas(), pairs.toPandas())
        run.work["linkage_reclustered"] = int(out[_SPLIT].sum())
        return members.sparkSession.createDataFrame(out.drop(columns=[_SPLIT]), _STARS[:2])
    stars = run.keep(_in_groups(members, pairs), cut=True)
    row = stars.agg(F.sum(_SPLIT).alias("split")).first()
    run.work["linkage_reclustered"] = int(row["split"] or 0)
    return stars.select(C.DOC_ID, C.CLUSTER_ID)


def ranks(index: DataFrame, components: DataFrame, plan: Plan, first: Sequence[Column] = ()) -> DataFrame:
    """Each component member's (_nid, _component, _pos, _text_pos): its place in keeper order
    within its component (1 keeps first; `keepers.ranked`'s order), and the best place of its
    exact copies there."""
    rank = rank_key(plan.keeper, first)
    comps = components.select(F.col(C.DOC_ID).alias(C.NID), F.col(C.CLUSTER_ID).alias(_COMP))
    placed = index.join(comps, C.NID).select(C.NID, _COMP, C.EXACT_HASH,
                                              F.row_number().over(Window.partitionBy(_COMP).orderBy(rank)).alias(_POS))
    # Partitioned by the component already: this window needs no shuffle of its own.
    text = Window.partitionBy(_COMP, C.EXACT_HASH)
    return placed.select(C.NID, _COMP, F.col(_POS).cast("long").alias(_POS),
                         F.min(_POS).over(text).cast("long").alias(_TEXT_POS))


def _stars(members: pd.DataFrame, edges: pd.DataFrame) -> pd.DataFrame:
    """members (`ranks` rows of whole components) + their edges -> (doc_id, cluster_id, _split)."""
    nid = members[C.NID].to_numpy("int64")
    comp = members[_COMP].to_numpy("int64")
    keeper = greedy_stars(comp, members[_POS].to_numpy("int64"), members[_TEXT_POS].to_numpy("int64"), nid,
                          edges[C.DOC_A].to_numpy("int64"), edges[C.DOC_B].to_numpy("int64"))
    heads = pd.Series(keeper[members[_POS].to_numpy() == 1], index=comp[members[_POS].to_numpy() == 1])
    split = keeper != heads.reindex(comp).to_numpy()
    return pd.DataFrame({C.DOC_ID: nid, C.CLUSTER_ID: keeper, _SPLIT: split.astype("int64")})


def _in_groups(members: DataFrame, edges: DataFrame) -> DataFrame:
    """The greedy in an Arrow function per group of whole components (a component's members
    and edges meet in one group, hashed by the component)."""
    spark = members.sparkSession
    parts = shuffle_partitions(spark)
    grouped = members.withColumn(_BUCKET, F.pmod(F.xxhash64(_COMP), F.lit(parts)))
    # Each side's bucket its own expression: one derived from the other side trips Spark's
    # ambiguous self-join check in the cogroup.
    ends = members.select(F.col(C.NID).alias(C.DOC_A), _COMP)
    placed = edges.join(ends, C.DOC_A).select(C.DOC_A, C.DOC_B, F.pmod(F.xxhash64(_COMP), F.lit(parts)).alias(_BUCKET))
    return grouped.groupBy(_BUCKET).cogroup(placed.groupBy(_BUCKET)).applyInPandas(
        lambda m, e: _stars(m, e), _STARS)
