"""Shingle sets kept as flat files read by position (`archive.setfiles`): every set reads back
as written, in any row order and across files, a damaged file is a clear error, and an index
whose parts mix both layouts (and its compaction) gives the clusters of one full run."""

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark import api, columns as C
from neardup_spark.config import ConfigError
from neardup_spark.archive import setfiles
from neardup_spark.archive.index import open_index

from .test_nightly import _cfg

_IDS = "doc_id"


def _sets(rng, n: int) -> list:
    """n stored sets: None, empty, or a few uint32 values."""
    out = []
    for _ in range(n):
        r = rng.random()
        out.append(None if r < 0.1 else b"" if r < 0.15 else rng.integers(0, 255, 4 * rng.integers(1, 60),
                                                                             dtype=np.uint8).tobytes())
    return out


def _written(folder: Path, batches: list[list[pa.RecordBatch]]) -> pa.Table:
    """Each inner list is one task's batches: written through `setfiles.writer`, the rows it
    yields with sets_file made absolute (as `Index.docs` makes it)."""
    rows = []
    for task in batches:
        rows += list(setfiles.writer(str(folder), [_IDS])(iter(task)))
    table = pa.Table.from_batches(rows)
    names = table.column(setfiles.SETS_FILE).to_pylist()
    return table.set_column(1, setfiles.SETS_FILE,
                            pa.array([None if x is None else str(folder / x) for x in names], pa.string()))


def _read(table: pa.Table, chunk: int, threads: int = 4) -> dict:
    with ThreadPoolExecutor(threads) as pool:
        out = [b for batch in table.to_batches(max_chunksize=chunk) for b in setfiles.fill(batch, [_IDS], pool)]
    got = pa.Table.from_batches(out)
    assert got.num_rows == table.num_rows
    return dict(zip(got.column(_IDS).to_pylist(), got.column(C.SHINGLES).to_pylist()))


@pytest.mark.compat
@pytest.mark.parametrize("gap,longest", [(setfiles.MERGE_GAP, setfiles.MAX_READ), (0, 1), (1 << 20, 64),
                                         (0, setfiles.MAX_READ)])
def test_every_set_reads_back_as_written_in_any_order(tmp_path, monkeypatch, gap, longest):
    monkeypatch.setattr(setfiles, "MERGE_GAP", gap)  # merged reads, one read a set, reads cut short
    monkeypatch.setattr(setfiles, "MAX_READ", longest)
    rng = np.random.default_rng(7)
    sets = _sets(rng, 3000)
    batch = pa.RecordBatch.from_arrays([pa.array(range(3000), pa.int64()), pa.array(sets, pa.binary())],
                                       names=[_IDS, C.SHINGLES])
    tasks = [[batch.slice(0, 1000), batch.slice(1000, 0), batch.slice(1000, 500)], [batch.slice(1500, 1500)]]
    table = _written(tmp_path, tasks)
    assert len(os.listdir(tmp_path)) == 2  # a file per task
    assert table.column(setfiles.SETS_FILE).null_count == sum(s is None for s in sets)
    shuffled = table.take(pa.array(rng.permutation(table.num_rows)))
    assert _read(shuffled, 700) == dict(enumerate(sets))
    some = rng.choice(3000, 200, replace=False)
    assert _read(table.take(pa.array(some)), 64) == {int(i): sets[i] for i in some}


@pytest.mark.compat
def test_rows_without_a_file_keep_their_own_set(tmp_path):
    """A union of a Parquet-layout part (shingles) and a file-layout part (locator)."""
    sets = [b"\x01\x00\x00\x00", None, b"\x02\x00\x00\x00\x03\x00\x00\x00"]
    written = _written(tmp_path, [[pa.RecordBatch.from_arrays([pa.array([10, 11, 12], pa.int64()),
                                                               pa.array(sets, pa.binary())],
                                                              names=[_IDS, C.SHINGLES])]])
    own = pa.table({_IDS: pa.array([1, 2], pa.int64()), C.SHINGLES: pa.array([b"\x05\x00\x00\x00", None]),
                    setfiles.SETS_FILE: pa.nulls(2, pa.string()), setfiles.SETS_OFFSET: pa.nulls(2, pa.int64()),
                    setfiles.SETS_LENGTH: pa.nulls(2, pa.int32())})
    mixed = pa.concat_tables([own, written.append_column(C.SHINGLES, pa.nulls(3, pa.binary())).select(own.column_names)])
    assert _read(mixed, 100) == {1: b"\x05\x00\x00\x00", 2: None, 10: sets[0], 11: None, 12: sets[2]}


