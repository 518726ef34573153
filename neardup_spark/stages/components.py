"""Stage 7, components: verified pairs -> (doc_id, cluster_id) per connected component.

cluster_id is the smallest doc_id in the component, whichever backend runs,
so clusters are the same on every run and every partitioning.

* `dataframe` (default): alternating large-star / small-star (Kiveris et al.,
  "Connected Components in MapReduce and Beyond", SoCC 2014) in plain
  DataFrame operations; it converges in O(log^2 n) rounds, each round's
  result is checkpointed so the lineage stays short. Needs only pyspark and
  works on Spark Connect 4.x.
* `graphframes`: GraphFrames' connectedComponents, imported lazily; needs the
  graphframes Python package and its JVM jar, and a checkpoint directory.

Whatever the backend, a graph of at most `cluster.driver_max_edges` distinct
edges (default 2M: 32 MB of ids) is collected and solved on the driver by
`driver_components` (vectorised hooking and pointer jumping in numpy): an
iterative Spark job spends seconds in scheduling alone, while the graphs of a
nightly batch or a 1M-document archive are small. The labels are the same
(the smallest id of each component).
"""

from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from neardup_spark import columns as C
from neardup_spark.config import Config
from neardup_spark.errors import BackendError, ConvergenceError, one_line
from neardup_spark.kernels.graph import driver_components
from neardup_spark.runtime.runner import KEEP, materialise, unkeep
from neardup_spark.runtime.scratch import Scratch

SRC, DST = "src", "dst"


def connected_components(edges: DataFrame, cfg: Config, stats: dict | None = None,
                         scratch: Scratch | None = None) -> DataFrame:
    """edges(doc_a, doc_b) -> (doc_id, cluster_id) for every document in an edge.

    `scratch` (the run's, with cluster.scratch): where the rounds are kept instead of
    cached; their tables are dropped as the rounds go, the rest with the run's.

    `stats`, if given, receives "components_on_driver" (1 or 0: which path ran),
    "components_edges" (distinct edges, when the driver path is enabled) and
    "components_rounds" (0 on the driver; the dataframe backend's rounds)."""
    pairs = edges.select(F.col(C.DOC_A).alias(SRC), F.col(C.DOC_B).alias(DST)).where(F.col(SRC) != F.col(DST))
    # Start from a checkpoint: the pairs' plan carries the whole pipeline, and an
    # iterative algorithm that re-plans it every round builds plan strings large
    # enough to exhaust the driver heap (seen with GraphFrames).
    pairs = _materialise(pairs.distinct(), cfg.cluster.checkpoint, True, scratch)
    stats = stats if stats is not None else {}
    on_driver = False
    if cfg.cluster.driver_max_edges:
        stats["components_edges"] = pairs.count()  # also computes the checkpoint the backend reads
        on_driver = solved_on_driver(cfg, stats["components_edges"])
    # The report says which path ran: at most `limit` edges are collected, never more.
    stats["components_on_driver"] = int(on_driver)
    if on_driver:
        stats["components_rounds"] = 0
        return _on_driver(pairs)
    if cfg.cluster.backend == "graphframes":
        return _graphframes(pairs, cfg)
    return _star_contraction(pairs, cfg, stats, scratch)


def solved_on_driver(cfg: Config, edges: int | None) -> bool:
    """Whether a graph of (at most) `edges` edges is collected and solved on the driver:
    cluster.driver_max_edges says up to how many (0: never)."""
    limit = cfg.cluster.driver_max_edges
    return bool(limit) and edges is not None and edges <= limit


GROUP_NODE = "_gnode"  # a group's node in the graph (negative: below every other id)
COMP = "_comp"  # a component's name: the same for all of its nodes, and meaningless otherwise


