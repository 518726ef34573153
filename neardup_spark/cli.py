"""`neardup` command line: run, calibrate, evaluate, index, params, generate. A thin layer over the library.

Config files load first (left to right), then command-line values override
them; everything is validated in `config` before Spark starts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Sequence

from neardup_spark.config import Config, load_config, require_io_paths
from neardup_spark.errors import NeardupError, io_failure
from neardup_spark.runtime.progress import current_progress, progress_to
from neardup_spark.runtime.tables import table_name
from neardup_spark.runtime.terminal import printable
from neardup_spark.version import __version__

SAMPLE = Path(__file__).parent / "data" / "sample.jsonl.gz"


def _add_input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", help="path (file or directory) or table name")
    p.add_argument("--format", choices=["parquet", "jsonl", "json", "table", "delta"],
                   help="input format; jsonl and json both read JSON Lines (one object a line, .gz too)")
    p.add_argument("--id-col")
    p.add_argument("--text-col")
    p.add_argument("--strip-boilerplate", action="store_true", default=None,
                   help="remove lines shared by many documents before shingling (boilerplate.enabled)")
    p.add_argument("--boilerplate-min-docs", type=int, help="documents a line must be in to be boilerplate")


def _add_shingle_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--method", choices=["minhash", "simhash"], help="match.method (default minhash)")
    p.add_argument("--hamming-distance", type=int, help="SimHash: duplicates within this many bits (default 3)")
    p.add_argument("--simhash-bits", type=int, choices=[64, 128], help="SimHash fingerprint size (default 64)")
    p.add_argument("--simhash-weighting", choices=["none", "tf"],
                   help="SimHash: each distinct shingle counts once (none, default) or as often as it occurs (tf)")
    p.add_argument("--mode", choices=["jaccard", "containment"], help="match.mode (default jaccard)")
    p.add_argument("--containment-threshold", type=float, help="containment mode: |A n B| / |A| needed (default 0.8)")
    p.add_argument("--seed", type=int, help="MinHash seed (minhash.seed)")
    p.add_argument("--shingle-unit", choices=["auto", "word", "char"])
    p.add_argument("--k", type=int, help="shingle size in words (or characters)")


def _add_keeper_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--keeper-rules", help="comma-separated: earliest, source_priority, longest, smallest_id")
    p.add_argument("--source-priority", help="comma-separated sources, most preferred first")


def _add_spark_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", help="Spark master, e.g. local[2]; default: spark-submit's, else local[*]")
    p.add_argument("--remote", help="Spark Connect server, sc://host:port (default: $SPARK_REMOTE); "
                                    "the package is shipped to it")
    p.add_argument("--shuffle-partitions", type=int)
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting")


PRESETS = Path(__file__).parent / "presets"


def _add_param_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", choices=sorted(f.stem for f in PRESETS.glob("*.toml")),
                   help="settings shipped with the package: local (one machine) or cluster (spark-submit); "
                        "--config files apply after it")
    p.add_argument("--config", action="append", default=[], help="TOML config file (repeatable; later wins)")
    p.add_argument("--threshold", type=float, help="Jaccard a verified pair needs (verify.threshold)")
    p.add_argument("--num-perm", type=int, help="MinHash permutations (minhash.num_perm)")
    p.add_argument("--bands", type=int, help="pin LSH bands (with --rows)")
    p.add_argument("--rows", type=int, help="pin LSH rows per band (with --bands)")


def _add_output_options(p: argparse.ArgumentParser) -> None:
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print the report as one JSON object instead of a summary")
    shown.add_argument("--quiet", action="store_true", help="print nothing but errors and warnings (no summary, "
                                                            "no progress)")


def _add_table_options(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--output-table", metavar="CATALOG.SCHEMA.PREFIX",
                   help=f"write {what} as catalog tables PREFIX_clusters, ... instead of files (output.table)")
    p.add_argument("--table-format", metavar="FORMAT",
                   help="the tables' format (delta, iceberg, parquet...; default: the catalog's own)")


def _shown(args: argparse.Namespace):
    """Progress lines on stderr while the command works, unless --quiet."""
    return nullcontext() if getattr(args, "quiet", False) else progress_to(sys.stderr)


def _print_report(args: argparse.Namespace, report) -> None:
    """The summary (default), the report as JSON (--json), or nothing (--quiet)."""
    if args.json:
        print(report.to_json(), end="")
    elif not args.quiet:
        print(report.summary())


def _add_linkage_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--linkage", choices=["components", "keeper"],
                   help="keeper (default): every removed document is verified against its own keeper (no chains); "
                        "components: connected components of verified pairs (A~B~C in one cluster)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="neardup", description="Near-duplicate documents on Spark.")
    parser.add_argument("--version", action="version", version=f"neardup-spark {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="deduplicate an input and write clusters, pairs and keepers")
    _add_input_options(run)
    run.add_argument("--metadata-cols", help="comma-separated columns to carry through")
    run.add_argument("--output", help="output directory")
    run.add_argument("--overwrite", action="store_true", help="replace an existing output")
    _add_table_options(run, "clusters, pairs and deduplicated")
    _add_param_options(run)
    _add_shingle_options(run)
    _add_keeper_options(run)
    run.add_argument("--backend", choices=["dataframe", "graphframes"], help="connected components backend")
    _add_linkage_option(run)
    run.add_argument("--plots", action="store_true", help="also write PNG plots next to report.json (needs matplotlib)")
    run.add_argument("--index", help="archive index directory (with --append)")
    run.add_argument("--append", action="store_true", default=None,
                     help="check the batch against the index and itself, then append it (index.append)")
    run.add_argument("--sticky-keeper", action="store_true", default=None,
                     help="never replace an archived keeper with a newcomer (index.sticky_keeper)")
    run.add_argument("--replace", action="store_true", default=None,
                     help="an archived id with new text replaces the old text instead of failing (index.replace)")
    _add_spark_options(run)
    _add_output_options(run)

    cal = sub.add_parser("calibrate", help="set the threshold from your data: random pairs, or labelled pairs")
    _add_input_options(cal)
    _add_param_options(cal)
    _add_shingle_options(cal)
    cal.add_argument("--pairs", type=int, default=5000, help="random pairs to sample (default 5000)")
    cal.add_argument("--sample-seed", type=int, default=1, help="seed of the random samples")
    cal.add_argument("--margin", type=float, default=0.05, help="recommended threshold >= p99 + margin (default 0.05)")
    cal.add_argument("--floor", type=float, default=0.3, help="never recommend a threshold below this (default 0.3)")
    cal.add_argument("--plots", metavar="DIR", help="write the S-curve and Jaccard histogram PNGs into DIR")
    cal.add_argument("--sample-for-labelling", type=int, metavar="N", help="write N candidate pairs to label (CSV)")
    cal.add_argument("--output", help="the CSV file --sample-for-labelling writes")
    cal.add_argument("--range", default="0.3,1.0", help="Jaccard range of the labelling sample (default 0.3,1.0)")
    cal.add_argument("--text-chars", type=int, default=600, help="characters of each text in the CSV")
    cal.add_argument("--labels", metavar="FILE", help="score a labelled CSV: precision/recall per threshold")
    cal.add_argument("--json", action="store_true", help="print one JSON object")
    _add_spark_options(cal)

    ev = sub.add_parser("evaluate", help="score a run's clusters against labelled groups")
    ev.add_argument("--input", required=True, help="the labelled documents (same formats as run)")
    ev.add_argument("--format", choices=["parquet", "jsonl", "json", "table", "delta"])
    ev.add_argument("--id-col")
    ev.add_argument("--labels-col", required=True, help="documents with the same value are duplicates")
    ev.add_argument("--edit-col", help="also score recall per edit type (its 'original' rows are the reference)")
    ev.add_argument("--clusters", required=True, help="a run's output directory (or its clusters/ table)")
    ev.add_argument("--config", action="append", default=[], help="TOML config file (repeatable; later wins)")
    ev.add_argument("--json", action="store_true", help="print one JSON object")
    _add_spark_options(ev)

    params = sub.add_parser("params", help="print the LSH (bands, rows) choice and its S-curve")
    _add_param_options(params)
    params.add_argument("--mode", choices=["jaccard", "containment"], help="match.mode (default jaccard)")
    params.add_argument("--containment-threshold", type=float,
                        help="containment mode: |A n B| / |A| needed (default 0.8)")
    params.add_argument("--step", type=float, default=0.05, help="S-curve table step")
    params.add_argument("--json", action="store_true", help="print JSON instead of a table")

    index = sub.add_parser("index", help="build, export, compact or vacuum the archive index of nightly batches")
    isub = index.add_subparsers(dest="index_command", required=True)
    build = isub.add_parser("build", help="run the pipeline over the archive and write its index")
    _add_input_options(build)
    build.add_argument("--metadata-cols", help="comma-separated columns to carry through")
    build.add_argument("--index", required=True, help="directory for the index (must not hold one)")
    build.add_argument("--output", help="also write the run's tables and report here")
    build.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    _add_table_options(build, "the run's tables")
    _add_output_options(build)
    _add_param_options(build)
    _add_shingle_options(build)
    _add_keeper_options(build)
    _add_linkage_option(build)
    _add_spark_options(build)
    exp = isub.add_parser("export", help="write the index's current clusters/ (a run's clusters schema)")
    exp.add_argument("--index", required=True)
    exp.add_argument("--output", help="directory for clusters/ (or --output-table)")
    exp.add_argument("--overwrite", action="store_true", help="replace an existing output")
    _add_table_options(exp, "the clusters")
    exp.add_argument("--config", action="append", default=[], help="TOML config file (repeatable; later wins)")
    _add_spark_options(exp)
    comp = isub.add_parser("compact", help="rewrite the index as one part with the same assignments "
                                           "(the replaced parts stay until vacuum)")
    comp.add_argument("--index", required=True)
    comp.add_argument("--config", action="append", default=[], help="TOML config file (repeatable; later wins)")
    _add_spark_options(comp)
    vac = isub.add_parser("vacuum", help="remove replaced and orphaned parts that no reader needs")
    vac.add_argument("--index", required=True)
    vac.add_argument("--retain-days", type=float, default=7.0,
                     help="keep what was replaced or written less than this long ago (default 7; keep it above "
                          "the longest append, whose part is not committed until its end)")
    vac.add_argument("--dry-run", action="store_true", help="list what would go, remove nothing")
    vac.add_argument("--config", action="append", default=[], help="TOML config file (repeatable; later wins)")
    _add_spark_options(vac)

    demo = sub.add_parser("demo", help="run on the bundled 1,000-document sample (local preset): a first try")
    demo.add_argument("--output", required=True, help="output directory")
    demo.add_argument("--overwrite", action="store_true", help="replace an existing output")
    _add_output_options(demo)

    sub.add_parser("job-file", help="print the path of the entry file for spark-submit")

    ins = sub.add_parser("inspect", help="show what a run merged: clusters against their keepers, word by word")
    ins.add_argument("run_output", metavar="OUT", help="a finished run's output directory")
    which = ins.add_mutually_exclusive_group(required=True)
    which.add_argument("--doc", metavar="ID", help="the cluster of this document")
    which.add_argument("--cluster", metavar="ID", help="this cluster")
    which.add_argument("--sample", type=int, metavar="N", help="N clusters drawn across Jaccard strata")
    ins.add_argument("--jaccard-range", default="0,1", help="with --sample: the pairs' Jaccard range (default 0,1)")
    ins.add_argument("--max-members", type=int, default=20, help="members shown per cluster besides the keeper")
    ins.add_argument("--sample-seed", type=int, default=1)
    ins.add_argument("--json", action="store_true", help="print one JSON object")
    ins.add_argument("--config", action="append", default=[], help="TOML config file (Spark settings)")
    _add_spark_options(ins)

    rep = sub.add_parser("report", help="write a run's review page: one self-contained HTML file")
    rep.add_argument("run_output", metavar="OUT", help="a finished run's output directory")
    rep.add_argument("--html", required=True, metavar="FILE", help="the HTML file to write")
    rep.add_argument("--per-stratum", type=int, default=3, help="sampled pairs per Jaccard stratum (default 3)")
    rep.add_argument("--config", action="append", default=[], help="TOML config file (Spark settings)")
    _add_spark_options(rep)

    gen = sub.add_parser("generate", help="write a labelled corpus with the seven controlled edits")
    gen.add_argument("--docs", type=int, default=10_000)
    gen.add_argument("--output", required=True)
    gen.add_argument("--format", choices=["parquet", "jsonl"], default="parquet")
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--dup-share", type=float, default=0.5)
    gen.add_argument("--shards", type=int, default=1,
                     help="write in this many independent pieces (one vocabulary and footer set): for 10M and"
                          " more documents; restartable, a second run finishes what a killed one left")
    gen.add_argument("--workers", type=int, default=1, help="processes writing shards at once")
    return parser


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    get = lambda name: getattr(args, name, None)  # noqa: E731
    conf = {}
    for item in get("conf") or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise NeardupError(f"--conf takes KEY=VALUE, got {item!r}")
        conf[key] = value
    out = {
        "input.path": get("input"),
        "input.format": get("format"),
        "input.id_col": get("id_col"),
        "input.text_col": get("text_col"),
        "input.metadata_cols": get("metadata_cols"),
        "output.path": get("output") if get("command") in ("run", "index") else None,
        "index.path": get("index"),
        "index.append": get("append"),
        "index.sticky_keeper": get("sticky_keeper"),
        "index.replace": get("replace"),
        "output.mode": "overwrite" if get("overwrite") else None,
        "output.table": get("output_table"),
        "output.table_format": get("table_format"),
        "output.plots": True if get("plots") is True else None,
        "boilerplate.enabled": get("strip_boilerplate"),
        "boilerplate.min_docs": get("boilerplate_min_docs"),
        "verify.threshold": get("threshold"),
        "minhash.num_perm": get("num_perm"),
        "minhash.seed": get("seed"),
        "lsh.bands": get("bands"),
        "lsh.rows": get("rows"),
        "shingle.unit": get("shingle_unit"),
        "match.method": get("method"),
        "match.mode": get("mode"),
        "match.containment_threshold": get("containment_threshold"),
        "simhash.hamming_distance": get("hamming_distance"),
        "simhash.bits": get("simhash_bits"),
        "simhash.weighting": get("simhash_weighting"),
        "shingle.k": get("k"),
        "cluster.backend": get("backend"),
        "cluster.linkage": get("linkage"),
        "keeper.rules": get("keeper_rules"),
        "keeper.source_priority": get("source_priority"),
        "spark.master": get("master"),
        "spark.remote": get("remote"),
        "spark.shuffle_partitions": get("shuffle_partitions"),
    }
    if (get("bands") is None) != (get("rows") is None):
        raise NeardupError("--bands and --rows go together: give both or neither")
    if conf:
        out["spark.conf"] = conf
    return {k: v for k, v in out.items() if v is not None}


def config_files(args: argparse.Namespace) -> list[str]:
    """The preset (if any), then the --config files, in the order they apply."""
    preset = getattr(args, "preset", None)
    return [*([str(PRESETS / f"{preset}.toml")] if preset else []), *getattr(args, "config", [])]


def config_from_args(args: argparse.Namespace) -> Config:
    overrides = _overrides(args)
    files = config_files(args)
    if "spark.conf" in overrides:
        base = load_config(*files)
        overrides["spark.conf"] = {**base.spark.conf, **overrides["spark.conf"]}
    return load_config(*files, overrides=overrides)


def _cmd_params(args: argparse.Namespace) -> int:
    from neardup_spark.kernels.lsh import advice, format_report, s_curve
    from neardup_spark.plan import resolve

    cfg = config_from_args(args)
    plan = resolve(cfg)
    if plan.matcher.kind == "containment":  # size classes of their own; the Jaccard bands are not used
        return _containment_params(plan, args.json)
    lsh = plan.lsh
    if args.json:
        out = lsh.as_dict()
        out["advice"] = advice(lsh, cfg.lsh.far_fraction, cfg.lsh.max_far_probability)
        out["s_curve"] = [[s, round(p, 6)] for s, p in s_curve(lsh.bands, lsh.rows, args.step)]
        print(json.dumps(out, indent=2))
    else:
        print(format_report(lsh, cfg.lsh.far_fraction, cfg.lsh.max_far_probability, args.step))
    return 0


def _containment_params(plan, as_json: bool) -> int:
    from neardup_spark.kernels import containment

    cfg = plan.cfg
    classes, t, perm = list(plan.matcher.classes), cfg.match.containment_threshold, cfg.minhash.num_perm
    notes = plan.advice  # what a run with this config reports
    if as_json:
        print(json.dumps({"mode": "containment", "containment_threshold": t, "num_perm": perm,
                          "size_classes": [c.as_dict() for c in classes], "advice": notes}, indent=2))
    else:
        print(containment.format_report(classes, t, perm, notes))
    return 0


def _in_session(cfg: Config, work, preload: str = ""):
    """work(spark) in the active session, or in one built from cfg.spark and stopped after.

    `preload` (a module) is imported while the JVM starts: the pipeline's
    imports (pandas, pyarrow) then cost no wall time."""
    import importlib
    import threading

    from neardup_spark.runtime.session import input_bytes_of, owned_session, remote_of

    size = input_bytes_of(cfg.input)
    loader = threading.Thread(target=importlib.import_module, args=(preload,), daemon=True) if preload else None
    if loader is not None:
        loader.start()
    shown = current_progress()
    start = time.perf_counter()
    if shown is not None:
        shown.line("neardup: starting Spark ...")
    with owned_session(cfg.spark, size) as spark:
        if loader is not None:
            loader.join()
        if shown is not None:
            shown.line(f"neardup: Spark {spark.version} ready in {time.perf_counter() - start:.1f} s")
        if cfg.output.table and not remote_of(cfg.spark):  # the session ends with this command
            from neardup_spark.runtime.tables import require_kept

            require_kept(spark, cfg.output.table)
        return work(spark)


# Below this catch probability at the threshold, the advice goes to stderr too.
LOUD_CATCH = 0.5


def loud_advice(report: dict) -> list[str]:
    """The report's advice worth a line on stderr (a --quiet run shows no report): all
    of it for pinned bands x rows, else only for a catch below LOUD_CATCH. The default
    choice's trade-off at low thresholds (0.683 at 0.3) stays in the report."""
    lsh, notes = report.get("lsh") or {}, report.get("advice") or []
    if lsh.get("mode") == "containment":  # a size class that misses most pairs, or pinned bands it ignores
        weak = any(c.get("p_candidate_at_floor", 1.0) < LOUD_CATCH for c in lsh.get("size_classes", []))
        pinned = bool(((report.get("config") or {}).get("lsh") or {}).get("bands"))
        return notes if weak or pinned else []
    weak = lsh.get("p_candidate_at_threshold", 1.0) < LOUD_CATCH
    notes = [n for n in notes if not n.endswith("Nothing to change.")]  # a run's figures that need no action
    return notes if notes and (weak or not lsh.get("chosen_from_threshold", True)) else []


