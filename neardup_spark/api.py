"""The public API: what the CLI, the spark-submit job, the notebooks and the tests call.

    from neardup_spark import deduplicate
    result = deduplicate(df, id_col="url", text_col="body", threshold=0.5, keep="earliest")
    result.deduplicated.write.parquet("dedup/")

The common settings are keyword arguments; a `Config` (`load_config(...)`, or
`Config().with_overrides({...})`) carries the rest. Keyword arguments win over
the config, and the result is validated in one place (`neardup_spark.config`).

`run`, `build_index`, `append` and `export` read and write paths (cfg.input,
cfg.output, cfg.index) in the SparkSession they are given; `deduplicate`,
`calibrate` and `evaluate` take and return DataFrames and write nothing.
"""

from __future__ import annotations

import time
from pathlib import Path
from contextlib import contextmanager
from typing import Any, ContextManager, Iterator, Sequence

import pandas as pd
from pyspark.sql import DataFrame, SparkSession

from neardup_spark.archive import housekeeping, nightly
from neardup_spark.archive.housekeeping import Compaction, Vacuum
from neardup_spark.config import SET_LAYOUTS, Config, ConfigError, require_io_paths
from neardup_spark.errors import NeardupError, unshipped
from neardup_spark.plan import resolve
from neardup_spark.runtime.paths import local_path
from neardup_spark.runtime.progress import Progress, progress_to
from neardup_spark.runtime.report import Report
from neardup_spark.runtime.runner import Runner
from neardup_spark.runtime.session import input_bytes_of, is_local_master, master_of
from neardup_spark.runtime.sizing import sized
from neardup_spark.runtime.publish import publishing
from neardup_spark.runtime.storage import PROBE_PREFIX, checkpoint_dir, probe_executor_writes
from neardup_spark.stages import pipeline
from neardup_spark.stages.components import check_backend
from neardup_spark.stages.pipeline import DedupResult
from neardup_spark.stages.read import read_input
from neardup_spark.stages.write import check_paths, check_table_output, result_tables, write_outputs
from neardup_spark.tools import calibrate as _calibrate
from neardup_spark.tools import evaluate as _evaluate
from neardup_spark.tools import figures
from neardup_spark.tools import inspect as _inspect
from neardup_spark.tools import review as _review

__all__ = ["DedupResult", "Report", "append", "build_index", "calibrate", "deduplicate", "evaluate", "export",
           "inspect", "options", "progress", "read", "review_page", "run"]


def options(
    config: Config | None = None,
    *,
    id_col: str | None = None,
    text_col: str | None = None,
    threshold: float | None = None,
    keep: str | Sequence[str] | None = None,
    method: str | None = None,
    mode: str | None = None,
) -> Config:
    """`config` (default: the built-in defaults) with the keyword settings applied and validated.

    threshold: the similarity a pair needs: exact Jaccard (verify.threshold),
    or in containment mode the containment (match.containment_threshold).
    SimHash matches by Hamming distance (simhash.hamming_distance); there a
    threshold is the extra Jaccard check and needs simhash.verify_jaccard.
    keep: a keeper rule ("earliest", "source_priority", "longest",
    "smallest_id") or several, applied in order.
    """
    cfg = config if config is not None else Config()
    if config is not None and not isinstance(config, Config):
        raise ConfigError(f"config must be a neardup_spark.Config; got {type(config).__name__}")
    overrides: dict[str, Any] = {"input.id_col": id_col, "input.text_col": text_col,
                                 "match.method": method, "match.mode": mode}
    if keep is not None:
        overrides["keeper.rules"] = [keep] if isinstance(keep, str) else list(keep)
    cfg = cfg.with_overrides(overrides)
    if threshold is not None:
        if cfg.match.mode == "containment":
            key = "match.containment_threshold"
        elif cfg.match.method == "simhash" and not cfg.simhash.verify_jaccard:
            raise ConfigError("SimHash matches by Hamming distance: set simhash.hamming_distance in the config, "
                              "or simhash.verify_jaccard=true for threshold to be the extra Jaccard check")
        else:
            key = "verify.threshold"
        cfg = cfg.with_overrides({key: threshold})
    return cfg


@contextmanager
def _package_on_workers() -> Iterator[None]:
    """Workers that cannot import this package fail in their first UDF: say so in one line."""
    try:
        yield
    except NeardupError:
        raise
    except Exception as exc:
        error = unshipped(exc)
        if error is None:
            raise
        raise error from None


def deduplicate(df: DataFrame, config: Config | None = None, **settings: Any) -> DedupResult:
    """Near-duplicates of `df` found, clustered and resolved to one keeper per cluster.

    `df` has an id column and a text column (cfg.input.id_col and text_col,
    or the id_col= and text_col= keywords); the other keywords are those of
    `options`. The result's DataFrames are persisted: call
    `result.unpersist()` when done. Nothing is written.
    """
    with _package_on_workers(), sized(df.sparkSession):
        return pipeline.deduplicate(df, resolve(options(config, **settings)))


def read(spark: SparkSession, config: Config) -> DataFrame:
    """cfg.input read as the pipeline reads it (format, columns, malformed lines refused)."""
    return read_input(spark, config)


def run(spark: SparkSession, cfg: Config) -> Report:
    """Read cfg.input, deduplicate, write cfg.output; returns the report.

    With index.append, the input is a batch checked against the archive
    index and appended to it (see `append`)."""
    if cfg.index.append:
        return append(spark, cfg)
    plan = resolve(cfg)
    require_io_paths(cfg)
    check_paths(cfg, master_of(spark), spark)
    check_table_output(spark, cfg)
    check_backend(spark, cfg)
    if not is_local_master(master_of(spark)):
        probe_executor_writes(spark, cfg.output.path)
    if cfg.output.plots:
        figures.check_can_plot(cfg.output.path)
    with _package_on_workers():
        return _run(spark, cfg, plan)


