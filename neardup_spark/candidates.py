"""Stage 5, candidates: (_nid, bucket) rows -> distinct pairs (doc_a < doc_b, internal ids).

A bucket of n documents yields all n(n-1)/2 pairs while n is at most
`lsh.all_pairs_bucket_limit`, and a star of n-1 pairs to its smallest id
beyond that. One story copied 5,000 times, or boilerplate shared by a whole
site, therefore costs O(n) candidates per band instead of O(n^2); the star
still links every member, and connected components do the rest. Pairs are
deduplicated across bands.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from . import columns as C
from .config import Config

_MEMBERS = "members"


def _pairs_expr(limit: int) -> str:
    # members is sorted, so every emitted pair has a < b.
    all_pairs = (
        f"flatten(transform(sequence(0, size({_MEMBERS}) - 2), i -> "
        f"transform(slice({_MEMBERS}, i + 2, size({_MEMBERS}) - i - 1), "
        f"y -> named_struct('a', {_MEMBERS}[i], 'b', y))))"
    )
    star = (
        f"transform(slice({_MEMBERS}, 2, size({_MEMBERS}) - 1), "
        f"y -> named_struct('a', {_MEMBERS}[0], 'b', y))"
    )
    return f"CASE WHEN size({_MEMBERS}) <= {limit} THEN {all_pairs} ELSE {star} END"


def candidate_pairs(banded: DataFrame, cfg: Config) -> DataFrame:
    """banded(_nid, bucket) -> (doc_a, doc_b) of _nid values, distinct, doc_a < doc_b."""
    buckets = (
        banded.groupBy(C.BUCKET)
        .agg(F.array_sort(F.collect_list(C.NID)).alias(_MEMBERS))
        .where(F.size(_MEMBERS) > 1)
    )
    pairs = buckets.select(F.explode(F.expr(_pairs_expr(cfg.lsh.all_pairs_bucket_limit))).alias("p"))
    return pairs.select(F.col("p.a").alias(C.DOC_A), F.col("p.b").alias(C.DOC_B)).distinct()
