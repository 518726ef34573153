"""Containment search: "this short story is inside that long page", even when Jaccard is tiny.

Containment of A in B is |A n B| / |A|. A 120-word story inside a 1,020-word
page has containment 1.0 but Jaccard 0.114, so Jaccard banding never meets
it. LSH Ensemble (Zhu et al., VLDB 2016) makes containment searchable with
MinHash: for a query of size q and candidates no larger than u, containment
>= t implies Jaccard >= t*q / (q + u - t*q), a threshold that falls as u/q
grows. So pairs are split by size ratio, each class with its own (b, r):

- class k >= 1 holds pairs whose larger set is 2**(k-1) to 2**k times the
  smaller (up to `containment.max_size_ratio`), class 0 pairs of like size;
  its Jaccard floor is s_k = t / (1 + 2**k - t), and its (b, r) catch pairs
  at s_k with probability >= 0.95 (see `kernels.lsh.catching`);
- sizes are bucketed by level L = floor(log2 |set|); a document is indexed
  under its own level and queries, per class, the levels where a container
  of that size ratio lives (L+k-1 and L+k; class 0: L-1 and L), so only
  pairs of the right size ratio meet in a class's buckets;
- every key mixes class, band, band values and level: one flat bucket space.

Candidates are query x index rows sharing a key (capped at
`lsh.all_pairs_bucket_limit` indexed documents per bucket, smallest ids
first), verified exactly: a pair is kept when the smaller set's containment
in the larger reaches the threshold. The pairs table says which way it goes
(containment_a, containment_b).
"""

from __future__ import annotations


from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from neardup_spark import columns as C


def candidates(table: DataFrame, copies: DataFrame, limit: int) -> DataFrame:
    """table(_nid, bands = index keys, queries, is_empty) minus exact copies -> (doc_a, doc_b), doc_a < doc_b;
    a bucket indexes its `limit` smallest ids."""
    reps = table.where(~F.col(C.IS_EMPTY)).join(copies.select(C.NID), C.NID, "left_anti")
    index = reps.select(C.NID, F.explode(C.BANDS).alias(C.BUCKET))
    first = Window.partitionBy(C.BUCKET).orderBy(C.NID)
    index = index.withColumn("_r", F.row_number().over(first)).where(
        F.col("_r") <= limit
    ).select(F.col(C.NID).alias("_x"), C.BUCKET)
    query = reps.select(F.col(C.NID).alias("_q"), F.explode(C.QUERIES).alias(C.BUCKET))
    met = query.join(index, C.BUCKET).where(F.col("_q") != F.col("_x"))
    return met.select(F.least("_q", "_x").alias(C.DOC_A), F.greatest("_q", "_x").alias(C.DOC_B)).distinct()

