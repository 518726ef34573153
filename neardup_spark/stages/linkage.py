"""Stage 7b, keeper linkage: clusters that do not chain (`[cluster] linkage = "keeper"`).

Connected components link A~B~C even when A and C are not duplicates: a story
and its follow-ups, or licence texts that differ by a clause each, end in one
cluster. With keeper linkage every duplicate must itself match its cluster's
keeper (the same test as verification: Jaccard, containment or SimHash, at the
configured threshold), and every two members must match each other: a star
whose leaves were unrelated would still chain through its keeper. Round by
round:

1. connected components of the verified pairs among the documents still open;
2. each component's keeper, by the keeper rules (`keepers.ranked`);
3. each other member against its keeper (`verify.verify`; an exact copy of the
   keeper passes);
4. among the members that match, each text (a member and its exact copies)
   stays only if it matches every other text of the star that ranks before it
   (`unmatched_texts`), so any two texts that stay match;
5. the members that stay are closed, a star around their keeper; the rest are
   open for the next round, with the verified pairs among themselves only.

Step 4 checks pairs by the test itself, not by what LSH happened to propose, and
skips the pairs the keeper test already vouches for: Jaccard distance is a
metric, so two members with Jaccard a and c to their keeper have at least
a + c - 1 with each other, and a + c >= 1 + threshold settles the pair. Light
copies of one story (all close to its keeper) cost no check; members near the
threshold are checked against each other, which is quadratic in their number.
Containment and SimHash tests have no such bound here: every pair is checked.

Every round closes at least each component's keeper, so it ends; the output is
deterministic (components, ranking and verification are), and nothing is
collected to the driver but one count a round. The keeper of a star is the keeper
its round chose: the final ranking over the star picks the same document.
"""

from __future__ import annotations

from typing import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from neardup_spark import columns as C
from neardup_spark.config import Config
from neardup_spark.errors import ConvergenceError
from neardup_spark.plan import Plan
from neardup_spark.runtime.runner import Runner
from neardup_spark.stages.components import connected_components
from neardup_spark.stages.keepers import ranked
from neardup_spark.stages.verify import verify

_COMP = "_component"
_KEEPER_NID = "_keeper_nid"
_MEMBER = "_member"
_RANK = "_rank"


def metric_bound(cfg: Config) -> bool:
    """Whether the test is Jaccard at verify.threshold alone, whose distance is a metric
    (SimHash adds a Hamming test that the Jaccard bound does not settle)."""
    return cfg.match.mode == "jaccard" and cfg.match.method == "minhash"


def unmatched_texts(passing: DataFrame, cfg: Config, sets: DataFrame, run: Runner,
                    set_bytes: float | None = None) -> DataFrame:
    """passing(_nid, _keeper_nid, exact_hash, _rank, jaccard) of the members that matched
    their keeper (the keeper and its copies included, jaccard 1) -> (_nid) of those whose text
    does not match some other text of its star that ranks before it (the keeper's text aside)."""
    first = F.min(F.struct(_RANK, C.NID, C.JACCARD))
    texts = passing.groupBy(_KEEPER_NID, C.EXACT_HASH).agg(first.alias("_t")).select(
        _KEEPER_NID, C.EXACT_HASH, F.col(f"_t.{_RANK}").alias(_RANK), F.col(f"_t.{C.NID}").alias(C.NID),
        F.col(f"_t.{C.JACCARD}").alias(C.JACCARD))
    star = Window.partitionBy(_KEEPER_NID).orderBy(_RANK)
    texts = texts.withColumn("_pos", F.row_number().over(star)).where(F.col("_pos") > 1).drop("_pos")
    bound = metric_bound(cfg)
    edge = 1 + cfg.verify.threshold + 1e-9  # a hair above 1 + t: rounding never settles a pair the bound does not
    # A pair is settled by the bound when a + c >= 1 + t; one of a text with a < (1 + t) / 2
    # ("far") is not, so every pair to check has a far text: far x all, each pair once.
    far = texts.where(F.col(C.JACCARD) < F.lit(edge / 2)) if bound else texts
    f = far.select(_KEEPER_NID, *[F.col(c).alias(f"f{c}") for c in (C.EXACT_HASH, _RANK, C.NID, C.JACCARD)])
    o = texts.select(_KEEPER_NID, *[F.col(c).alias(f"o{c}") for c in (C.EXACT_HASH, _RANK, C.NID, C.JACCARD)])
    unsettled = F.col(f"f{C.JACCARD}") + F.col(f"o{C.JACCARD}") < F.lit(edge) if bound else F.lit(True)
    o_far = F.col(f"o{C.JACCARD}") < F.lit(edge / 2) if bound else F.lit(True)
    once = ~o_far | (F.col(f"f{_RANK}") < F.col(f"o{_RANK}"))
    later = F.when(F.col(f"f{_RANK}") > F.col(f"o{_RANK}"), F.col(f"f{C.EXACT_HASH}")).otherwise(
        F.col(f"o{C.EXACT_HASH}"))
    pairs = f.join(o, _KEEPER_NID).where((F.col(f"f{C.EXACT_HASH}") != F.col(f"o{C.EXACT_HASH}")) & unsettled & once)
    pairs = pairs.select(_KEEPER_NID, later.alias(C.EXACT_HASH),
                         F.least(f"f{C.NID}", f"o{C.NID}").alias(C.DOC_A),
                         F.greatest(f"f{C.NID}", f"o{C.NID}").alias(C.DOC_B))
    pairs, n_pairs = run.counted(pairs, cut=True)
    run.work["linkage_member_checks"] = run.work.get("linkage_member_checks", 0) + n_pairs
    if n_pairs == 0:
        return passing.select(C.NID).limit(0)
    matched = verify(pairs.select(C.DOC_A, C.DOC_B), cfg, sets, n_pairs, set_bytes).select(C.DOC_A, C.DOC_B)
    failed = pairs.join(matched, [C.DOC_A, C.DOC_B], "left_anti").select(_KEEPER_NID, C.EXACT_HASH).distinct()
    return passing.join(failed, [_KEEPER_NID, C.EXACT_HASH]).select(C.NID)


