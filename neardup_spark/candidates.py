"""Stage 5, candidates: (_nid, bucket) rows -> distinct pairs (doc_a < doc_b, internal ids).

A bucket of n documents yields all n(n-1)/2 pairs while n is at most
`lsh.all_pairs_bucket_limit`, and a star of n-1 pairs to its smallest id
beyond that. One story copied 5,000 times, or boilerplate shared by a whole
site, therefore costs O(n) candidates per band instead of O(n^2); the star
still links every member, and connected components do the rest. Pairs are
deduplicated across bands.

Nearly every bucket holds one document. A window (count and smallest id
per bucket) drops those in one shuffle of 16-byte rows, without building a
member list per bucket (collect_list over 4.2M mostly-single buckets took
~1.7x as long here); only the few shared buckets are then paired up.
"""

from __future__ import annotations

from typing import Callable

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from . import columns as C
from .config import Config

_SIZE, _ROOT = "_size", "_root"


def shared_buckets(banded: DataFrame) -> DataFrame:
    """banded(_nid, bucket) -> the rows of buckets with 2+ members, with the bucket's size and smallest _nid."""
    per_bucket = Window.partitionBy(C.BUCKET)
    sized = banded.select(
        C.NID, C.BUCKET, F.count(F.lit(1)).over(per_bucket).alias(_SIZE), F.min(C.NID).over(per_bucket).alias(_ROOT)
    )
    return sized.where(F.col(_SIZE) > 1)


def bucket_limit(cfg: Config) -> int:
    """Bucket size up to which all pairs are emitted. SimHash block tables are exact only
    with every pair of a bucket checked (their buckets fill with unrelated fingerprints
    sharing a block, so a star to one member would miss pairs): no limit there; the
    table layout (bits per key) decides bucket sizes."""
    return 2**62 if cfg.match.method == "simhash" else cfg.lsh.all_pairs_bucket_limit


def candidate_pairs(banded: DataFrame, cfg: Config, keep: Callable[[DataFrame], DataFrame] = lambda df: df) -> DataFrame:
    """banded(_nid, bucket) -> (doc_a, doc_b) of _nid values, distinct, doc_a < doc_b.

    The shared-bucket rows are read twice (stars and small buckets); `keep`
    (the pipeline's persist-and-track) keeps the window from running twice.
    """
    limit = bucket_limit(cfg)
    shared = keep(shared_buckets(banded))
    star = shared.where((F.col(_SIZE) > limit) & (F.col(C.NID) != F.col(_ROOT))).select(
        F.col(_ROOT).alias(C.DOC_A), F.col(C.NID).alias(C.DOC_B)
    )
    small = shared.where(F.col(_SIZE) <= limit).select(C.BUCKET, C.NID)
    a = small.select(C.BUCKET, F.col(C.NID).alias(C.DOC_A))
    b = small.select(C.BUCKET, F.col(C.NID).alias(C.DOC_B))
    pairs = a.join(b, C.BUCKET).where(F.col(C.DOC_A) < F.col(C.DOC_B)).select(C.DOC_A, C.DOC_B)
    return pairs.unionByName(star).distinct()
