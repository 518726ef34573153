"""Bucket pairs: rows (document, bucket key) sorted in numpy -> candidate pairs.

All pairs of a bucket up to `limit` documents, a star to the smallest id
beyond (see `stages.candidates`).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from neardup_spark.kernels.hashing import ranges_under

# Pairs per Arrow batch handed back to Spark.
_BATCH_PAIRS = 1 << 20


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


def key_groups(keys: np.ndarray, parts: int) -> np.ndarray:
    """The group (0..parts-1) of each bucket key: a function of the key alone, so a
    bucket's rows always share a group (band keys are mixed 64-bit hashes already)."""
    return ((keys.view(np.uint64) >> np.uint64(40)) % np.uint64(parts)).astype(np.uint16)


def group_keys(nid: np.ndarray, offsets: np.ndarray, keys: np.ndarray, parts: int):
    """Documents' key lists (keys[offsets[i]:offsets[i+1]] for nid[i]) -> one row per
    (group, document) holding some keys: (group, nid, row offsets, keys in row order)."""
    doc = np.repeat(np.arange(len(nid)), np.diff(offsets))
    group = key_groups(keys, parts)
    order = np.argsort(group, kind="stable")  # a radix sort of uint16; documents stay in order within a group
    g, d = group[order], doc[order]
    starts = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (d[1:] != d[:-1])])
    return g[starts], nid[d[starts]], np.r_[starts, len(g)], keys[order]
