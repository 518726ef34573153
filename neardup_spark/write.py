"""Stage 9, write: clusters/, pairs/, deduplicated/ (Parquet) and report.json.

`deduplicated/` holds the keepers' *original* input rows, every column as
read, so downstream jobs see the data they gave us, minus the duplicates.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from . import columns as C
from .config import Config
from .errors import NeardupError
from .parallel import run_all
from .read import CORRUPT

if TYPE_CHECKING:  # pragma: no cover
    from .pipeline import DedupResult

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_KEEPER = "__neardup_keeper"


# Up to this many ids are broadcast to pick the keepers' rows, so the input
# (with its text) is read once and never shuffled; at 1M documents the
# shuffle join moved 1.7 GB and took most of the write stage.
BROADCAST_IDS = 5_000_000


def keeper_rows(raw: DataFrame, cfg: Config, clusters: DataFrame, n_keepers: int | None = None,
                n_removed: int | None = None) -> DataFrame:
    """The raw input rows whose id is a keeper's (all original columns).

    With the counts known, the smaller id set (keepers, or the removed
    documents for an anti-join) is broadcast when it is small enough.
    """
    raw_id = F.col(cfg.input.id_col)
    if dict(clusters.dtypes)[C.DOC_ID] == "bigint":
        raw_id = raw_id.cast("long")
    cols = [c for c in raw.columns if c != CORRUPT]
    by_removed = n_keepers is not None and n_removed is not None and n_removed < n_keepers
    wanted = ~F.col(C.IS_KEEPER) if by_removed else F.col(C.IS_KEEPER)
    ids = clusters.where(wanted).select(F.col(C.DOC_ID).alias(_KEEPER))
    smaller = n_removed if by_removed else n_keepers
    if smaller is not None and smaller <= BROADCAST_IDS:
        ids = F.broadcast(ids)
    return raw.join(ids, raw_id == F.col(_KEEPER), "left_anti" if by_removed else "left_semi").select(*cols)


def check_output_free(cfg: Config, master: str = "") -> None:
    """Refuse, before any work, to write over an existing local output (unless overwrite).

    On the local file system (a file: path, or any path in local mode, `master`
    local[...]) also refuse an output that cannot be created (a file in the way, no
    write permission) or that overlaps the input: a later run over the input would
    read the outputs, or an overwrite would delete the input."""
    out = cfg.output.path
    if cfg.output.mode == "errorifexists" and is_local_path(out):
        local = _local(out)
        if os.path.exists(local) and (not os.path.isdir(local) or os.listdir(local)):
            raise _exists(out)
    target = local_file(out)
    if target is not None and (out.startswith("file:") or master.startswith("local")):
        _check_creatable(out, target)
        _check_apart(out, target, cfg)


def _check_creatable(out: str, target: Path) -> None:
    """The output directory exists and is writable, or its nearest existing parent is."""
    here = target.absolute()
    while not here.exists() and here != here.parent:
        here = here.parent
    if not here.is_dir():
        what = "is a file" if here == target.absolute() else f"cannot be created: {str(here)!r} is a file"
        raise NeardupError(f"output {out!r} {what}; --output names a directory")
    if not os.access(here, os.W_OK | os.X_OK):
        raise NeardupError(f"output {out!r} cannot be written: no write permission in {str(here)!r}")


_WRITTEN = ("clusters", "pairs", "deduplicated", "boilerplate", "report", "report.json")  # plots are files


def _check_apart(out: str, target: Path, cfg: Config) -> None:
    """The output is not the input, not inside an input directory, and holds the input in
    none of the directories a run writes."""
    source = None if cfg.input.format == "table" else local_file(cfg.input.path)
    if source is None or not source.exists():
        return
    src, dst = source.resolve(), target.resolve()
    inside_input = src.is_dir() and (dst == src or src in dst.parents)
    under_written = any(dst / name == src or dst / name in src.parents for name in _WRITTEN)
    if inside_input or under_written:
        raise NeardupError(f"output {out!r} overlaps input {cfg.input.path!r}: write the output elsewhere")


def _exists(out: str) -> NeardupError:
    return NeardupError(f"output {out!r} already exists; pass --overwrite (output.mode = 'overwrite') to replace it")


def local_path(path: str) -> str:
    """A local output path without its file: scheme."""
    return _local(path)


def _local(path: str) -> str:
    if path.startswith("file://"):
        return path[len("file://") :]
    return path[len("file:") :] if path.startswith("file:") else path


def parquet_writes(tables: dict[str, DataFrame], root: str, mode: str) -> list:
    """One task per table: write it as Parquet to root/name (run them with `run_all`)."""
    return [lambda name=name, df=df: df.write.mode(mode).parquet(f"{root}/{name}") for name, df in tables.items()]


def copy_tables(spark: SparkSession, src_root: str, dst_root: str, names: list[str], mode: str) -> bool:
    """Copy the table directories src_root/name to dst_root/name file by file, with the
    Hadoop FileSystem API of Spark's JVM (any scheme Spark writes to), as `mode` says
    (errorifexists, overwrite). Returns False, copying nothing, where the session has no
    JVM at hand (Spark Connect): read and write the tables with Spark instead.

    A copy is a few listing and stream calls; reading and rewriting the same rows with
    Spark costs two jobs per table."""
    try:
        jvm, conf = spark.sparkContext._jvm, spark.sparkContext._jsc.hadoopConfiguration()
    except Exception:  # Spark Connect: no SparkContext
        return False
    hpath, util = jvm.org.apache.hadoop.fs.Path, jvm.org.apache.hadoop.fs.FileUtil
    for name in names:
        src, dst = hpath(f"{src_root.rstrip('/')}/{name}"), hpath(f"{dst_root.rstrip('/')}/{name}")
        src_fs, dst_fs = src.getFileSystem(conf), dst.getFileSystem(conf)
        if dst_fs.exists(dst):
            if mode != "overwrite":
                raise _exists(dst.toString())
            dst_fs.delete(dst, True)
        if not util.copy(src_fs, src, dst_fs, dst, False, conf):
            raise NeardupError(f"could not copy {src.toString()!r} to {dst.toString()!r}")
    return True


def write_tables(result: "DedupResult", cfg: Config) -> None:
    """Write the Parquet tables under cfg.output.path (boilerplate/ when stripping ran), by concurrent jobs."""
    tables = {"clusters": result.clusters, "pairs": result.pairs, "deduplicated": result.deduplicated}
    if result.boilerplate is not None:
        tables["boilerplate"] = result.boilerplate.coalesce(1)
    run_all(parquet_writes(tables, cfg.output.path.rstrip("/"), cfg.output.mode))


def is_local_path(path: str) -> bool:
    return path.startswith("file:") or not _SCHEME.match(path) or bool(re.match(r"^[a-zA-Z]:[\\/]", path))


def local_file(path: str) -> Path | None:
    """The local file or directory a path names (file: scheme removed); None for
    globs and remote URLs (s3://, hdfs://, dbfs:/...), which are Spark's to resolve."""
    if not path or any(ch in path for ch in "*?[{") or not is_local_path(path):
        return None
    return Path(_local(path))


def write_report(report: dict, out: str, spark: SparkSession) -> None:
    """report.json beside the tables. Remote outputs (s3://, abfss://, dbfs:/...)
    get it as a one-line JSON text file written by Spark under report/."""
    text = json.dumps(report, indent=2, sort_keys=False, default=str)
    if is_local_path(out):
        local = _local(out)
        os.makedirs(local, exist_ok=True)
        with open(os.path.join(local, "report.json"), "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
        return
    line = json.dumps(report, default=str)
    spark.createDataFrame([(line,)], "value string").coalesce(1).write.mode("overwrite").text(
        f"{out.rstrip('/')}/report"
    )
