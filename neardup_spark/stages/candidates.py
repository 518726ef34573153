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
With few partitions (local mode), `representative_pairs` ships a
document's keys grouped by the partition their buckets go to, a row per
group, instead of a row per key.
Nearly every bucket holds one document, and those cost one sort, not a
window, a filter and a self-join in the JVM (2.4x slower here at 100k).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from neardup_spark import columns as C
from neardup_spark.kernels.buckets import bucket_pairs, group_keys
from neardup_spark.runtime.routing import route_keys, shuffle_partitions


def _pairs_of_partition(limit: int):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = [_flat_rows(b) for b in batches if b.num_rows]
        if sum(len(n) for n, _ in rows) < 2:
            return
        nid = np.concatenate([n for n, _ in rows])
        bucket = np.concatenate([k for _, k in rows])
        for a, b in bucket_pairs(nid, bucket, limit):
            if len(a):
                yield pa.RecordBatch.from_arrays([pa.array(a), pa.array(b)], schema=_OUTPUT)

    return run


def _flat_rows(batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
    """(nid, bucket) arrays of a batch of (_nid, bucket) rows or of grouped (_nid, keys) rows."""
    nid = batch.column(C.NID).to_numpy()
    if C.BUCKET in batch.schema.names:
        return nid, batch.column(C.BUCKET).to_numpy()
    keys = batch.column(_KEYS)
    return np.repeat(nid, np.diff(keys.offsets.to_numpy())), keys.flatten().to_numpy()


_OUTPUT = pa.schema([(C.DOC_A, pa.int64()), (C.DOC_B, pa.int64())])
_KEYS, _ROUTE = "_keys", "_route"
# Keys a grouped row must carry on average for grouping to pay: each row costs
# the JVM and the Arrow hand-over more than a key does. At 100k documents and
# 42 bands (local[2], warm): 8 partitions, ~5 keys a row: 2.5-2.7 -> 1.9-2.1 s;
# 16 partitions, ~3 a row: even; 64 partitions, ~1.3 a row: 2x slower.
KEYS_PER_ROW = 4


def candidate_pairs(banded: DataFrame, limit: int) -> DataFrame:
    """banded(_nid, bucket) -> (doc_a, doc_b) of _nid values, distinct, doc_a < doc_b; buckets
    up to `limit` documents yield all their pairs, larger ones a star (plan.Matcher.bucket_limit)."""
    rows = banded.select(C.NID, C.BUCKET).repartition(C.BUCKET)  # every bucket whole in one partition
    pairs = rows.mapInArrow(_pairs_of_partition(limit), f"{C.DOC_A} long, {C.DOC_B} long")
    return pairs.distinct()


def representative_pairs(reps: DataFrame, limit: int, keys_per_doc: int, parts: int | None = None) -> DataFrame:
    """reps(_nid, bands) -> (doc_a, doc_b) of _nid values, distinct, doc_a < doc_b: the pairs
    of `candidate_pairs` over the exploded keys, whatever the layout.

    With few partitions (`parts`, default spark.sql.shuffle.partitions, at most
    keys_per_doc / KEYS_PER_ROW), exploding each document into one row per key
    costs more than the work on the rows: each document's keys are grouped by
    the partition their bucket goes to instead, one row per group (~8 rows of
    ~5 keys at 42 bands and 8 partitions, instead of 42 rows)."""
    parts = parts or shuffle_partitions(reps.sparkSession)
    if parts * KEYS_PER_ROW > keys_per_doc:
        return candidate_pairs(reps.select(C.NID, F.explode(C.BANDS).alias(C.BUCKET)), limit)
    grouped = reps.select(C.NID, C.BANDS).mapInArrow(
        _grouped_keys(parts), f"{_ROUTE} long, {C.NID} long, {_KEYS} array<long>")
    rows = grouped.repartition(parts, _ROUTE).drop(_ROUTE)  # every bucket whole in one partition
    pairs = rows.mapInArrow(_pairs_of_partition(limit), f"{C.DOC_A} long, {C.DOC_B} long")
    return pairs.distinct()


def _grouped_keys(parts: int):
    routes = np.array(route_keys(parts), dtype=np.int64)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if not batch.num_rows:
                continue
            bands = batch.column(C.BANDS)
            group, nid, offsets, keys = group_keys(batch.column(C.NID).to_numpy(), bands.offsets.to_numpy(),
                                                   bands.flatten().to_numpy(), parts)
            lists = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(keys, pa.int64()))
            yield pa.RecordBatch.from_arrays([pa.array(routes[group]), pa.array(nid), lists], schema=_GROUPED)

    return run


_GROUPED = pa.schema([(_ROUTE, pa.int64()), (C.NID, pa.int64()), (_KEYS, pa.list_(pa.int64()))])
