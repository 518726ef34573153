"""Stage 6, LSH banding: signature -> one (band, bucket) row per band.

The signature is cut into `bands` slices of `rows` values; each slice is
hashed (xxhash64, in the JVM) into a bucket key, and the keys are exploded
into rows so a shuffle on (band, bucket) shards buckets across executors.
Documents sharing a (band, bucket) become candidates. A 64-bit key collision
only adds a candidate, which verification then rejects.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from . import columns as C
from .config import Config
from .params import LshParams, lsh_params


def band_keys(signed: DataFrame, cfg: Config, lsh: LshParams | None = None) -> DataFrame:
    """signed(doc_id, signature) -> (doc_id, band int, bucket long)."""
    lsh = lsh or lsh_params(cfg)
    r = lsh.rows
    keys = [F.xxhash64(F.slice(C.SIGNATURE, i * r + 1, r)) for i in range(lsh.bands)]
    return signed.select(C.DOC_ID, F.posexplode(F.array(*keys)).alias(C.BAND, C.BUCKET))