def _cmd_run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    require_io_paths(cfg)  # before the JVM starts
    _check_local_input(cfg)
    _check_output(cfg)
    if cfg.output.plots:
        from neardup_spark.tools.figures import check_can_plot

        check_can_plot(cfg.output.path)  # before the JVM starts

    def work(spark):
        from neardup_spark.api import run

        return run(spark, cfg)

    with _shown(args):
        report = _in_session(cfg, work, preload="neardup_spark.api")
    for note in loud_advice(report):
        print(f"neardup: warning: {note}", file=sys.stderr)
    _print_report(args, report)
    return 0


def _check_local_input(cfg: Config) -> None:
    """A local input path or glob that names nothing is reported before Spark starts
    (and prints its traces). Remote paths are checked once the session is up."""
    from neardup_spark.runtime.paths import require_matches
    from neardup_spark.runtime.session import planned_master
    from neardup_spark.stages.write import input_matches

    if cfg.input.format == "table":
        return
    require_matches(input_matches(cfg, planned_master(cfg.spark)), cfg.input.path, cfg.input.format)


def _check_output(cfg: Config) -> None:
    """An output that exists (without overwrite), cannot be written or overlaps the input
    is reported before Spark starts."""
    from neardup_spark.runtime.session import planned_master
    from neardup_spark.stages.write import check_output_free

    # A nightly batch may repair the output a killed run of it left (see archive.nightly._output_free).
    check_output_free(cfg, planned_master(cfg.spark), may_exist=bool(cfg.index.append))


