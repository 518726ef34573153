"""Stage 5, MinHash: shingles -> signature, num_perm 32-bit minima per document.

The permutation coefficients are computed once on the driver from the seed
and travel to the executors inside the UDF's closure; each Arrow batch is
signed in cache-sized sub-batches by `hashing.minhash`. Same seed, same
signatures, on any partitioning.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql.functions import pandas_udf

from . import columns as C
from . import hashing
from .config import Config


def signature_series(sets: pd.Series, a: np.ndarray, b: np.ndarray) -> pd.Series:
    """Series of int32 shingle arrays -> Series of int32 signature arrays."""
    arrays = [np.asarray(s, dtype=np.int32) if s is not None else np.zeros(0, np.int32) for s in sets]
    out: list[np.ndarray] = []
    for lo in range(0, len(arrays), hashing.SUB_BATCH):
        chunk = arrays[lo : lo + hashing.SUB_BATCH]
        offsets = np.zeros(len(chunk) + 1, dtype=np.int64)
        np.cumsum([c.size for c in chunk], out=offsets[1:])
        flat = np.concatenate(chunk).view(np.uint32) if offsets[-1] else np.zeros(0, np.uint32)
        out.extend(hashing.minhash(flat, offsets, a, b).view(np.int32))
    return pd.Series(out, index=sets.index, dtype=object)


def signatures(docs: DataFrame, cfg: Config) -> DataFrame:
    """docs(shingles, ...) -> docs + signature array<int> of length num_perm."""
    a, b = hashing.permutations(cfg.minhash.num_perm, cfg.minhash.seed)

    @pandas_udf("array<int>")
    def _signature(sets: pd.Series) -> pd.Series:
        return signature_series(sets, a, b)

    return docs.withColumn(C.SIGNATURE, _signature(docs[C.SHINGLES]))