@pytest.mark.compat
def test_a_missing_or_short_set_file_is_a_clear_error(tmp_path):
    rng = np.random.default_rng(3)
    sets = [rng.integers(0, 255, 400, dtype=np.uint8).tobytes() for _ in range(50)]
    table = _written(tmp_path, [[pa.RecordBatch.from_arrays([pa.array(range(50), pa.int64()),
                                                             pa.array(sets, pa.binary())], names=[_IDS, C.SHINGLES])]])
    (path,) = tmp_path.iterdir()
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(setfiles.SetFileError, match="damaged"):
        _read(table, 100)
    path.unlink()
    with pytest.raises(setfiles.SetFileError, match="missing"):
        _read(table, 100)


@pytest.mark.compat
def test_a_reader_holds_one_file_open_a_thread(tmp_path, monkeypatch):
    """An index of many parts has many set files, and one batch meets most of them: the open
    files stay bounded by the reads in flight, not by the files met."""
    rng = np.random.default_rng(5)
    sets = _sets(rng, 1200)
    batch = pa.RecordBatch.from_arrays([pa.array(range(1200), pa.int64()), pa.array(sets, pa.binary())],
                                       names=[_IDS, C.SHINGLES])
    table = _written(tmp_path, [[batch.slice(i, 30)] for i in range(0, 1200, 30)])
    assert len(os.listdir(tmp_path)) == 40
    lock, now, most = threading.Lock(), set(), [0]
    real_open, real_close = os.open, os.close

    def opened(path, flags, *more):
        fd = real_open(path, flags, *more)
        with lock:
            now.add(fd)
            most[0] = max(most[0], len(now))
        return fd

    def closed(fd):
        with lock:
            now.discard(fd)
        real_close(fd)

    monkeypatch.setattr(setfiles.os, "open", opened)
    monkeypatch.setattr(setfiles.os, "close", closed)
    assert _read(table.take(pa.array(rng.permutation(1200))), 1200, threads=3) == dict(enumerate(sets))
    assert 1 <= most[0] <= 3 and not now


@pytest.mark.compat
def test_the_set_files_no_document_names_are_found(tmp_path):
    """What a failed task attempt leaves in a part's sets/ folder, and nothing else."""
    rng = np.random.default_rng(9)
    sets = _sets(rng, 600)
    batch = pa.RecordBatch.from_arrays([pa.array(range(600), pa.int64()), pa.array(sets, pa.binary())],
                                       names=[_IDS, C.SHINGLES])
    part = tmp_path / "part"
    assert setfiles.unreferenced(str(part)) == []
    rows = list(setfiles.writer(str(part / setfiles.SETS), [_IDS])(iter([batch.slice(0, 300)])))
    rows += list(setfiles.writer(str(part / setfiles.SETS), [_IDS])(iter([batch.slice(300, 300)])))
    (part / "docs").mkdir()
    assert setfiles.unreferenced(str(part)) == []  # a docs table without files: none named, none found
    for i, written in enumerate(rows):  # as Spark writes it: dictionary pages, several row groups
        pq.write_table(pa.Table.from_batches([written]), part / "docs" / f"part-{i}.parquet", row_group_size=64)
    (part / "docs" / "_SUCCESS").write_bytes(b"")
    list(setfiles.writer(str(part / setfiles.SETS), [_IDS])(iter([batch.slice(0, 100)])))  # a failed attempt's
    named = {name for r in rows for name in r.column(setfiles.SETS_FILE).to_pylist() if name}
    (stray,) = set(os.listdir(part / setfiles.SETS)) - named
    assert setfiles.unreferenced(str(part)) == [stray]
    (part / "docs" / "part-1.parquet").write_bytes(b"not parquet")
    with pytest.raises(setfiles.SetFileError, match="cannot read"):
        setfiles.unreferenced(str(part))


def _layout(index: str) -> list[str]:
    """Each part's set layout: 'files' (a docs table with a locator and a sets/ folder) or 'parquet'."""
    out = []
    for part in open_index(index).parts:
        docs = Path(index) / "parts" / part / "docs"
        names = pq.read_schema(next(docs.glob("*.parquet"))).names
        if setfiles.SETS_FILE in names:
            assert C.SHINGLES not in names and any((Path(index) / "parts" / part / setfiles.SETS).iterdir())
            out.append("files")
        else:
            assert C.SHINGLES in names and not (Path(index) / "parts" / part / setfiles.SETS).exists()
            out.append("parquet")
    return out


