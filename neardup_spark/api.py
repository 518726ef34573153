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

import json
import os
import sys
import tempfile
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Sequence

import pandas as pd
from pyspark.sql import DataFrame, SparkSession

from neardup_spark.archive import append as _append
from neardup_spark.archive import build as _build
from neardup_spark.archive import housekeeping
from neardup_spark.archive.housekeeping import Compaction, Vacuum
from neardup_spark.config import SET_LAYOUTS, Config, ConfigError, require_io_paths
from neardup_spark.errors import NeardupError, unshipped
from neardup_spark.plan import resolve
from neardup_spark.runtime.paths import local_file, local_path, require_matches
from neardup_spark.runtime.progress import Progress, current_progress, progress_to
from neardup_spark.runtime.publish import MARKER, pending, publishing
from neardup_spark.runtime.report import Report
from neardup_spark.runtime.runner import Runner
from neardup_spark.runtime.jvm import log_dir
from neardup_spark.runtime.masters import is_local_master, master_of, planned_master, remote_of
from neardup_spark.runtime.session import build_session, owned_session
from neardup_spark.runtime.shipping import package_zip
from neardup_spark.runtime.sizing import input_bytes_of, sized
from neardup_spark.runtime.storage import PROBE_PREFIX, checkpoint_dir, probe_executor_writes
from neardup_spark.runtime.tables import require_kept, table_name
from neardup_spark.stages import pipeline
from neardup_spark.stages.components import check_backend
from neardup_spark.stages.pipeline import DedupResult
from neardup_spark.stages.read import read_input
from neardup_spark.stages.write import (check_output_free, check_table_output, input_matches,
                                        result_tables, write_outputs)
from neardup_spark.tools import calibrate as _calibrate
from neardup_spark.tools import corpus as _corpus
from neardup_spark.tools import corpus_files as _corpus_files
from neardup_spark.tools import evaluate as _evaluate
from neardup_spark.tools import figures
from neardup_spark.tools import inspect as _inspect
from neardup_spark.tools import review as _review
from neardup_spark.tools.plots import require_matplotlib

SAMPLE = Path(__file__).parent / "data" / "sample.jsonl.gz"  # 1,000 labelled news stories (JSON Lines)


def options(
    config: Config | None = None,
    *,
    id_col: str | None = None,
    text_col: str | None = None,
    threshold: float | None = None,
    keep: str | Sequence[str] | None = None,
    method: str | None = None,
    mode: str | None = None,
    scratch: str | None = None,
) -> Config:
    """`config` (default: the built-in defaults) with the keyword settings applied and validated.

    threshold: the similarity a pair needs: exact Jaccard (verify.threshold),
    or in containment mode the containment (match.containment_threshold).
    SimHash matches by Hamming distance (simhash.hamming_distance); there a
    threshold is the extra Jaccard check and needs simhash.verify_jaccard.
    keep: a keeper rule ("earliest", "source_priority", "longest",
    "smallest_id") or several, applied in order.
    scratch: a schema for intermediate tables instead of caching (cluster.scratch), where the
    session cannot persist or checkpoint (Databricks serverless).
    """
    cfg = config if config is not None else Config()
    if config is not None and not isinstance(config, Config):
        raise ConfigError(f"config must be a neardup_spark.Config; got {type(config).__name__}")
    overrides: dict[str, Any] = {"input.id_col": id_col, "input.text_col": text_col,
                                 "match.method": method, "match.mode": mode, "cluster.scratch": scratch}
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
def package_on_workers() -> Iterator[None]:
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
    `options`. The result's DataFrames are persisted (with `scratch`, read from
    tables in that schema): call `result.unpersist()` when done. Nothing is written.
    """
    with package_on_workers(), sized(df.sparkSession):
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
    preflight(cfg, spark)
    with package_on_workers():
        return _run(spark, cfg, plan)


JOBS = ("run", "build", "export", "read")


def preflight(cfg: Config, spark: SparkSession | None = None, *, job: str = "run") -> None:
    """Refuse now what would fail after the work: the one set of checks before a job.

    job: "run" (input to output), "build" (an index from cfg.input, and cfg.output.path when
    given), "export" (to cfg.output.path or cfg.output.table) or "read" (cfg.input only).
    Without a session (the CLI calls it before the JVM starts) the paths are checked where
    they are local; with one (`run` calls it) every path is, through the session's
    filesystem, and so are the table output, the backend and the executors' writes."""
    if job not in JOBS:
        raise ConfigError(f"job must be one of {', '.join(JOBS)}; got {job!r}")
    if job == "run":
        require_io_paths(cfg)
    elif job == "export":
        if bool(cfg.output.path) == bool(cfg.output.table):
            raise NeardupError("index export needs --output DIR or --output-table PREFIX (one of them)")
    elif not cfg.input.path:
        raise NeardupError("input.path is required (--input)")
    master = master_of(spark) if spark is not None else planned_master(cfg.spark)
    if job != "export" and cfg.input.format != "table":
        require_matches(input_matches(cfg, master, spark), cfg.input.path, cfg.input.format)
    if cfg.output.path and job != "read":
        # A nightly batch may repair the output a killed run of it left (see archive.append._output_free).
        check_output_free(cfg, master, spark, may_exist=bool(cfg.index.append))
    if cfg.output.plots and job == "run":
        figures.check_can_plot(cfg.output.path)
    if spark is None or job != "run":
        return
    check_table_output(spark, cfg)
    check_backend(spark, cfg)
    if not is_local_master(master):
        probe_executor_writes(spark, cfg.output.path)


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
        writing = Runner(spark, scratch=cfg.cluster.scratch)
        with result._runner.released_on_error(), \
                publishing(spark, cfg.output.path, cfg.output.mode, leftovers=(PROBE_PREFIX,)) as pub:
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
    with package_on_workers(), sized(spark, input_bytes_of(cfg.input)):
        return _build.build(spark, resolve(cfg), output)


