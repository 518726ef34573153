"""The archive's band rows met by a night's band keys, read straight from a local index's files.

A night's largest cost is reading every archived band row (42 a document:
394M at 10M documents) to find the ~7M that share a key with the batch.
Spark's scan and broadcast hash join spent ~120 ns a row on it at 10M
(decoding, row conversion, a probe of a hash table larger than the CPU
cache). Here, for an index on a filesystem every executor mounts
(`LocalStore`: local mode, or a shared mount), each task takes one bucket
range: the batch's keys of that range (`kernels.probe`), then the range's
band files of every part, read with pyarrow a million rows at a time. Only
the matched rows go back to Spark, with their part's position for
`Index.live`.

An index on a Hadoop filesystem (HDFS, object stores) is probed by Spark's
join instead (`append.ArchiveSide`): pyarrow has neither Spark's Hadoop
configuration nor its credentials.
"""

from __future__ import annotations

import os
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import IntegerType, LongType, StructField, StructType

from neardup_spark import columns as C
from neardup_spark.archive import index as ix
from neardup_spark.kernels.probe import key_set, matches
from neardup_spark.runtime.filestore import LocalStore

_RANGE = "_range"
SCAN_ROWS = 1 << 20  # archived band rows decoded at a time (two int64 columns: 16 MB)


def range_files(idx: ix.Index) -> dict[int, list[tuple[str, int]]] | None:
    """{bucket range: [(band file, its part's position)]} of a local index, or None when its
    band rows cannot be read this way (a Hadoop store, or a part whose band files are not
    split by range)."""
    store = idx.store
    if not isinstance(store, LocalStore):
        return None
    files: dict[int, list[tuple[str, int]]] = {}
    prefix = f"{ix.BUCKET_RANGE}="
    for position, part in enumerate(idx.parts):
        rel = f"parts/{part}/bands"
        for name in store.list(rel):
            if not name.startswith(prefix):
                if _is_data(name):
                    return None
                continue
            folder = os.path.abspath(os.path.join(store.root, rel, name))
            for file in store.list(f"{rel}/{name}"):
                if _is_data(file):
                    files.setdefault(int(name[len(prefix):]), []).append((os.path.join(folder, file), position))
    return files


def _is_data(name: str) -> bool:
    return not name.startswith(("_", "."))


def hits(spark: SparkSession, idx: ix.Index, banded: DataFrame, files: dict[int, list[tuple[str, int]]],
         id_type) -> DataFrame:
    """banded(_nid, bucket) -> (_nid, bucket, _adoc, PART): every archived band row of `files`
    (see `range_files`) with a key of banded, once per banded row with that key. Rows of
    replaced documents are still in: `Index.live` takes them out."""
    schema = StructType([StructField(C.NID, LongType()), StructField(C.BUCKET, LongType()),
                         StructField(C.ADOC, id_type), StructField(ix.PART, IntegerType())])
    if not files:
        return spark.createDataFrame([], schema)
    ranged = banded.select(C.NID, C.BUCKET, ix.bucket_range(F.col(C.BUCKET)).alias(_RANGE))
    ranged = ranged.where(F.col(_RANGE).isin(sorted(files)))
    # A task per range: its keys, and only its files. (Which task a range lands in does not
    # matter; each is read once.)
    by_range = ranged.repartitionByRange(len(files), _RANGE)
    return by_range.mapInArrow(_probe_ranges(files, to_arrow_type(id_type)), schema)


def _probe_ranges(files: dict[int, list[tuple[str, int]]], id_arrow: pa.DataType):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        got = [b for b in batches if b.num_rows]
        if not got:
            return
        rows = pa.Table.from_batches(got)
        nid, bucket, ranges = (rows.column(c).to_numpy() for c in (C.NID, C.BUCKET, _RANGE))
        for r in np.unique(ranges):
            mine = ranges == r
            yield from probe_files(files.get(int(r), []), nid[mine], bucket[mine], id_arrow)

    return run


def probe_files(files: list[tuple[str, int]], nid: np.ndarray, bucket: np.ndarray,
                id_arrow: pa.DataType) -> Iterator[pa.RecordBatch]:
    """The rows (_nid, bucket, _adoc, PART) of band files (path, part position) whose bucket is
    one of the (nid[i], bucket[i]) rows', once per such row."""
    ks = key_set(bucket, nid)
    for path, position in files:
        for chunk in pq.ParquetFile(path).iter_batches(batch_size=SCAN_ROWS, columns=[C.BUCKET, C.DOC_ID]):
            rows, at = matches(ks, chunk.column(C.BUCKET).to_numpy())
            if rows.size:
                adoc = chunk.column(C.DOC_ID).take(pa.array(rows)).cast(id_arrow)
                yield pa.RecordBatch.from_arrays(
                    [pa.array(ks.values[at]), pa.array(ks.keys[at]), adoc,
                     pa.array(np.full(rows.size, position, dtype=np.int32))],
                    names=[C.NID, C.BUCKET, C.ADOC, ix.PART])
