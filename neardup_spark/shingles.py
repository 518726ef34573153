"""Stage 4, shingles: norm_text -> shingles, the distinct 32-bit shingle values.

Word k-shingles by default (k=5), or character n-grams (`shingle.unit =
"char"`) for short texts such as titles. A text with fewer than k units still
gets one shingle of its whole unit sequence. Values are sorted ascending as
unsigned and stored as Spark ints (the same 32 bits, signed). The work is
the numpy kernel in `hashing`, run on Arrow batches by a Pandas UDF.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql.functions import pandas_udf

from . import columns as C
from . import hashing
from .config import Config


def shingle_series(texts: pd.Series, unit: str, k: int, seed: int) -> pd.Series:
    """Series of normalised str -> Series of int32 arrays (null/empty -> empty array)."""
    values = [t if isinstance(t, str) else "" for t in texts]
    out: list[np.ndarray] = []
    for lo in range(0, len(values), hashing.SUB_BATCH):
        flat, offsets = hashing.shingle_texts(values[lo : lo + hashing.SUB_BATCH], unit, k, seed)
        out.extend(hashing.split_sets(flat.view(np.int32), offsets))
    return pd.Series(out, index=texts.index, dtype=object)


def shingle(docs: DataFrame, cfg: Config) -> DataFrame:
    """docs(norm_text, ...) -> docs + shingles array<int>."""
    unit, k, seed = cfg.shingle.unit, cfg.shingle.k, cfg.minhash.seed

    @pandas_udf("array<int>")
    def _shingles(texts: pd.Series) -> pd.Series:
        return shingle_series(texts, unit, k, seed)

    return docs.withColumn(C.SHINGLES, _shingles(docs[C.NORM]))