def append(spark: SparkSession, cfg: Config) -> Report:
    """cfg.input as tonight's batch: checked against the index at cfg.index.path, written to
    cfg.output.path and appended to the index in one commit."""
    with package_on_workers(), sized(spark, input_bytes_of(cfg.input)):
        return _append.append(spark, resolve(cfg))


def export(spark: SparkSession, index_path: str, output: str = "", mode: str = "errorifexists", *,
           table: str = "", table_format: str = "") -> int:
    """The current clusters of every archived document written to `output`/clusters, or with
    `table` ("catalog.schema.prefix") to the table `<prefix>_clusters`; returns their number."""
    return _build.export(spark, index_path, output, mode, table=table, table_format=table_format)


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
              margin: float = 0.05, floor: float = 0.3, top_lines: int = 10, **settings: Any) -> _calibrate.Calibration:
    """The random-pair Jaccard distribution of `df`, and the threshold and (bands, rows) it suggests
    (with the `top_lines` most frequent lines, estimated, for setting boilerplate.min_docs)."""
    with sized(df.sparkSession):
        return _calibrate.calibrate(df, options(config, **settings), pairs=pairs, seed=seed, margin=margin,
                                    floor=floor, top_lines=top_lines)


def evaluate(clusters: DataFrame, labels: DataFrame, **kwargs: Any) -> dict:
    """A run's clusters scored against labelled groups: pair precision, recall, F1, adjusted Rand
    (see `tools.evaluate.score` for the keywords)."""
    return _evaluate.score(clusters, labels, **kwargs)


# -- sessions ---------------------------------------------------------------------------------------------------


def session(config: Config | None = None, **spark_settings: Any) -> SparkSession:
    """The active SparkSession (a notebook's, Databricks', spark-submit's), or one built from
    config.spark with `spark_settings` applied (master="local[2]", shuffle_partitions=4,
    remote="sc://host:15002", conf={...}). A session built here stays up: `spark.stop()` ends it."""
    cfg = (config or Config()).with_overrides({f"spark.{k}": v for k, v in spark_settings.items()})
    return SparkSession.getActiveSession() or build_session(cfg.spark)


def ship(spark: SparkSession) -> None:
    """Ship this package to a Spark Connect session's Python workers (they run its UDFs), once per
    session: for a notebook whose cluster does not have it installed. The `neardup` command
    does this itself for an sc:// server."""
    spark.addArtifacts(package_zip(), pyfile=True)


@contextmanager
def command_session(cfg: Config) -> Iterator[SparkSession]:
    """The session one command runs in: the active one, or one built from cfg.spark (its JVM
    sized for cfg.input) and stopped when the command ends. The progress stream, if any,
    says when Spark is ready."""
    shown = current_progress()
    start = time.perf_counter()
    if shown is not None:
        shown.line("neardup: starting Spark ...")
    with owned_session(cfg.spark, input_bytes_of(cfg.input)) as spark:
        if shown is not None:
            shown.line(f"neardup: Spark {spark.version} ready in {time.perf_counter() - start:.1f} s")
        if cfg.output.table and not remote_of(cfg.spark):  # the session ends with this command
            require_kept(spark, cfg.output.table)
        yield spark


