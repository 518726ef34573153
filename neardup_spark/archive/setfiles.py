"""A local index's shingle sets as flat files, read by position.

A night verifies its candidates against the stored sets of the archived
documents it met: at 10M documents about 257k of them (2.5%), ~1.4 kB each.
Kept as a Parquet column, the sets are the index's largest column (~12 GB at
10M) and the met documents fall in every row group and page, so a night read
all of it. Here each write task appends its documents' sets to one file of
the part's `sets/` folder, and the docs table keeps each document's
(file, offset, length) in place of the set: a night reads the met sets only,
many reads in flight per task (a disk serves concurrent small reads far
faster than one at a time: 257k cold reads of 1.4 kB from 12.7 GB of files
took 5.2-5.8 s with 16 to 64 threads on this project's 2-core machine,
against 23.6 s to read the 12.7 GB once in order).

The files are written by the executors and read by them with plain file
calls, so only an index on a filesystem every executor mounts (`LocalStore`:
local mode, or a shared mount) is written this way; on a Hadoop filesystem
the sets stay a Parquet column (`shingles`).
"""

from __future__ import annotations

import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from itertools import groupby
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import DataFrame
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

from neardup_spark import columns as C
from neardup_spark.errors import NeardupError
from neardup_spark.kernels.sets import binary_parts

SETS = "sets"  # a part's folder of set files
SETS_FILE, SETS_OFFSET, SETS_LENGTH = "sets_file", "sets_offset", "sets_length"
LOCATOR = (SETS_FILE, SETS_OFFSET, SETS_LENGTH)
READ_THREADS = 16  # reads in flight per task
# Sets closer than this in one file are read with one call (a full read becomes sequential),
# of at most about MAX_READ bytes.
MERGE_GAP = 64 << 10
MAX_READ = 8 << 20
OUT_BYTES = 1 << 30  # sets per output batch, at most about


class SetFileError(NeardupError):
    """A set file the docs table points at is missing or shorter than recorded."""


def has_locator(columns) -> bool:
    return SETS_FILE in columns


def split(docs: DataFrame, folder: str) -> DataFrame:
    """docs(..., shingles, ...) -> the same rows with (sets_file, sets_offset, sets_length) in
    place of shingles (all three null where the set is null). Each task writes its rows'
    sets to one new file in `folder`, an absolute path every executor reaches; sets_file is
    the file's name within it."""
    keep = [f for f in docs.schema.fields if f.name != C.SHINGLES]
    schema = StructType([*keep, StructField(SETS_FILE, StringType()), StructField(SETS_OFFSET, LongType()),
                         StructField(SETS_LENGTH, IntegerType())])
    return docs.mapInArrow(writer(folder, [f.name for f in keep]), schema)


def writer(folder: str, keep: list[str]):
    """The task function of `split`: batches -> batches, appending the sets to one file."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        name, fh, at = f"{uuid.uuid4().hex}.bin", None, 0
        try:
            for batch in batches:
                if not batch.num_rows:
                    continue
                if fh is None:
                    os.makedirs(folder, exist_ok=True)
                    fh = open(os.path.join(folder, name), "xb")  # noqa: SIM115 - closed below
                column = batch.column(batch.schema.get_field_index(C.SHINGLES))
                bounds, body = binary_parts(column)
                starts, lengths = bounds[:-1], np.diff(bounds)
                fh.write(body)
                valid = column.is_valid()
                located = [pa.array([name] * len(column), pa.string()), pa.array(at + starts, pa.int64()),
                           pa.array(lengths.astype(np.int32), pa.int32())]
                yield pa.RecordBatch.from_arrays(
                    [*(batch.column(batch.schema.get_field_index(k)) for k in keep),
                     *(pc.if_else(valid, a, pa.nulls(len(a), a.type)) for a in located)],
                    names=[*keep, *LOCATOR])
                at += len(body)
        finally:
            if fh is not None:
                fh.close()

    return run


def filled(rows: DataFrame, keep: list[str]) -> DataFrame:
    """rows(keep..., [shingles], sets_file, sets_offset, sets_length) -> (keep..., shingles):
    a row with a sets_file gets its set read from there (sets_file being an absolute path);
    another keeps its shingles (null without the column)."""
    has = C.SHINGLES in rows.columns
    schema = StructType([rows.schema[k] for k in keep] + [StructField(C.SHINGLES, BinaryType())])
    cols = [*keep, *([C.SHINGLES] if has else []), *LOCATOR]
    return rows.select(*cols).mapInArrow(reader(keep), schema)


def reader(keep: list[str]):
    """The task function of `filled`."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        with ThreadPoolExecutor(READ_THREADS) as pool:
            for batch in batches:
                if batch.num_rows:
                    yield from fill(batch, keep, pool)

    return run


