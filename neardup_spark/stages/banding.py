"""Stage 4, LSH banding: the representatives whose band keys `candidates` buckets.

The keys were computed by the sketch stage (each band's `rows` signature
values mixed with the band's index into one 64-bit key, so the key alone
names the bucket). `candidates` shuffles the keys by bucket, which shards
the buckets across executors. Empty texts and exact copies are left out: a
copy's representative stands for it.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from neardup_spark import columns as C

# Up to this many exact copies are broadcast to every task for the anti-join
# (8 bytes each); beyond it the anti-join shuffles instead.
BROADCAST_COPIES = 20_000_000


def representatives(table: DataFrame, copies: DataFrame, n_copies: int) -> DataFrame:
    """table(_nid, exact_hash, bands, is_empty) minus empty texts and copies(_nid)
    -> (_nid, exact_hash, bands)."""
    reps = table.where(~F.col(C.IS_EMPTY)).select(C.NID, C.EXACT_HASH, C.BANDS)
    if n_copies:
        drop = copies.select(C.NID)
        reps = reps.join(F.broadcast(drop) if n_copies <= BROADCAST_COPIES else drop, C.NID, "left_anti")
    return reps