def _format(index: str) -> int:
    return open_index(index).manifest["format"]


def _append_cfg(batch: str, index: str, out: Path, **more):
    return _cfg(**{"input.path": batch, "index.path": index, "index.append": True, "output.path": str(out), **more})


@pytest.mark.compat
def test_an_index_of_both_layouts_and_its_compaction_give_one_full_run(spark, tmp_path):
    from . import frames, oracles

    rows = pd.read_json(api.SAMPLE, lines=True)
    paths = oracles.split_into_nights(rows, tmp_path, seed=5)
    index = str(tmp_path / "index")
    # An index written before this layout (or on a Hadoop filesystem): sets in Parquet.
    api.build_index(spark, _cfg(**{"input.path": paths[0], "index.path": index, "index.set_layout": "parquet"}))
    assert _format(index) == 2  # releases that read format 2 still open it
    api.run(spark, _append_cfg(paths[1], index, tmp_path / "out1"))
    assert _layout(index) == ["parquet", "files"] and _format(index) == 3
    api.run(spark, _append_cfg(paths[2], index, tmp_path / "out2", **{"index.set_layout": "parquet"}))
    assert _layout(index) == ["parquet", "files", "parquet"] and _format(index) == 3
    for name in ("mixed", "compacted"):
        (tmp_path / name).mkdir()
    frames.assert_index_is_a_full_run(spark, index, rows, tmp_path / "mixed", _cfg())
    api.compact_index(spark, index)
    assert _layout(index) == ["files"]
    frames.assert_index_is_a_full_run(spark, index, rows, tmp_path / "compacted", _cfg())
    # One part, rewritten when it is not in the layout asked for, and left alone when it is.
    assert api.compact_index(spark, index, "parquet").part is not None and _layout(index) == ["parquet"]
    assert _format(index) == 2
    (tmp_path / "parquet").mkdir()
    frames.assert_index_is_a_full_run(spark, index, rows, tmp_path / "parquet", _cfg())
    assert api.compact_index(spark, index, "parquet").part is None
    assert api.compact_index(spark, index).part is not None and _layout(index) == ["files"] and _format(index) == 3
    assert api.compact_index(spark, index, "files").part is None
    with pytest.raises(ConfigError, match="set_layout must be one of"):
        api.compact_index(spark, index, "Files")


def test_an_index_of_set_files_opened_at_a_uri_is_refused_before_any_work(spark, tmp_path):
    from neardup_spark.archive.index import IndexError_
    from . import oracles

    paths = oracles.split_into_nights(pd.read_json(api.SAMPLE, lines=True), tmp_path, seed=5)
    index = tmp_path / "index"
    api.build_index(spark, _cfg(**{"input.path": paths[0], "index.path": str(index)}))
    before = sorted(p.name for p in index.rglob("*"))
    with pytest.raises(IndexError_, match="keeps its shingle sets in files read by position"):
        api.run(spark, _append_cfg(paths[1], f"file://{index}", tmp_path / "out"))
    with pytest.raises(IndexError_, match="keeps its shingle sets in files read by position"):
        api.compact_index(spark, f"file://{index}", "parquet")
    assert sorted(p.name for p in index.rglob("*")) == before and not (tmp_path / "out").exists()


def test_set_files_on_a_hadoop_filesystem_are_refused_before_any_work(spark, tmp_path):
    from neardup_spark.archive.index import IndexError_

    cfg = _cfg(**{"input.path": str(api.SAMPLE), "index.path": f"file://{tmp_path}/index",
                  "index.set_layout": "files"})
    with pytest.raises(IndexError_, match="set_layout = 'files' needs a local or mounted"):
        api.build_index(spark, cfg)
    assert not list((tmp_path / "index").glob("manifests/*"))


@pytest.mark.compat
def test_short_reads_of_a_mount_are_read_on(tmp_path, monkeypatch):
    rng = np.random.default_rng(11)
    sets = _sets(rng, 400)
    table = _written(tmp_path, [[pa.RecordBatch.from_arrays([pa.array(range(400), pa.int64()),
                                                             pa.array(sets, pa.binary())], names=[_IDS, C.SHINGLES])]])
    real = os.pread
    monkeypatch.setattr(setfiles.os, "pread", lambda fd, n, at: real(fd, min(n, 97), at))  # a FUSE mount's reads
    assert _read(table.take(pa.array(rng.permutation(400))), 128) == dict(enumerate(sets))