def keeper_stars(edges: DataFrame, index: DataFrame, plan: Plan, sets: DataFrame, run: Runner,
                 set_bytes: float | None = None, first: Sequence[Column] = (),
                 components: DataFrame | None = None) -> DataFrame:
    """edges(doc_a, doc_b) of internal ids + index(_nid, doc_id, is_empty, exact_hash, text_len,
    keeper columns) + sets(_nid, shingles[, simhash]) -> (doc_id, cluster_id): like
    `connected_components` (internal ids, every document in an edge), but each cluster is a
    star of documents that all match its keeper and each other. run.work gets
    "linkage_rounds", "linkage_reclustered" (members moved out of their component's star:
    round 1's failing members, since a later round's open members are exactly the last
    round's failing ones) and "linkage_member_checks" (pairs of members verified).

    `first`: sort keys over index's columns ahead of the keeper rules (a nightly batch's
    sticky keepers; the final ranking over each star must use them too). `components`:
    the connected components of edges (doc_id, cluster_id), when the caller has them."""
    cfg = plan.cfg
    open_edges = edges.select(C.DOC_A, C.DOC_B)
    stars: list[DataFrame] = []
    moved = 0
    run.work["linkage_member_checks"] = 0
    for round_ in range(1, cfg.cluster.max_iterations + 1):
        comps = components if round_ == 1 and components is not None else connected_components(open_edges, cfg)
        members = index.join(comps.select(F.col(C.DOC_ID).alias(C.NID), F.col(C.CLUSTER_ID).alias(_COMP)), C.NID)
        chosen = run.keep(ranked(members, plan.keeper, _COMP, first=first, keep=[C.NID, C.EXACT_HASH],
                                 rank_as=_RANK), cut=True)
        keepers = chosen.where(F.col(C.IS_KEEPER)).select(
            F.col(C.DOC_ID).alias(C.KEEPER_ID), F.col(C.NID).alias(_KEEPER_NID))
        placed = chosen.join(keepers, C.KEEPER_ID).select(C.NID, _KEEPER_NID, C.IS_KEEPER, C.STATUS,
                                                          C.EXACT_HASH, _RANK)
        to_test = placed.where(~F.col(C.IS_KEEPER) & (F.col(C.STATUS) != F.lit(C.EXACT_DUPLICATE))).select(
            F.col(C.NID).alias(_MEMBER), F.least(C.NID, _KEEPER_NID).alias(C.DOC_A),
            F.greatest(C.NID, _KEEPER_NID).alias(C.DOC_B))
        to_test, n_tests = run.counted(to_test, cut=True)
        matched = verify(to_test.select(C.DOC_A, C.DOC_B), cfg, sets, n_tests, set_bytes)
        scored = run.keep(to_test.join(matched.select(C.DOC_A, C.DOC_B, C.JACCARD), [C.DOC_A, C.DOC_B], "left")
                          .select(F.col(_MEMBER).alias(C.NID), C.JACCARD), cut=True)
        failing = scored.where(F.col(C.JACCARD).isNull()).select(C.NID)
        passing = placed.join(scored, C.NID, "left").where(
            F.col(C.IS_KEEPER) | (F.col(C.STATUS) == F.lit(C.EXACT_DUPLICATE)) | F.col(C.JACCARD).isNotNull()
        ).select(C.NID, _KEEPER_NID, C.EXACT_HASH, _RANK, F.coalesce(C.JACCARD, F.lit(1.0)).alias(C.JACCARD))
        failing = failing.unionByName(unmatched_texts(passing, cfg, sets, run, set_bytes))
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
