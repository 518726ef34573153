"""Stage 6, verify: candidate pairs -> pairs whose exact Jaccard reaches the threshold.

Each candidate is joined to both documents' stored shingle sets (binary,
see `sketch`) and a Pandas UDF counts |A n B| with numpy; Jaccard and both
containments (|A n B| / |A|: a short story inside a long page has a small
Jaccard but a containment near 1) are computed from the sizes in the JVM.
"""

from __future__ import annotations

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf

from . import columns as C
from . import hashing, simhash
from .config import Config


def _intersection_series(left: pd.Series, right: pd.Series) -> pd.Series:
    return pd.Series(hashing.intersection_sizes(left.tolist(), right.tolist()), index=left.index)


def set_size(shingles) -> F.Column:
    """Number of shingles in a stored set (4 bytes each)."""
    return (F.length(shingles) / 4).cast("double")


# Up to this many candidates are broadcast for the first join, so the big
# side (every document's shingle set) is not shuffled for it.
BROADCAST_CANDIDATES = 2_000_000


def verify(candidates: DataFrame, cfg: Config, shingled: DataFrame, n_candidates: int | None = None) -> DataFrame:
    """candidates(doc_a, doc_b) + shingled(_nid, shingles[, simhash[, simhash_hi]]) ->
    (doc_a, doc_b, jaccard, containment_a, containment_b, match) with jaccard >= threshold
    (SimHash: within simhash.hamming_distance bits, and the Jaccard too if verify_jaccard).

    `n_candidates`, when known and small, lets the first join broadcast them."""
    # Nondeterministic only to the optimiser: it would otherwise push the
    # Jaccard filter below the projection and run the UDF twice per pair.
    intersection = pandas_udf(_intersection_series, "long").asNondeterministic()
    sim = cfg.match.method == "simhash"
    words = simhash.columns(cfg.simhash.bits) if sim else []
    left_cols = [F.col(C.NID).alias(C.DOC_A), F.col(C.SHINGLES).alias("sa")]
    right_cols = [F.col(C.NID).alias(C.DOC_B), F.col(C.SHINGLES).alias("sb")]
    left_cols += [F.col(w).alias(f"fa{i}") for i, w in enumerate(words)]
    right_cols += [F.col(w).alias(f"fb{i}") for i, w in enumerate(words)]
    left, right = shingled.select(*left_cols), shingled.select(*right_cols)
    small = n_candidates is not None and n_candidates <= BROADCAST_CANDIDATES
    joined = left.join(F.broadcast(candidates) if small else candidates, C.DOC_A).join(right, C.DOC_B)
    if sim:  # Hamming distance first: pairs beyond it need no set intersection
        bits = [F.bit_count(F.col(f"fa{i}").bitwiseXOR(F.col(f"fb{i}"))) for i in range(len(words))]
        joined = joined.where(sum(bits[1:], bits[0]) <= cfg.simhash.hamming_distance)
    sized = joined.select(
        C.DOC_A, C.DOC_B, intersection("sa", "sb").cast("double").alias("i"),
        set_size("sa").alias("na"), set_size("sb").alias("nb"),
    )
    inter, size_a, size_b = F.col("i"), F.col("na"), F.col("nb")
    scored = sized.select(
        C.DOC_A,
        C.DOC_B,
        (inter / (size_a + size_b - inter)).alias(C.JACCARD),
        (inter / size_a).alias(C.CONTAINMENT_A),
        (inter / size_b).alias(C.CONTAINMENT_B),
        F.lit(C.MATCH_NEAR).alias(C.MATCH),
    )
    if cfg.match.mode == "containment":
        return scored.where(F.greatest(C.CONTAINMENT_A, C.CONTAINMENT_B) >= F.lit(cfg.match.containment_threshold))
    if sim and not cfg.simhash.verify_jaccard:
        return scored  # SimHash: within the Hamming distance is the test; Jaccard is reported
    return scored.where(F.col(C.JACCARD) >= F.lit(cfg.verify.threshold))
