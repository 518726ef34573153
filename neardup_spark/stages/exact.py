"""Stage 3, exact pass: identical normalised texts collapse before any LSH work.

The sketch stage stores a 128-bit digest of each normalised text
(`exact_hash`, null when the text is empty). Documents sharing a digest are
exact copies of the one with the smallest doc_id, their representative; only
representatives go on to banding, and each copy becomes one exact edge to
its representative (a star per text, never all pairs). The shuffle moves
ids and digests only, never text.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from neardup_spark import columns as C


def exact_copies(table: DataFrame) -> DataFrame:
    """table(_nid, doc_id, exact_hash, is_empty) -> (_nid, exact_rep): one row per copy.

    exact_rep is the representative's _nid; representatives and empty texts
    have no row.
    """
    first = F.min(F.struct(C.DOC_ID, C.NID)).over(Window.partitionBy(C.EXACT_HASH))
    ranked = table.where(~F.col(C.IS_EMPTY)).select(C.NID, first[C.NID].alias(C.EXACT_REP))
    return ranked.where(F.col(C.NID) != F.col(C.EXACT_REP))


def exact_edges(copies: DataFrame) -> DataFrame:
    """copies(_nid, exact_rep) -> pairs (rep, copy) with Jaccard and containments 1."""
    one = F.lit(1.0)
    return copies.select(
        F.col(C.EXACT_REP).alias(C.DOC_A),
        F.col(C.NID).alias(C.DOC_B),
        one.alias(C.JACCARD),
        one.alias(C.CONTAINMENT_A),
        one.alias(C.CONTAINMENT_B),
        F.lit(C.MATCH_EXACT).alias(C.MATCH),
    )


def text_digest(text) -> F.Column:
    """16-byte MD5 of the raw text's UTF-8 bytes: tells a re-sent document from a changed one."""
    return F.unhex(F.md5(text.cast("binary")))