def grouped_components(edges: DataFrame, grouped: DataFrame, group: str, cfg: Config, stats: dict,
                       edges_at_most: int, scratch: Scratch | None = None) -> tuple[DataFrame, DataFrame]:
    """Connected components of a graph in which the nodes of a group count as one node.

    edges(doc_a, doc_b) over node ids, the ungrouped ones >= 0; grouped(_nid, `group`) names
    the group of each grouped node. The nightly append's graph is one: its batch documents,
    and the archived documents they met, each standing for its archived cluster (a group).
    Returns (nodes(_nid, _comp) of the ungrouped nodes in an edge, groups(`group`, _comp) of
    the groups an edge reaches). Solved on the driver when `edges_at_most` (a bound on the
    edges) allows it (`solved_on_driver`), else by `connected_components`; stats gets
    "groups" (the groups of grouped) and what `connected_components` says of its path."""
    if solved_on_driver(cfg, edges_at_most):
        return _grouped_on_driver(edges, grouped, group, stats)
    names = grouped.select(group).distinct()
    # Group nodes numbered by the groups' order: the same ids however often the plan runs.
    names = names.withColumn(GROUP_NODE, -F.dense_rank().over(Window.orderBy(group)).cast("long"))
    stats["groups"] = names.count()
    node_of = grouped.join(names, group).select(C.NID, GROUP_NODE)
    a = edges.join(node_of.withColumnRenamed(C.NID, C.DOC_A), C.DOC_A, "left")
    a = a.select(F.coalesce(GROUP_NODE, C.DOC_A).alias(C.DOC_A), C.DOC_B)
    b = a.join(node_of.withColumnRenamed(C.NID, C.DOC_B), C.DOC_B, "left")
    graph = b.select(C.DOC_A, F.coalesce(GROUP_NODE, C.DOC_B).alias(C.DOC_B))
    comps = connected_components(graph, cfg, stats, scratch)
    labels = comps.select(F.col(C.DOC_ID).alias(GROUP_NODE), F.col(C.CLUSTER_ID).alias(COMP))
    groups = names.join(labels, GROUP_NODE).select(group, COMP)
    nodes = comps.where(F.col(C.DOC_ID) >= 0).select(F.col(C.DOC_ID).alias(C.NID), F.col(C.CLUSTER_ID).alias(COMP))
    return nodes, groups


def _grouped_on_driver(edges: DataFrame, grouped: DataFrame, group: str, stats: dict) -> tuple[DataFrame, DataFrame]:
    """`grouped_components` in numpy: the edges and the grouped nodes collected (two jobs
    instead of the ~30 small ones of the distributed path), each grouped node relabelled to
    its group's node, and the graph solved by `driver_components`."""
    spark = edges.sparkSession
    members = grouped.select(C.NID, group).toPandas()
    pairs = edges.select(C.DOC_A, C.DOC_B).toPandas()
    names, group_of_member = np.unique(members[group].to_numpy(), return_inverse=True)
    stats["groups"] = int(names.size)
    src, dst = pairs[C.DOC_A].to_numpy(np.int64), pairs[C.DOC_B].to_numpy(np.int64)
    member_nids = members[C.NID].to_numpy(np.int64)
    # Group nodes below every id in the graph: no collision with another node.
    base = min(0, int(src.min(initial=0)), int(dst.min(initial=0)), int(member_nids.min(initial=0))) - 1
    group_node = base - np.arange(names.size, dtype=np.int64)
    node_of_member = group_node[group_of_member]
    a, b = _relabel(src, member_nids, node_of_member), _relabel(dst, member_nids, node_of_member)
    keep = a != b
    nodes, labels = driver_components(a[keep], b[keep])
    stats["components_rounds"], stats["components_on_driver"] = 0, 1
    ungrouped = nodes >= 0
    reached = np.isin(group_node, nodes)  # groups an edge reaches
    at = np.searchsorted(nodes, group_node[reached])
    kind = grouped.schema[group].dataType
    nodes_df = spark.createDataFrame(
        pd.DataFrame({C.NID: nodes[ungrouped], COMP: labels[ungrouped]}),
        StructType([StructField(C.NID, LongType(), False), StructField(COMP, LongType(), False)]))
    groups_df = spark.createDataFrame(
        pd.DataFrame({group: names[reached], COMP: labels[at]}),
        StructType([StructField(group, kind, False), StructField(COMP, LongType(), False)]))
    return nodes_df, groups_df


