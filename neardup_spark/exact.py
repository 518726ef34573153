"""Stage 3, exact pass: identical normalised texts collapse before any MinHash work.

Adds `is_empty` (null or empty after normalisation), `exact_hash` (SHA-256 of
norm_text, null when empty) and `exact_rep` (the smallest doc_id sharing the
hash; the document itself when empty). Only representatives (doc_id ==
exact_rep, not empty) go on to shingling; the others become exact edges.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from . import columns as C
from .config import Config


def exact_pass(docs: DataFrame, cfg: Config) -> DataFrame:
    """docs + is_empty, exact_hash, exact_rep. One shuffle, keyed by the hash."""
    is_empty = F.col(C.NORM).isNull() | (F.length(C.NORM) == 0)
    by_hash = Window.partitionBy(C.EXACT_HASH)
    return (
        docs.withColumn(C.IS_EMPTY, is_empty)
        .withColumn(C.EXACT_HASH, F.when(~F.col(C.IS_EMPTY), F.sha2(C.NORM, 256)))
        .withColumn(
            C.EXACT_REP,
            F.when(F.col(C.IS_EMPTY), F.col(C.DOC_ID)).otherwise(F.min(C.DOC_ID).over(by_hash)),
        )
    )


def representatives(docs: DataFrame) -> DataFrame:
    """The documents that go on to shingling: one per distinct non-empty text."""
    return docs.where(~F.col(C.IS_EMPTY) & (F.col(C.DOC_ID) == F.col(C.EXACT_REP)))


def exact_edges(docs: DataFrame) -> DataFrame:
    """Pairs (rep, copy) for every exact copy: a star per text, never all pairs."""
    copies = docs.where(~F.col(C.IS_EMPTY) & (F.col(C.DOC_ID) != F.col(C.EXACT_REP)))
    one = F.lit(1.0)
    return copies.select(
        F.col(C.EXACT_REP).alias(C.DOC_A),
        F.col(C.DOC_ID).alias(C.DOC_B),
        one.alias(C.JACCARD),
        one.alias(C.CONTAINMENT_A),
        one.alias(C.CONTAINMENT_B),
        F.lit(C.MATCH_EXACT).alias(C.MATCH),
    )