def _run(spark: SparkSession, cfg: Config, plan) -> Report:
    start = time.perf_counter()
    # The worker daemon starts while the input's schema is read: the sketch stage
    # otherwise waited ~0.5 s for it at 100k documents.
    warming = pipeline.warm_python_workers(spark)
    try:
        raw = read_input(spark, cfg)
    except Exception:
        warming.join(timeout=60)  # see pipeline.checked_documents
        raise
    # The checkpoints stay until the tables are written: a cached frame evicted meanwhile
    # is recomputed from them.
    with checkpoint_dir(spark, cfg, cfg.output.path), sized(spark, input_bytes_of(cfg.input)):
        result = pipeline.deduplicate(raw, plan)
        writing = Runner(spark)
        with publishing(spark, cfg.output.path, cfg.output.mode, leftovers=(PROBE_PREFIX,)) as pub:
            with writing.stage("write"):
                tables = write_outputs(spark, result, cfg, pub)
            plots = None
            if cfg.output.plots:
                with writing.stage("plots"):
                    staged = figures.write_run_plots(result, cfg, pub.local_stage)
                plots = [str(Path(local_path(cfg.output.path)) / Path(p).name) for p in staged]
            result.report = result.report.with_(stage_seconds=writing.seconds, plots=plots, output=cfg.output.path,
                                                tables=tables, wall_seconds=round(time.perf_counter() - start, 3))
            pub.commit(result.report, expect=[] if tables else list(result_tables(result)))
    result.unpersist()
    return result.report


def progress(stream=None, every: float = 30.0) -> ContextManager[Progress]:
    """`with progress():` runs started inside print a line per stage to stderr (or `stream`)
    as it starts and ends, with its time and row counts, and Spark's task counts while a long
    stage runs (in place on a terminal, a line every `every` seconds elsewhere)."""
    return progress_to(stream, every)


def inspect(spark: SparkSession, output: str, *, doc: Any = None, cluster: Any = None,
            max_members: int = _inspect.MAX_MEMBERS) -> pd.DataFrame:
    """One cluster of a finished run's `output` (that of `doc`, or `cluster`) as a pandas frame:
    its keeper and up to max_members other members, each against the keeper (Jaccard,
    containments, a word-level diff). `neardup_spark.tools.inspect.format_cluster` prints it."""
    if (doc is None) == (cluster is None):
        raise ConfigError("inspect takes one of doc= or cluster=")
    out = _inspect.open_output(spark, output)
    return _inspect.members(spark, out, cluster if doc is None else _inspect.cluster_of(spark, out, doc), max_members)


def review_page(spark: SparkSession, output: str, *, per_stratum: int = 3) -> str:
    """The review page of the finished run at `output`: one self-contained HTML string (summary,
    S-curve, Jaccard histograms, cluster sizes, largest clusters, sampled pairs side by side).
    In a Databricks notebook: `displayHTML(review_page(spark, out))`."""
    return _review.page(spark, output, per_stratum=per_stratum)


def build_index(spark: SparkSession, cfg: Config, output: str | None = None) -> Report:
    """A new archive index at cfg.index.path from cfg.input (and, with `output`, a run's tables there)."""
    with _package_on_workers(), sized(spark, input_bytes_of(cfg.input)):
        return nightly.build(spark, resolve(cfg), output)


def append(spark: SparkSession, cfg: Config) -> Report:
    """cfg.input as tonight's batch: checked against the index at cfg.index.path, written to
    cfg.output.path and appended to the index in one commit."""
    with _package_on_workers(), sized(spark, input_bytes_of(cfg.input)):
        return nightly.append(spark, resolve(cfg))


def export(spark: SparkSession, index_path: str, output: str = "", mode: str = "errorifexists", *,
           table: str = "", table_format: str = "") -> int:
    """The current clusters of every archived document written to `output`/clusters, or with
    `table` ("catalog.schema.prefix") to the table `<prefix>_clusters`; returns their number."""
    return nightly.export(spark, index_path, output, mode, table=table, table_format=table_format)


def compact_index(spark: SparkSession, index_path: str, set_layout: str = "auto") -> Compaction:
    """Rewrite the index as one part with the same meaning, its shingle sets kept as
    `set_layout` ("auto", "files" or "parquet": `index.set_layout`) says (see
    `archive.housekeeping`)."""
    if set_layout not in SET_LAYOUTS:
        raise ConfigError(f"set_layout must be one of {', '.join(SET_LAYOUTS)}; got {set_layout!r}")
    with sized(spark):
        return housekeeping.compact(spark, index_path, set_layout)


def vacuum_index(spark: SparkSession | None, index_path: str, retain_days: float = 7.0,
                 dry_run: bool = False) -> Vacuum:
    """Remove the index's replaced and orphaned parts older than `retain_days`."""
    return housekeeping.vacuum(spark, index_path, retain_days, dry_run)


def calibrate(df: DataFrame, config: Config | None = None, *, pairs: int = 5000, seed: int = 1,
              margin: float = 0.05, floor: float = 0.3, **settings: Any) -> _calibrate.Calibration:
    """The random-pair Jaccard distribution of `df`, and the threshold and (bands, rows) it suggests."""
    with sized(df.sparkSession):
        return _calibrate.calibrate(df, options(config, **settings), pairs=pairs, seed=seed, margin=margin,
                                    floor=floor)


def evaluate(clusters: DataFrame, labels: DataFrame, **kwargs: Any) -> dict:
    """A run's clusters scored against labelled groups: pair precision, recall, F1, adjusted Rand
    (see `tools.evaluate.score` for the keywords)."""
    return _evaluate.score(clusters, labels, **kwargs)