def _relabel(ids: np.ndarray, keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """ids, each one found in keys replaced by the value at the same position."""
    if keys.size == 0:
        return ids
    order = np.argsort(keys)
    keys, values = keys[order], values[order]
    at = np.minimum(np.searchsorted(keys, ids), keys.size - 1)
    return np.where(keys[at] == ids, values[at], ids)


def _on_driver(pairs: DataFrame) -> DataFrame:
    """`driver_components` of a small edge frame, back as a (doc_id, cluster_id) frame."""
    edges = pairs.toPandas()
    nodes, labels = driver_components(edges[SRC].to_numpy(), edges[DST].to_numpy())
    kind = pairs.schema[SRC].dataType
    schema = StructType([StructField(C.DOC_ID, kind, False), StructField(C.CLUSTER_ID, kind, False)])
    frame = pd.DataFrame({C.DOC_ID: nodes, C.CLUSTER_ID: labels})
    return pairs.sparkSession.createDataFrame(frame, schema)


def _both_ways(edges: DataFrame) -> DataFrame:
    """Every edge in both directions.

    An explode, not a union of two projections of the same frame: Spark 4.x's
    union constraint rewriting fails on that shape over a checkpointed frame
    ("key not found: src#..." while optimising).
    """
    flipped = F.array(
        F.struct(F.col(SRC).alias(SRC), F.col(DST).alias(DST)),
        F.struct(F.col(DST).alias(SRC), F.col(SRC).alias(DST)),
    )
    return edges.select(F.explode(flipped).alias("e")).select("e.*")


def _large_star(edges: DataFrame) -> DataFrame:
    """Each node links its larger neighbours to the smallest of its closed neighbourhood."""
    both = _both_ways(edges)
    low = F.least(F.min(DST).over(Window.partitionBy(SRC)), F.col(SRC))
    # The minimum is over the whole neighbourhood, so filter only after it.
    ranked = both.select(SRC, DST, low.alias("m"))
    return ranked.where(F.col(DST) > F.col(SRC)).select(F.col(DST).alias(SRC), F.col("m").alias(DST))


def _small_star(edges: DataFrame) -> DataFrame:
    """Each node links itself and its smaller neighbours to the smallest of them."""
    down = edges.select(F.greatest(SRC, DST).alias(SRC), F.least(SRC, DST).alias(DST))
    low = F.min(DST).over(Window.partitionBy(SRC))
    moved = down.select(F.col(SRC).alias("hi"), F.col(DST).alias("lo"), low.alias("m"))
    to_min = F.array(
        F.struct(F.col("lo").alias(SRC), F.col("m").alias(DST)),
        F.struct(F.col("hi").alias(SRC), F.col("m").alias(DST)),
    )
    out = moved.select(F.explode(to_min).alias("e")).select("e.*")
    return out.where(F.col(SRC) != F.col(DST)).distinct()


def _is_star_forest(edges: DataFrame) -> bool:
    """True when every edge is child -> root: no root is a child, no child has two parents.

    Edges here always point from a larger to a smaller id (parent < child).
    """
    # An explode, not a union (see _both_ways).
    no_parent = F.lit(None).cast(edges.schema[DST].dataType)
    roles = edges.select(
        F.explode(
            F.array(
                F.struct(F.col(SRC).alias("node"), F.col(DST).alias("parent")),
                F.struct(F.col(DST).alias("node"), no_parent.alias("parent")),
            )
        ).alias("r")
    ).select("r.node", "r.parent")
    bad = (
        roles.groupBy("node")
        .agg(
            F.min("parent").alias("lo"),
            F.max("parent").alias("hi"),
            F.max(F.col("parent").isNull()).alias("is_parent"),
        )
        .where((F.col("lo") != F.col("hi")) | (F.col("lo").isNotNull() & F.col("is_parent")))
    )
    return bad.limit(1).count() == 0


def _materialise(df: DataFrame, mode: str, checkpoint_now: bool, scratch: Scratch | None) -> DataFrame:
    """Keep this round's edges; every few rounds also cut the lineage (cluster.checkpoint)."""
    return materialise(df, mode if checkpoint_now else KEEP, scratch)


def _star_contraction(edges: DataFrame, cfg: Config, stats: dict, scratch: Scratch | None) -> DataFrame:
    for round_no in range(1, cfg.cluster.max_iterations + 1):
        nxt = _small_star(_large_star(edges))
        nxt = _materialise(nxt, cfg.cluster.checkpoint, round_no % cfg.cluster.checkpoint_interval == 0, scratch)
        done = _is_star_forest(nxt)  # the action that computes (and caches) this round
        unkeep(edges, KEEP, scratch)
        edges = nxt
        stats["components_rounds"] = round_no
        if done:
            break
    else:
        raise ConvergenceError(
            f"connected components did not converge in cluster.max_iterations={cfg.cluster.max_iterations} rounds"
        )
    # child -> root for every child, root -> root for every root.
    labels = F.array(
        F.struct(F.col(SRC).alias(C.DOC_ID), F.col(DST).alias(C.CLUSTER_ID)),
        F.struct(F.col(DST).alias(C.DOC_ID), F.col(DST).alias(C.CLUSTER_ID)),
    )
    return edges.select(F.explode(labels).alias("l")).select("l.*").distinct()


def check_backend(spark, cfg: Config) -> None:
    """Before any work: the backend asked for can run here. GraphFrames needs its Python
    package and its JVM classes (a classic session: Spark Connect has no JVM at hand); a
    run that asked for it never falls back silently."""
    if cfg.cluster.backend != "graphframes":
        return
    try:
        import graphframes  # noqa: F401
    except ImportError:
        raise BackendError(_GRAPHFRAMES_NEEDS) from None
    try:
        jvm = spark.sparkContext._jvm
    except Exception:  # Spark Connect
        raise BackendError("cluster.backend = 'graphframes' needs a classic Spark session (its JVM classes); "
                           "under Spark Connect use cluster.backend = 'dataframe'") from None
    from py4j.java_gateway import JavaClass

    if not isinstance(jvm.org.graphframes.GraphFrame, JavaClass):
        raise BackendError(_GRAPHFRAMES_NEEDS)


_GRAPHFRAMES_NEEDS = (
    "cluster.backend = 'graphframes' needs the graphframes Python package and its JVM jar "
    "(e.g. --jars graphframes-0.8.2-spark3.1-s_2.12.jar); use cluster.backend = 'dataframe' otherwise"
)


def _graphframes(pairs: DataFrame, cfg: Config) -> DataFrame:
    try:
        from graphframes import GraphFrame
    except ImportError:
        raise BackendError(_GRAPHFRAMES_NEEDS) from None
    vertices = pairs.select(F.col(SRC).alias("id")).union(pairs.select(F.col(DST).alias("id"))).distinct()
    try:
        graph = GraphFrame(vertices, pairs)
        run = graph.connectedComponents
        wanted = {
            "algorithm": "graphframes",
            "checkpointInterval": cfg.cluster.checkpoint_interval,
            "broadcastThreshold": 1_000_000,
            # graphframes-py's own default is `2 ^ 31 - 2`, which is 31 in Python.
            "max_iter": cfg.cluster.max_iterations,
        }
        accepted = inspect.signature(run).parameters
        comps = run(**{k: v for k, v in wanted.items() if k in accepted})
    except BackendError:
        raise
    except Exception as exc:  # a missing jar surfaces as TypeError or a Py4J error
        raise BackendError(f"GraphFrames could not run here ({one_line(exc, 200)}); is its JVM jar on the classpath?") from None
    smallest = comps.groupBy("component").agg(F.min("id").alias(C.CLUSTER_ID))
    return comps.join(smallest, "component").select(F.col("id").alias(C.DOC_ID), C.CLUSTER_ID)
