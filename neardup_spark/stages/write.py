"""Stage 9, write: clusters/, pairs/, deduplicated/ (Parquet) and report.json.

`deduplicated/` holds the keepers' *original* input rows, every column as
read, so downstream jobs see the data they gave us, minus the duplicates.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession

from neardup_spark.config import Config
from neardup_spark.errors import NeardupError, writing
from neardup_spark.runtime import paths
from neardup_spark.runtime.parallel import run_all
from neardup_spark.runtime import publish
from neardup_spark.runtime.publish import MARKER, Publication
from neardup_spark.runtime.storage import OWN_PREFIX, verify_written, writer_mode
from neardup_spark.runtime.tables import check_tables, save_tables, table_names

if TYPE_CHECKING:  # pragma: no cover
    from neardup_spark.stages.pipeline import DedupResult

def check_paths(cfg: Config, master: str = "", spark: SparkSession | None = None, may_exist: bool = False) -> None:
    """Before any work: the input names something, and the output is free (see
    `check_output_free`)."""
    if cfg.input.format != "table" and cfg.input.path:
        paths.require_matches(input_matches(cfg, master, spark), cfg.input.path, cfg.input.format)
    check_output_free(cfg, master, spark, may_exist)


def check_output_free(cfg: Config, master: str = "", spark: SparkSession | None = None,
                      may_exist: bool = False) -> None:
    """Refuse, before any work, an output that exists (unless overwrite, or `may_exist`),
    cannot be created (a file in the way, no write permission), or overlaps the input
    (globs expanded, symlinks followed): a later run over the input would read the
    outputs, or an overwrite would delete the input.

    With a session the paths are resolved through its Hadoop FileSystem (fs.defaultFS
    applies); without one only local paths are checked: file: URIs, and paths without a
    scheme when `master` is local."""
    out = cfg.output.path
    dst = _where(spark, out, master) if out else None
    if dst is None:
        return
    if cfg.output.mode == "errorifexists" and not may_exist and _holds_something(spark, dst):
        raise output_exists(out)
    if dst.scheme == "file":
        _check_creatable(out, Path(str(dst.path)))
    check_input_apart(cfg, dst, master, spark)


def check_input_apart(cfg: Config, dst: paths.Location, master: str = "", spark: SparkSession | None = None) -> None:
    """The output at dst overlaps no input of the run (see `runtime.paths.check_apart`)."""
    inp = cfg.input.path
    if cfg.input.format == "table" or not inp:
        return
    found = input_matches(cfg, master, spark)
    if found:
        paths.check_apart(dst, WRITTEN, found, paths.has_glob(inp), cfg.output.path, inp)


def input_matches(cfg: Config, master: str = "", spark: SparkSession | None = None) -> list[paths.Location] | None:
    """Every place cfg.input.path names (None where that cannot be told yet: a remote
    path before the session starts)."""
    inp = cfg.input.path
    if paths.hadoop(spark) is not None:
        return paths.matches(spark, inp)
    if inp.startswith("file:") or (paths.is_local_path(inp) and master.startswith("local")):
        return [paths.location(str(p)) for p in paths.local_matches(inp)]
    return None


def _where(spark: SparkSession | None, path: str, master: str) -> paths.Location | None:
    if paths.hadoop(spark) is not None:
        return paths.qualified(spark, path)
    if path.startswith("file:") or (paths.is_local_path(path) and master.startswith("local")):
        return paths.location(paths.local_path(path))
    return None


def output_holds_something(spark: SparkSession, out: str) -> bool:
    """The output (through the session's filesystem) is a file or a directory with something
    in it but what runs of ours leave behind."""
    where = _where(spark, out, "local")
    return where is not None and _holds_something(spark, where)


def finished_report(spark: SparkSession, out: str) -> dict | None:
    """The report a finished run left in `out`, or None. For a command about to write `out`:
    a publication a stopped run left there is completed first (`runtime.publish.settle`)."""
    publish.settle(spark, out)
    store = publish.output_store(spark, out)
    if store is not None:
        text = store.read_text("report.json")
    else:  # Spark Connect and a remote output: report/, a one-line text table
        try:
            line = spark.read.text(f"{out.rstrip('/')}/{publish.REPORT_DIR}").first()
        except Exception:  # noqa: BLE001 - no report yet
            return None
        text = line[0] if line is not None else None
    try:
        report = json.loads(text) if text else None
    except ValueError:
        return None
    return None if publish.pending_note(report) else report


def _holds_something(spark: SparkSession | None, where: paths.Location) -> bool:
    """A file, or a directory with anything in it but what runs of ours leave behind
    (staging, probe and checkpoint directories); the marker of a stopped publication
    counts (an output is on its way there)."""
    if where.scheme == "file":
        local = str(where.path)
        if not os.path.exists(local):
            return False
        return not os.path.isdir(local) or any(_counts(n) for n in os.listdir(local))
    vm, conf = paths.hadoop(spark)
    hpath = vm.org.apache.hadoop.fs.Path(str(where))
    fs = hpath.getFileSystem(conf)
    if not fs.exists(hpath):
        return False
    if not fs.getFileStatus(hpath).isDirectory():
        return True
    return any(_counts(str(s.getPath().getName())) for s in fs.listStatus(hpath))


def _counts(name: str) -> bool:
    return not name.startswith(OWN_PREFIX) or name == MARKER


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


# What a run writes under its output (plots are files beside them).
WRITTEN = (*publish.OUTPUT_NAMES, publish.REPORT_DIR, publish.REPORT)


def output_exists(out: str) -> NeardupError:
    return NeardupError(f"output {out!r} already exists; pass --overwrite (output.mode = 'overwrite') to replace it")


def parquet_writes(tables: dict[str, DataFrame], root: str, mode: str) -> list:
    """One task per table: write it as Parquet to root/name (run them with `run_all`)."""
    mode = writer_mode(mode)

    def write(df: DataFrame, path: str) -> None:
        try:
            df.write.mode(mode).parquet(path)
        except Exception as exc:
            raise writing(exc, path)

    return [lambda name=name, df=df: write(df, f"{root}/{name}") for name, df in tables.items()]


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
                raise output_exists(dst.toString())
            dst_fs.delete(dst, True)
        if not util.copy(src_fs, src, dst_fs, dst, False, conf):
            raise NeardupError(f"could not copy {src.toString()!r} to {dst.toString()!r}")
    return True


def result_tables(result: "DedupResult") -> dict[str, DataFrame]:
    """The output tables of a run: clusters, pairs, deduplicated (and boilerplate when stripping ran)."""
    tables = {"clusters": result.clusters, "pairs": result.pairs, "deduplicated": result.deduplicated}
    if result.boilerplate is not None:
        tables["boilerplate"] = result.boilerplate.coalesce(1)
    return tables


def write_tables(spark: SparkSession, result: "DedupResult", pub: Publication) -> None:
    """The run's tables written where `pub` stages them, their row counts read back and checked;
    `pub.commit` publishes them (see `runtime.publish`)."""
    root = pub.tables_root().rstrip("/")
    run_all(parquet_writes(result_tables(result), root, "error" if pub.store is not None else pub.mode),
            session=spark)
    verify_written(spark, root, written_rows(result))


def write_outputs(spark: SparkSession, result: "DedupResult", cfg: Config, pub: Publication | None) -> dict[str, str] | None:
    """The run's tables where cfg.output says: catalog tables (output.table; returns their
    names, each saved after `pub` withdrew the old report), else Parquet staged by `pub`
    (`write_tables`; returns None)."""
    out = cfg.output
    if out.table:
        tables = result_tables(result)
        if pub is not None:
            pub.withdraw(tables=list(table_names(out.table, tables).values()))
        return save_tables(spark, tables, out.table, out.table_format, out.mode, written_rows(result))
    write_tables(spark, result, pub)
    return None


def check_table_output(spark: SparkSession, cfg: Config, names=None, may_exist: bool = False) -> None:
    """Before any work, with output.table: its tables (by default a run's, see `result_tables`)
    can be written (see `runtime.tables.check_tables`)."""
    out = cfg.output
    if out.table:
        if names is None:
            names = ("clusters", "pairs", "deduplicated") + (("boilerplate",) if cfg.boilerplate.enabled else ())
        check_tables(spark, out.table, out.table_format, names, out.mode, may_exist)


def written_rows(result: "DedupResult") -> dict[str, int]:
    """The rows each table of `write_tables` holds, from the run's own counts."""
    counts = result.report["counts"]
    rows = {"clusters": counts["documents"], "pairs": counts["verified_pairs"] + counts["exact_duplicates"],
            "deduplicated": counts["clusters"]}
    if result.boilerplate is not None:
        rows["boilerplate"] = result.report["boilerplate"]["lines"]
    return rows
