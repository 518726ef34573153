"""Stage 8, verify: candidate pairs -> pairs whose exact Jaccard reaches the threshold.

Each candidate is joined to both documents' stored shingle sets; the
intersection is computed in the JVM (`array_intersect`). Containment of each
side (|A n B| / |A|) is reported too: a short story inside a long page has a
small Jaccard but a containment near 1.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from . import columns as C
from .config import Config


def verify(candidates: DataFrame, cfg: Config, shingled: DataFrame) -> DataFrame:
    """candidates(doc_a, doc_b) + shingled(doc_id, shingles) ->
    (doc_a, doc_b, jaccard, containment_a, containment_b, match) with jaccard >= threshold."""
    sets = shingled.select(C.DOC_ID, C.SHINGLES)
    left = sets.select(F.col(C.DOC_ID).alias(C.DOC_A), F.col(C.SHINGLES).alias("sa"))
    right = sets.select(F.col(C.DOC_ID).alias(C.DOC_B), F.col(C.SHINGLES).alias("sb"))
    joined = candidates.join(left, C.DOC_A).join(right, C.DOC_B)
    inter = F.size(F.array_intersect("sa", "sb")).cast("double")
    size_a, size_b = F.size("sa").cast("double"), F.size("sb").cast("double")
    scored = joined.select(
        C.DOC_A,
        C.DOC_B,
        (inter / (size_a + size_b - inter)).alias(C.JACCARD),
        (inter / size_a).alias(C.CONTAINMENT_A),
        (inter / size_b).alias(C.CONTAINMENT_B),
        F.lit(C.MATCH_NEAR).alias(C.MATCH),
    )
    return scored.where(F.col(C.JACCARD) >= F.lit(cfg.verify.threshold))
