"""Stage 7b, keeper linkage: clusters that do not chain (`[cluster] linkage = "keeper"`).

Connected components link A~B~C even when A and C are not duplicates: a story
and its follow-ups, or licence texts that differ by a clause each, end in one
cluster. With keeper linkage every duplicate must itself match its cluster's
keeper (the same test as verification: Jaccard, containment or SimHash, at the
configured threshold). Round by round:

1. connected components of the verified pairs among the documents still open;
2. each component's keeper, by the keeper rules (`keepers.ranked`);
3. each other member against its keeper (`verify.verify`; an exact copy of the
   keeper passes): those that match are closed, a star around their keeper;
4. the members that did not are open for the next round, with the verified
   pairs among themselves only.

Every round closes at least each component's keeper, so it ends; the output is
deterministic (components, ranking and verification are), and nothing is
collected to the driver but one count a round. The keeper of a star is the keeper
its round chose: the final ranking over the star picks the same document.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from neardup_spark import columns as C
from neardup_spark.errors import ConvergenceError
from neardup_spark.plan import Plan
from neardup_spark.runtime.runner import Runner
from neardup_spark.stages.components import connected_components
from neardup_spark.stages.keepers import ranked
from neardup_spark.stages.verify import verify

_COMP = "_component"
_KEEPER_NID = "_keeper_nid"


def keeper_stars(edges: DataFrame, index: DataFrame, plan: Plan, sets: DataFrame, run: Runner,
                 set_bytes: float | None = None) -> DataFrame:
    """edges(doc_a, doc_b) of internal ids + index(_nid, doc_id, is_empty, exact_hash, text_len,
    keeper columns) + sets(_nid, shingles[, simhash]) -> (doc_id, cluster_id): like
    `connected_components` (internal ids, every document in an edge), but each cluster is a
    star of documents that all match its keeper. run.work gets "linkage_rounds" and
    "linkage_reclustered" (members moved out of their component's star: round 1's failing
    members, since a later round's open members are exactly the last round's failing ones)."""
    cfg = plan.cfg
    open_edges = edges.select(C.DOC_A, C.DOC_B)
    stars: list[DataFrame] = []
    moved = 0
    for round_ in range(1, cfg.cluster.max_iterations + 1):
        comps = connected_components(open_edges, cfg)
        members = index.join(comps.select(F.col(C.DOC_ID).alias(C.NID), F.col(C.CLUSTER_ID).alias(_COMP)), C.NID)
        chosen = run.keep(ranked(members, plan.keeper, _COMP, keep=[C.NID]), cut=True)
        keepers = chosen.where(F.col(C.IS_KEEPER)).select(
            F.col(C.DOC_ID).alias(C.KEEPER_ID), F.col(C.NID).alias(_KEEPER_NID))
        placed = chosen.join(keepers, C.KEEPER_ID).select(C.NID, _KEEPER_NID, C.IS_KEEPER, C.STATUS)
        to_test = placed.where(~F.col(C.IS_KEEPER) & (F.col(C.STATUS) != F.lit(C.EXACT_DUPLICATE))).select(
            F.least(C.NID, _KEEPER_NID).alias(C.DOC_A), F.greatest(C.NID, _KEEPER_NID).alias(C.DOC_B))
        to_test, n_tests = run.counted(to_test, cut=True)
        matched = verify(to_test, cfg, sets, n_tests, set_bytes).select(C.DOC_A, C.DOC_B)
        passed = matched.select(F.col(C.DOC_A).alias(C.NID)).unionByName(matched.select(F.col(C.DOC_B).alias(C.NID)))
        failing = to_test.select(F.col(C.DOC_A).alias(C.NID)).unionByName(to_test.select(F.col(C.DOC_B).alias(C.NID)))
        failing = failing.join(keepers.select(F.col(_KEEPER_NID).alias(C.NID)), C.NID, "left_anti").join(
            passed, C.NID, "left_anti").distinct()
        # Each round's frames are built from the last round's: a local checkpoint cuts the
        # lineage, or the plans would nest every earlier round (several times over).
        failing, n_failing = run.counted(failing, cut=True)
        stars.append(run.keep(placed.join(failing, C.NID, "left_anti").select(
            F.col(C.NID).alias(C.DOC_ID), F.col(_KEEPER_NID).alias(C.CLUSTER_ID)), cut=True))
        if round_ == 1:
            moved = n_failing
        if n_failing == 0:
            run.work["linkage_rounds"] = round_
            run.work["linkage_reclustered"] = moved
            out = stars[0]
            for star in stars[1:]:
                out = out.unionByName(star)
            return out
        ends = failing.select(F.col(C.NID).alias(C.DOC_A))
        open_edges = run.keep(open_edges.join(ends, C.DOC_A).join(
            failing.select(F.col(C.NID).alias(C.DOC_B)), C.DOC_B).select(C.DOC_A, C.DOC_B), cut=True)
    raise ConvergenceError(f"keeper linkage did not settle in cluster.max_iterations={cfg.cluster.max_iterations} "
                           "rounds: raise it (each round settles at least one star per chain)")
