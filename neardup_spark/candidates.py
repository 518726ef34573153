"""Stage 5, candidates: (_nid, bucket) rows -> distinct pairs (doc_a < doc_b, internal ids).

A bucket of n documents yields all n(n-1)/2 pairs while n is at most
`lsh.all_pairs_bucket_limit`, and a star of n-1 pairs to its smallest id
beyond that. One story copied 5,000 times, or boilerplate shared by a whole
site, therefore costs O(n) candidates per band instead of O(n^2); the star
still links every member, and connected components do the rest. Pairs are
deduplicated across bands.

The rows are shuffled once by bucket, so each bucket lands whole in one
partition; `bucket_pairs` then sorts a partition's rows with numpy and
emits each shared bucket's pairs (`mapInArrow`, no row-at-a-time Python).
Nearly every bucket holds one document, and those cost one sort, not a
window, a filter and a self-join in the JVM (2.4x slower here at 100k).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame

from . import columns as C
from .config import Config
from .hashing import ranges_under

# Pairs per Arrow batch handed back to Spark.
_BATCH_PAIRS = 1 << 20


def bucket_limit(cfg: Config) -> int:
    """Bucket size up to which all pairs are emitted. SimHash block tables are exact only
    with every pair of a bucket checked (their buckets fill with unrelated fingerprints
    sharing a block, so a star to one member would miss pairs): no limit there; the
    table layout (bits per key) decides bucket sizes."""
    return 2**62 if cfg.match.method == "simhash" else cfg.lsh.all_pairs_bucket_limit


def bucket_pairs(nid: np.ndarray, bucket: np.ndarray, limit: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(doc_a, doc_b) int64 arrays, in chunks of about _BATCH_PAIRS, for rows (nid[i], bucket[i])
    holding every row of their buckets: all pairs of a bucket of 2..limit members, a star to
    the smallest nid beyond that; doc_a < doc_b. Not deduplicated across buckets."""
    if len(bucket) < 2:
        return
    ids, sizes = _shared_runs(nid, bucket)
    starts = np.cumsum(sizes) - sizes
    big = sizes > limit
    yield from _stars(ids, starts[big], sizes[big])
    for size in np.unique(sizes[~big]):
        yield from _all_pairs(ids, starts[sizes == size], int(size))


def _shared_runs(nid: np.ndarray, bucket: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ids, sizes): the ids of every bucket with two or more rows, bucket after bucket,
    ascending within each, and each such bucket's row count.

    Nearly every bucket holds one row, so one sort by bucket finds the shared ones and
    only their rows are then ordered by id: a lexsort of all rows by (bucket, id) cost
    ~8x the one-key sort, most of this stage's numpy time."""
    order = np.argsort(bucket)
    keys = bucket[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    sizes = np.diff(np.r_[starts, len(keys)])
    shared = sizes > 1
    ids = nid[order[np.repeat(shared, sizes)]]
    run = np.repeat(np.arange(np.count_nonzero(shared)), sizes[shared])
    return ids[np.lexsort((ids, run))], sizes[shared]


def _stars(ids: np.ndarray, starts: np.ndarray, sizes: np.ndarray):
    """Each run's first (smallest) id paired with each other member, run by run in chunks."""
    for lo, hi in ranges_under(sizes - 1, _BATCH_PAIRS):
        s, z = starts[lo:hi], sizes[lo:hi] - 1
        first = np.repeat(s, z)
        offset = np.arange(len(first)) - np.repeat(np.cumsum(z) - z, z)
        yield _ordered(ids[first], ids[first + 1 + offset])


def _all_pairs(ids: np.ndarray, starts: np.ndarray, size: int):
    """All pairs within runs of one size (2..limit members)."""
    i, j = np.triu_indices(size, 1)
    per_run = len(i)
    if per_run > _BATCH_PAIRS:  # a huge bucket (SimHash has no limit): row by row
        for s in starts:
            for r in range(size - 1):
                yield _ordered(np.repeat(ids[s + r], size - 1 - r), ids[s + r + 1:s + size])
        return
    step = max(1, _BATCH_PAIRS // per_run)
    for lo in range(0, len(starts), step):
        s = starts[lo:lo + step, None]
        yield _ordered(ids[(s + i).ravel()], ids[(s + j).ravel()])


def _ordered(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs with a < b (ids sorted within a bucket already give a <= b; an id twice in one
    bucket, two bands' keys colliding, pairs with itself and is dropped)."""
    keep = a < b
    return (a, b) if keep.all() else (a[keep], b[keep])


def _pairs_of_partition(limit: int):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        batches = list(batches)
        if sum(b.num_rows for b in batches) < 2:
            return
        table = pa.Table.from_batches(batches)  # nullability as Spark sent it
        nid = table.column(C.NID).to_numpy()
        bucket = table.column(C.BUCKET).to_numpy()
        for a, b in bucket_pairs(nid, bucket, limit):
            if len(a):
                yield pa.RecordBatch.from_arrays([pa.array(a), pa.array(b)], schema=_OUTPUT)

    return run


_OUTPUT = pa.schema([(C.DOC_A, pa.int64()), (C.DOC_B, pa.int64())])


def candidate_pairs(banded: DataFrame, cfg: Config) -> DataFrame:
    """banded(_nid, bucket) -> (doc_a, doc_b) of _nid values, distinct, doc_a < doc_b."""
    rows = banded.select(C.NID, C.BUCKET).repartition(C.BUCKET)  # every bucket whole in one partition
    pairs = rows.mapInArrow(_pairs_of_partition(bucket_limit(cfg)), f"{C.DOC_A} long, {C.DOC_B} long")
    return pairs.distinct()