def fill(batch: pa.RecordBatch, keep: list[str], pool) -> Iterator[pa.RecordBatch]:
    """One batch of `filled`: its rows with a file, their sets read (in file and offset order,
    the way the rows come out), then the others as they are."""
    names = batch.schema.names
    path = batch.column(names.index(SETS_FILE))
    located = path.is_valid()
    if located.false_count:
        rest = batch.filter(pc.invert(located))
        old = rest.column(names.index(C.SHINGLES)) if C.SHINGLES in names else pa.nulls(rest.num_rows, pa.binary())
        yield pa.RecordBatch.from_arrays([*(rest.column(names.index(k)) for k in keep), old.cast(pa.binary())],
                                         names=[*keep, C.SHINGLES])
    if not located.true_count:
        return
    mine = batch.filter(located)
    path = mine.column(names.index(SETS_FILE)).to_numpy(zero_copy_only=False)
    offset = mine.column(names.index(SETS_OFFSET)).to_numpy()
    length = mine.column(names.index(SETS_LENGTH)).to_numpy().astype(np.int64)
    _, code = np.unique(path, return_inverse=True)
    order = np.lexsort((length, offset, code))  # an empty set shares its offset with the next
    path, offset, length = path[order], offset[order], length[order]
    taken = mine.take(pa.array(order))
    ends = np.cumsum(length)
    lo = 0
    while lo < len(order):  # pieces under OUT_BYTES: a binary array's offsets are int32
        base = ends[lo - 1] if lo else 0
        hi = max(lo + 1, int(np.searchsorted(ends, base + OUT_BYTES, side="right")))
        body = read_sets(path[lo:hi], offset[lo:hi], length[lo:hi], pool)
        bounds = np.concatenate(([0], ends[lo:hi] - base)).astype(np.int32)
        out = pa.BinaryArray.from_buffers(pa.binary(), hi - lo, [None, pa.py_buffer(bounds), pa.py_buffer(body)])
        piece = taken.slice(lo, hi - lo)
        yield pa.RecordBatch.from_arrays([*(piece.column(names.index(k)) for k in keep), out],
                                         names=[*keep, C.SHINGLES])
        lo = hi


def read_sets(path: np.ndarray, offset: np.ndarray, length: np.ndarray, pool) -> np.ndarray:
    """The bytes of sets (path[i], offset[i], length[i]), sorted by path, offset and length, one after
    another. Sets close together are read with one call (`MERGE_GAP`, `MAX_READ`); the calls
    are spread over the pool's threads, each holding one file open at a time (an index of
    many parts has many set files, and a task meets most of them)."""
    n = len(path)
    out = np.empty(int(length.sum()), dtype=np.uint8)
    if not n:
        return out
    dest = np.concatenate(([0], np.cumsum(length)[:-1]))
    end = offset + length  # non-decreasing within a file: rows come sorted by offset, then length
    # A new read starts where the file changes, the gap is too wide, or the read would grow too long.
    new = np.ones(n, dtype=bool)
    new[1:] = (path[1:] != path[:-1]) | (offset[1:] - end[:-1] > MERGE_GAP)
    starts = np.flatnonzero(new)
    reads = []
    for i, s in enumerate(starts):  # split over-long reads
        stop = starts[i + 1] if i + 1 < len(starts) else n
        first = s
        for j in range(s + 1, stop):
            if end[j - 1] - offset[first] > MAX_READ:
                reads.append((first, j))
                first = j
        reads.append((first, stop))

    def run(chunk: list[tuple[int, int]]) -> None:
        for name, group in groupby(chunk, key=lambda r: path[r[0]]):  # reads come sorted by file
            fd = _open(name)
            try:
                for lo, hi in group:
                    base = int(offset[lo])
                    size = int(end[hi - 1] - base)
                    got = _pread(fd, size, base)
                    if len(got) < size:
                        raise SetFileError(f"the index's set file {name} ends at {base + len(got)} bytes; the "
                                           f"docs table points at {size} bytes from {base}: the index is damaged")
                    view = np.frombuffer(got, dtype=np.uint8)
                    for k in range(lo, hi):
                        a = int(offset[k]) - base
                        out[dest[k]:dest[k] + length[k]] = view[a:a + length[k]]
            finally:
                os.close(fd)

    per = max(1, -(-len(reads) // (READ_THREADS * 4)))
    list(pool.map(run, [reads[i:i + per] for i in range(0, len(reads), per)]))
    return out


def _open(path: str) -> int:
    try:
        return os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise SetFileError(f"the index's set file {path} is missing: the index is damaged "
                           "(copied without its parts' sets/ folders?)") from None


def _pread(fd: int, size: int, at: int) -> bytes:
    """size bytes from at, fewer only at the end of the file (a mount may return short reads)."""
    got = os.pread(fd, size, at)
    if len(got) == size or not got:
        return got
    parts = [got]
    while size > (done := sum(len(p) for p in parts)):
        more = os.pread(fd, size - done, at + done)
        if not more:
            break
        parts.append(more)
    return b"".join(parts)


def unreferenced(part_dir: str) -> list[str]:
    """The files of a local part's sets/ folder that no row of its docs table names: what task
    attempts that failed (or lost to another attempt) wrote. Only the docs' sets_file column
    is read; a part without set files, or whose docs table has no files, gives none."""
    folder, docs = os.path.join(part_dir, SETS), os.path.join(part_dir, "docs")
    if not os.path.isdir(folder) or not os.path.isdir(docs):
        return []
    files = set(os.listdir(folder))
    try:
        table = ds.dataset(docs, format=ds.ParquetFileFormat(
            read_options=ds.ParquetReadOptions(dictionary_columns=[SETS_FILE])))
        if not table.files or SETS_FILE not in table.schema.names:
            return []
        for batch in table.to_batches(columns=[SETS_FILE]):
            column = batch.column(0)
            names = column.dictionary if pa.types.is_dictionary(column.type) else pc.unique(column)
            files.difference_update(names.to_pylist())
    except (OSError, pa.ArrowInvalid) as e:
        raise SetFileError(f"cannot read {docs} to find which set files it names: {e}") from None
    return sorted(files)