def _jaccard_range(text: str, flag: str = "--range", low: float | None = None) -> tuple[float, float]:
    """LO,HI with 0 < LO < HI <= 1 (or LO >= `low` when given)."""
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise NeardupError(f"{flag} takes LO,HI (e.g. 0.3,1.0); got {text!r}") from None
    if not (lo > 0.0 if low is None else lo >= low) or not lo < hi <= 1.0:
        bound = "0 < LO" if low is None else f"{low} <= LO"
        raise NeardupError(f"{flag} needs {bound} < HI <= 1; got {text!r}")
    return lo, hi


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from neardup_spark.tools import calibrate as cal

    if args.labels:  # scoring a labelled file needs no Spark
        import pandas as pd

        try:
            labelled = pd.read_csv(args.labels, dtype={cal.LABEL: str}, keep_default_na=False)
        except (OSError, ValueError) as exc:
            raise NeardupError(f"cannot read labels file {args.labels!r}: {exc}") from None
        scores = cal.score_labels(labelled)
        print(json.dumps(scores, indent=2) if args.json else cal.format_labels(scores))
        return 0
    cfg = config_from_args(args)
    if not cfg.input.path:
        raise NeardupError("input.path is required (--input)")
    _check_local_input(cfg)
    from neardup_spark.stages.read import read_input

    if args.sample_for_labelling is not None:
        if not args.output:
            raise NeardupError("--sample-for-labelling needs --output FILE.csv")
        lo, hi = _jaccard_range(args.range)
        n = args.sample_for_labelling
        with _shown(args):
            frame = _in_session(
                cfg, lambda spark: cal.labelling_sample(read_input(spark, cfg), cfg, n, lo, hi,
                                                        seed=args.sample_seed, text_chars=args.text_chars)
            )
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(args.output, index=False)
        summary = {"output": args.output, "pairs": len(frame), "per_stratum": cal.strata_summary(frame)}
        print(json.dumps(summary, indent=2) if args.json else cal.format_strata(summary))
        return 0
    if args.plots:
        from neardup_spark.tools.plots import require_matplotlib

        require_matplotlib()
    with _shown(args):
        result = _in_session(
            cfg, lambda spark: cal.calibrate(read_input(spark, cfg), cfg, pairs=args.pairs, seed=args.sample_seed,
                                             margin=args.margin, floor=args.floor)
        )
    report = result.report
    if args.plots:
        report["plots"] = [str(p) for p in cal.write_plots(result, args.plots)]
    print(json.dumps(report, indent=2) if args.json else cal.format_report(report))
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    _check_local_input(cfg)
    from neardup_spark.runtime.publish import MARKER, pending

    run_output = args.clusters.rstrip("/")
    clusters_path = run_output
    if Path(run_output, "clusters").is_dir() or Path(run_output, MARKER).is_file():
        clusters_path = f"{run_output}/clusters"
    elif not Path(clusters_path).exists() and ":" not in clusters_path.split("/")[0]:
        raise NeardupError(f"no clusters at {args.clusters!r}: give a run's output directory or its clusters/ table")
    from neardup_spark.tools.evaluate import score
    from neardup_spark.stages.read import read_input

    def work(spark):
        raw = read_input(spark, cfg)
        wanted = [cfg.input.id_col, args.labels_col, *([args.edit_col] if args.edit_col else [])]
        missing = [c for c in wanted if c not in raw.columns]
        if missing:
            raise NeardupError(f"the labelled input has no column(s) {', '.join(missing)}; it has {', '.join(raw.columns)}")
        labels = raw.select(raw[cfg.input.id_col].alias("doc_id"), *wanted[1:])
        if clusters_path != run_output:
            interrupted = pending(spark, run_output)  # a stopped run's publication: not whole yet
            if interrupted:
                raise NeardupError(f"{run_output}: {interrupted}")
        clusters = spark.read.parquet(clusters_path)
        return score(clusters, labels, label_col=args.labels_col, edit_col=args.edit_col)

    result = _in_session(cfg, work)
    print(json.dumps(result, indent=2) if args.json else _format_scores(result))
    return 0


