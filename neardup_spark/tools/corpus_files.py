"""The corpus of `tools.corpus` written to disk: Parquet files or gzipped JSON Lines, in
one piece (`write`) or in restartable shards written by several processes (`write_sharded`)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from neardup_spark.tools.corpus import CorpusSpec, check_spec, generate, shard_range


def write(spec: CorpusSpec, path: str | Path, fmt: str = "parquet", rows_per_file: int = 50_000) -> Path:
    """Write the corpus as Parquet files or gzipped JSON Lines under `path` (a directory)."""
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    _write_rows(generate(spec), out, fmt, rows_per_file)
    return out


def write_sharded(spec: CorpusSpec, path: str | Path, shards: int, fmt: str = "parquet", workers: int = 1,
                  rows_per_file: int = 50_000, log=None) -> Path:
    """Write a large corpus in `shards` pieces (`generate(spec, shard, shards)`), `workers`
    processes at a time, with memory bounded by one file of rows per worker.

    Restartable: a shard's files are written under path/.shard-K/ and moved into
    path with a path/_shard-K.done marker last; a second call skips finished
    shards and rewrites unfinished ones, so a killed run resumes where it
    stopped. Spark and pyarrow skip the hidden and "_" names when reading path.
    The same spec and shards always give the same corpus."""
    import concurrent.futures as cf

    if shards < 1 or workers < 1:
        raise ValueError(f"shards and workers must be >= 1, got {shards} and {workers}")
    if spec.n_docs < shards:
        raise ValueError(f"{spec.n_docs} documents cannot make {shards} shards")
    check_spec(spec)
    if fmt not in ("parquet", "jsonl"):
        raise ValueError(f"format must be parquet or jsonl, got {fmt!r}")
    if sum(spec.big_clusters) > shard_range(spec.n_docs, 0, shards)[1]:
        raise ValueError(f"big_clusters ({sum(spec.big_clusters)} documents) do not fit in shard 0"
                         f" ({shard_range(spec.n_docs, 0, shards)[1]} documents)")
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    _claim(out, {"spec": _spec_record(spec), "shards": shards, "format": fmt, "rows_per_file": rows_per_file})
    todo = [k for k in range(shards) if not (out / f"_shard-{k}.done").exists()]
    if workers == 1 or len(todo) <= 1:
        for k in todo:
            _write_shard(spec, out, k, shards, fmt, rows_per_file)
            if log:
                log(f"shard {k + 1}/{shards} written")
        return out
    with cf.ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(_write_shard, spec, out, k, shards, fmt, rows_per_file): k for k in todo}
        try:
            for done in cf.as_completed(futures):
                done.result()
                if log:
                    log(f"shard {futures[done] + 1}/{shards} written")
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)  # the shards running finish; none more start
            raise
    return out


def _spec_record(spec: CorpusSpec) -> dict:
    import dataclasses

    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(spec).items()}


def _claim(out: Path, record: dict) -> None:
    """Record what a sharded corpus at `out` is (_shards.json), or refuse to resume one
    written with another spec, shard count or format: its shards would not fit together."""
    import json

    manifest = out / "_shards.json"
    if manifest.exists():
        if json.loads(manifest.read_text()) != record:
            raise ValueError(f"{out} holds a sharded corpus written with other settings ({manifest});"
                             " write to a new directory, or delete it first")
        return
    if any(p for p in out.iterdir() if not p.name.startswith(".")):
        raise ValueError(f"{out} is not empty and holds no sharded corpus: write to a new directory")
    tmp = out / ".shards.json"
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(manifest)


def _write_shard(spec: CorpusSpec, out: Path, shard: int, shards: int, fmt: str, rows_per_file: int) -> None:
    import shutil

    tmp = out / f".shard-{shard}"
    shutil.rmtree(tmp, ignore_errors=True)
    for stale in out.glob(f"part-{shard:04d}-*"):  # moved in by an attempt killed before its marker
        stale.unlink()
    tmp.mkdir()
    names = _write_rows(generate(spec, shard, shards), tmp, fmt, rows_per_file, prefix=f"part-{shard:04d}")
    for name in names:
        (tmp / name).replace(out / name)
    tmp.rmdir()
    (out / f"_shard-{shard}.done").write_text(f"{len(names)} files\n")


def _write_rows(rows: Iterator[dict], out: Path, fmt: str, rows_per_file: int, prefix: str = "part") -> list[str]:
    """Rows into files of rows_per_file rows named prefix-00000.parquet (or .jsonl.gz); their names."""
    import gzip
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    if fmt not in ("parquet", "jsonl"):
        raise ValueError(f"format must be parquet or jsonl, got {fmt!r}")
    batch, names = [], []

    def flush():
        nonlocal batch
        if not batch:
            return
        name = f"{prefix}-{len(names):05d}." + ("parquet" if fmt == "parquet" else "jsonl.gz")
        if fmt == "parquet":
            pq.write_table(pa.Table.from_pylist(batch), out / name)
        else:
            with gzip.open(out / name, "wt", encoding="utf-8") as fh:
                for row in batch:
                    fh.write(json.dumps({**row, "published_at": row["published_at"].isoformat()}) + "\n")
        names.append(name)
        batch = []

    for row in rows:
        batch.append(row)
        if len(batch) >= rows_per_file:
            flush()
    flush()
    return names