def save_trace(exc: BaseException) -> str:
    """Write exc's full trace to a log file (Spark's log folder, else the temp folder); says where, or why not."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    for folder in (log_dir(), Path(tempfile.gettempdir())):
        if folder is None:
            continue
        target = folder / f"neardup-error-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
        try:
            target.write_text(text, encoding="utf-8")
            return f"the full trace is in {target}"
        except OSError:
            continue
    return "the trace could not be saved: the disk is full or not writable"


# -- parameters, calibration, evaluation ------------------------------------------------------------------------


def params(cfg: Config, step: float = 0.05) -> dict:
    """The LSH choice for cfg (what `neardup params --json` prints): bands x rows, its S-curve
    in `step`s and its advice; in containment mode the size classes instead."""
    from neardup_spark.kernels.lsh import advice, s_curve

    plan = resolve(cfg)
    if plan.matcher.kind == "containment":  # size classes of their own; the Jaccard bands are not used
        return {"mode": "containment", "containment_threshold": cfg.match.containment_threshold,
                "num_perm": cfg.minhash.num_perm, "size_classes": [c.as_dict() for c in plan.matcher.classes],
                "advice": plan.advice}
    lsh = plan.lsh
    out = lsh.as_dict()
    out["advice"] = advice(lsh, cfg.lsh.far_fraction, cfg.lsh.max_far_probability)
    out["s_curve"] = [[s, round(p, 6)] for s, p in s_curve(lsh.bands, lsh.rows, step)]
    return out


def params_text(cfg: Config, step: float = 0.05) -> str:
    """What `neardup params` prints: the LSH choice and its S-curve as a table."""
    from neardup_spark.kernels import containment
    from neardup_spark.kernels.lsh import format_report

    plan = resolve(cfg)
    if plan.matcher.kind == "containment":
        return containment.format_report(list(plan.matcher.classes), cfg.match.containment_threshold,
                                         cfg.minhash.num_perm, plan.advice)
    return format_report(plan.lsh, cfg.lsh.far_fraction, cfg.lsh.max_far_probability, step)


def calibration_text(report: dict) -> str:
    """What `neardup calibrate` prints for a `calibrate(...).report`."""
    return _calibrate.format_report(report)


def calibration_plots(result: _calibrate.Calibration, directory: str, *, threshold: float | None = None,
                      verified: Sequence[float] = ()) -> list[str]:
    """The S-curve and random-pair Jaccard histogram of a calibration, written as PNGs into
    `directory`: the histogram marks `threshold` (default: the recommended one) and shows the
    `verified` pairs' Jaccards beside the random pairs' when given."""
    require_matplotlib()
    return [str(p) for p in _calibrate.write_plots(result, directory, threshold, verified)]


def labelling_sample(df: DataFrame, config: Config | None = None, *, n: int, jaccard_range=(0.3, 1.0), seed: int = 1,
                     text_chars: int = 600, **settings: Any) -> pd.DataFrame:
    """n candidate pairs of `df` drawn across Jaccard strata, with their texts, for a person to label."""
    lo, hi = jaccard_range
    with sized(df.sparkSession):
        return _calibrate.labelling_sample(df, options(config, **settings), n, lo, hi, seed=seed,
                                           text_chars=text_chars)


def write_labelling_sample(frame: pd.DataFrame, csv_path: str) -> dict:
    """The labelling sample written as CSV; returns what `neardup calibrate --sample-for-labelling` reports."""
    Path(csv_path).parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(csv_path, index=False)
    return {"output": csv_path, "pairs": len(frame), "per_stratum": _calibrate.strata_summary(frame)}


def labelling_text(summary: dict) -> str:
    return _calibrate.format_strata(summary)


def score_labels(csv_path: str) -> dict:
    """A labelled sample (the CSV `labelling_sample` wrote, its label column filled) scored:
    precision, recall and F1 per threshold, and the threshold it recommends. Needs no Spark."""
    try:
        labelled = pd.read_csv(csv_path, dtype={_calibrate.LABEL: str}, keep_default_na=False)
    except (OSError, ValueError) as exc:
        raise NeardupError(f"cannot read labels file {csv_path!r}: {exc}") from None
    return _calibrate.score_labels(labelled)


def labels_text(scores: dict) -> str:
    return _calibrate.format_labels(scores)


def clusters_of_run(run_output: str) -> str:
    """The clusters table of a run: `run_output`/clusters for a run's output directory, else
    `run_output` itself (a clusters/ folder or table). A local path that holds neither is refused."""
    run_output = run_output.rstrip("/")
    if Path(run_output, "clusters").is_dir() or Path(run_output, MARKER).is_file():
        return f"{run_output}/clusters"
    if not Path(run_output).exists() and ":" not in run_output.split("/")[0]:
        raise NeardupError(f"no clusters at {run_output!r}: give a run's output directory or its clusters/ table")
    return run_output


def evaluate_run(spark: SparkSession, cfg: Config, run_output: str, labels_col: str,
                 edit_col: str | None = None) -> dict:
    """The clusters of the run at `run_output` scored against the labelled documents of cfg.input
    (what `neardup evaluate` prints): documents sharing a `labels_col` value are duplicates."""
    clusters_path = clusters_of_run(run_output)
    raw = read_input(spark, cfg)
    wanted = [cfg.input.id_col, labels_col, *([edit_col] if edit_col else [])]
    missing = [c for c in wanted if c not in raw.columns]
    if missing:
        raise NeardupError(f"the labelled input has no column(s) {', '.join(missing)}; it has {', '.join(raw.columns)}")
    labels = raw.select(raw[cfg.input.id_col].alias("doc_id"), *wanted[1:])
    if clusters_path != run_output.rstrip("/"):
        interrupted = pending(spark, run_output.rstrip("/"))  # a stopped run's publication: not whole yet
        if interrupted:
            raise NeardupError(f"{run_output.rstrip('/')}: {interrupted}")
    return _evaluate.score(spark.read.parquet(clusters_path), labels, label_col=labels_col, edit_col=edit_col)


def evaluation_text(result: dict) -> str:
    return _evaluate.format_scores(result)


# -- a finished run: inspect, review ----------------------------------------------------------------------------


def require_finished(output: str) -> None:
    """A local run output holds report.json (a stopped run's publication is said as such).
    Remote outputs are checked when they are opened."""
    here = local_file(output)
    if here is not None and not (here / "report.json").is_file():
        note = pending(None, str(here))
        raise NeardupError(f"{output}: {note}" if note else f"{output} holds no finished run (no report.json)")


def inspect_clusters(spark: SparkSession, output: str, *, doc: Any = None, cluster: Any = None,
                     sample: int | None = None, jaccard_range=(0.0, 1.0), seed: int = 1,
                     max_members: int = _inspect.MAX_MEMBERS) -> list[pd.DataFrame]:
    """Clusters of a finished run, each as `inspect` shows one: that of `doc`, `cluster`, or
    `sample` clusters drawn across the Jaccard strata of their pairs within `jaccard_range`."""
    if sum(x is not None for x in (doc, cluster, sample)) != 1:
        raise ConfigError("inspect_clusters takes one of doc=, cluster= or sample=")
    if sample is not None and sample < 1:
        raise NeardupError(f"--sample takes a positive number; got {sample}")
    if max_members < 0:
        raise NeardupError(f"--max-members takes a number >= 0; got {max_members}")
    out = _inspect.open_output(spark, output)
    if doc is not None:
        wanted = [_inspect.cluster_of(spark, out, doc)]
    elif cluster is not None:
        wanted = [cluster]
    else:
        wanted = _inspect.sample_clusters(spark, out, sample, *jaccard_range, seed=seed)
    return [_inspect.members(spark, out, c, max_members) for c in wanted]


def cluster_text(frame: pd.DataFrame) -> str:
    """An inspected cluster as `neardup inspect` prints it."""
    return _inspect.format_cluster(frame)


def cluster_json(frame: pd.DataFrame) -> dict:
    """An inspected cluster as `neardup inspect --json` prints it."""
    return {**{k: (v.item() if hasattr(v, "item") else v) for k, v in frame.attrs.items()},
            "members": json.loads(frame.to_json(orient="records"))}


# -- the index's housekeeping and the generator -----------------------------------------------------------------


def clusters_written_to(output: str, table: str = "") -> str:
    """Where `export` writes: the table `<table>_clusters`, else `output`/clusters."""
    return table_name(table, "clusters") if table else f"{output.rstrip('/')}/clusters"


def generate(output: str, docs: int = 10_000, *, fmt: str = "parquet", seed: int = 7, dup_share: float = 0.5,
             shards: int = 1, workers: int = 1, log: Callable[[str], None] | None = None, **spec: Any) -> str:
    """A labelled corpus of `docs` stories with the seven controlled edits, written to `output`
    (one file, or `shards` pieces written by `workers` processes); returns where. `spec` sets
    the generator's other fields (words=200, boilerplate_share=0.45, ...: see
    `tools.corpus.CorpusSpec`)."""
    try:
        spec = _corpus.CorpusSpec(n_docs=docs, seed=seed, dup_share=dup_share, **spec)
    except TypeError as e:
        raise NeardupError(f"generate: {e}") from None
    try:
        if shards == 1 and workers == 1:
            return str(_corpus_files.write(spec, output, fmt))
        return str(_corpus_files.write_sharded(spec, output, shards, fmt, workers,
                                               log=log or (lambda line: print(line, file=sys.stderr, flush=True))))
    except ValueError as e:
        raise NeardupError(str(e)) from None