def _format_scores(result: dict) -> str:
    p = result["pairs"]
    lines = [
        f"documents          {result['documents']}",
        f"pair precision     {p['precision']:.4f}  ({p['correct_pairs']} of {p['predicted_pairs']} predicted pairs)",
        f"pair recall        {p['recall']:.4f}  ({p['correct_pairs']} of {p['true_pairs']} true pairs)",
        f"pair F1            {p['f1']:.4f}",
        f"adjusted Rand      {result['adjusted_rand_index']:.4f}",
    ]
    if result.get("by_edit"):
        lines.append("per edit: recall (copies in their original's cluster), false merges (with other groups)")
    for edit, row in sorted(result.get("by_edit", {}).items()):
        recall = "   -  " if row["recall"] is None else f"{row['recall']:.4f}"
        lines.append(f"  {edit:<22} recall {recall}  ({row['found']}/{row['copies']})  "
                     f"false merges {row['false_merges']}")
    return "\n".join(lines)


def _cmd_index(args: argparse.Namespace) -> int:
    from neardup_spark import api

    cfg = config_from_args(args)
    if args.index_command == "export":
        out = cfg.output
        if bool(out.path) == bool(out.table):
            raise NeardupError("index export needs --output DIR or --output-table PREFIX (one of them)")
        if out.path:
            _check_output(cfg)
        n = _in_session(cfg, lambda spark: api.export(spark, cfg.index.path, out.path, out.mode, table=out.table,
                                                       table_format=out.table_format))
        where = table_name(out.table, "clusters") if out.table else f"{out.path.rstrip('/')}/clusters"
        print(f"wrote the current clusters of {n} archived documents to {where}")
        return 0
    if args.index_command == "compact":
        done = _in_session(cfg, lambda spark: api.compact_index(spark, cfg.index.path, cfg.index.set_layout))
        if done.part is None:
            print(f"the index at {cfg.index.path} has one part already (version {done.version}): nothing to do")
        else:
            print(f"compacted {len(done.parts_replaced)} parts into {done.part}: version {done.version_before} -> "
                  f"{done.version}, {done.documents} documents; `neardup index vacuum` removes the replaced parts")
        return 0
    if args.index_command == "vacuum":
        done = _in_session(cfg, lambda spark: api.vacuum_index(spark, cfg.index.path, args.retain_days,
                                                               args.dry_run))
        verb = "would remove" if args.dry_run else "removed"
        print(f"{verb} {len(done.removed)} parts, kept only the batch results of {len(done.trimmed)}; "
              f"{len(done.kept)} unlisted parts are younger than {args.retain_days:g} days and stay")
        if done.set_files:
            print(f"{verb} {len(done.set_files)} set files of listed parts that no document names "
                  "(left by failed task attempts)")
        for part in done.removed:
            print(f"  {verb} {part}")
        return 0
    if not cfg.input.path:
        raise NeardupError("input.path is required (--input)")
    _check_local_input(cfg)
    output = args.output
    if output:
        _check_output(cfg)
    with _shown(args):
        report = _in_session(cfg, lambda spark: api.build_index(spark, cfg, output))
    _print_report(args, report)
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    from neardup_spark.tools.corpus import CorpusSpec, write, write_sharded

    spec = CorpusSpec(n_docs=args.docs, seed=args.seed, dup_share=args.dup_share)
    try:
        if args.shards == 1 and args.workers == 1:
            path = write(spec, args.output, args.format)
        else:
            path = write_sharded(spec, args.output, args.shards, args.format, args.workers,
                                 log=lambda line: print(line, file=sys.stderr, flush=True))
    except ValueError as e:
        raise NeardupError(str(e)) from None
    print(f"wrote {args.docs} documents to {path}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    argv = ["run", "--input", str(SAMPLE), "--format", "jsonl", "--preset", "local", "--output", args.output,
            "--metadata-cols", "source,published_at", *(["--overwrite"] if args.overwrite else []),
            *(["--json"] if args.json else []), *(["--quiet"] if args.quiet else [])]
    return main(argv)


