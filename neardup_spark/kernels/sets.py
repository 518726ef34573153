"""Set intersection sizes of candidate pairs over packed shingle sets (see `stages.verify`)."""

from __future__ import annotations


import numpy as np
import pyarrow as pa

from neardup_spark.kernels import hashing


def binary_parts(chunk: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A binary array -> (its values' bounds, int64 [n+1] from 0; their bytes, uint8, in order)."""
    width = np.int64 if pa.types.is_large_binary(chunk.type) else np.int32
    raw = np.frombuffer(chunk.buffers()[1], dtype=width)[chunk.offset:chunk.offset + len(chunk) + 1]
    raw = raw.astype(np.int64)
    data = chunk.buffers()[2]
    body = np.frombuffer(data, dtype=np.uint8)[raw[0]:raw[-1]] if data is not None else np.empty(0, np.uint8)
    return raw - raw[0], body


def set_arrays(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """Stored sets (binary of little-endian uint32) -> (offsets int64 [n+1], values uint32),
    row i's set being values[offsets[i]:offsets[i+1]]. Chunks are joined in numpy, so a
    partition may hold more than 2 GB of sets."""
    lengths, pieces = [], []
    for chunk in column.chunks:
        bounds, body = binary_parts(chunk)
        sizes = np.diff(bounds)
        if (sizes % 4).any():
            raise ValueError("verify: a stored shingle set is not a whole number of uint32 values")
        pieces.append(body.view("<u4"))
        lengths.append(sizes // 4)
    lengths = np.concatenate(lengths) if lengths else np.empty(0, np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    values = np.concatenate(pieces) if pieces else np.empty(0, np.uint32)
    return offsets, values.astype(np.uint32, copy=False)


def pair_sizes(set_ids: np.ndarray, offsets: np.ndarray, values: np.ndarray,
               a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(|A n B|, |A|, |B|) int64 for pairs (a[i], b[i]) of ids in set_ids, whose sets are
    values[offsets[j]:offsets[j+1]] (an id given twice keeps its first set). Raises if a
    pair names an id with no set here."""
    ids, first = np.unique(set_ids, return_index=True)
    rows = []
    for side in (a, b):
        at = np.searchsorted(ids, side)
        found = at < len(ids)
        found[found] = ids[at[found]] == side[found]
        if not found.all():
            missing = side[~found][:5].tolist()
            raise AssertionError(f"verify: no shingle set reached the partition of the pairs of ids {missing}")
        rows.append(first[at])
    (ra, rb) = rows
    a_lo, a_hi, b_lo, b_hi = offsets[ra], offsets[ra + 1], offsets[rb], offsets[rb + 1]
    return hashing.slice_intersections(values, a_lo, a_hi, b_lo, b_hi), a_hi - a_lo, b_hi - b_lo