def _require_finished(output: str) -> None:
    """A local run output holds report.json, checked before the JVM starts (a stopped run's
    publication is said as such)."""
    from neardup_spark.runtime.paths import local_file
    from neardup_spark.runtime.publish import pending

    here = local_file(output)
    if here is not None and not (here / "report.json").is_file():
        note = pending(None, str(here))
        raise NeardupError(f"{output}: {note}" if note else f"{output} holds no finished run (no report.json)")


def _cmd_inspect(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    _require_finished(args.run_output)
    if args.sample is not None and args.sample < 1:
        raise NeardupError(f"--sample takes a positive number; got {args.sample}")
    if args.max_members < 0:
        raise NeardupError(f"--max-members takes a number >= 0; got {args.max_members}")
    lo, hi = _jaccard_range(args.jaccard_range, "--jaccard-range", low=0.0)

    def work(spark):
        from neardup_spark.tools import inspect as ins

        out = ins.open_output(spark, args.run_output)
        if args.doc is not None:
            wanted = [ins.cluster_of(spark, out, args.doc)]
        elif args.cluster is not None:
            wanted = [args.cluster]
        else:
            wanted = ins.sample_clusters(spark, out, args.sample, lo, hi, seed=args.sample_seed)
        return [ins.members(spark, out, c, args.max_members) for c in wanted]

    frames = _in_session(cfg, work)
    if args.json:
        shown = [{**{k: (v.item() if hasattr(v, "item") else v) for k, v in f.attrs.items()},
                  "members": json.loads(f.to_json(orient="records"))} for f in frames]
        print(json.dumps({"clusters": shown}, indent=2, default=str))
        return 0
    from neardup_spark.tools.inspect import format_cluster

    if not frames:
        print("no near pairs in that Jaccard range")
        return 0
    print("\n\n".join(format_cluster(f) for f in frames))
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    _require_finished(args.run_output)
    target = Path(args.html)
    if not target.parent.is_dir():
        raise NeardupError(f"cannot write {args.html}: {target.parent} is not a directory")

    def work(spark):
        from neardup_spark.tools.review import page

        return page(spark, args.run_output, per_stratum=args.per_stratum)

    target.write_text(_in_session(cfg, work), encoding="utf-8")
    print(f"wrote {target} ({target.stat().st_size / 1024:.0f} KiB); open it in a browser")
    return 0


def _cmd_job_file(args: argparse.Namespace) -> int:
    print(Path(__file__).with_name("__main__.py"))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    commands = {
        "demo": _cmd_demo,
        "job-file": _cmd_job_file,
        "run": _cmd_run,
        "calibrate": _cmd_calibrate,
        "evaluate": _cmd_evaluate,
        "params": _cmd_params,
        "index": _cmd_index,
        "generate": _cmd_generate,
        "inspect": _cmd_inspect,
        "report": _cmd_report,
    }
    try:
        return commands[args.command](args)
    except NeardupError as exc:
        print(f"neardup: error: {printable(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - storage failures become one line; anything else stays a trace
        failure = io_failure(exc)
        if failure is None:
            raise
        print(f"neardup: error: {printable(_io_line(args, failure, exc))}", file=sys.stderr)
        return 2


def _io_line(args: argparse.Namespace, failure: tuple[str, str | None, str], exc: BaseException) -> str:
    """One line for a storage failure: what happened, where, what to do, and where the trace went."""
    what, path, todo = failure
    if path is None:  # the JVM did not say: the places this command writes
        named = [p for p in (getattr(args, "output", None), getattr(args, "index", None)) if p]
        path = " or ".join(named) if named else None
    where = f" at {path}" if path else ""
    return (f"{what}{where}: {todo}, then run the same command again (outputs and index versions are published "
            f"whole or not at all; {_trace_to_log(exc)})")


def _trace_to_log(exc: BaseException) -> str:
    """The full trace written to a log file; says where (or why not)."""
    import tempfile
    import traceback

    from neardup_spark.runtime.session import log_dir

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


def job() -> None:
    """The entry point of a Databricks Python wheel task (`neardup-job`): the task's parameters
    are the command line, and a failing command fails the task (SystemExit with its code)
    instead of returning a code nobody reads."""
    code = main(sys.argv[1:])
    if code:
        sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
