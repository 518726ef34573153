"""`neardup` command line: run, params, generate. A thin layer over the library.

Config files load first (left to right), then command-line values override
them; everything is validated in `config` before Spark starts.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from . import __version__
from .config import Config, load_config, require_io_paths
from .errors import NeardupError

SAMPLE = Path(__file__).parent / "data" / "sample.jsonl.gz"


def _add_param_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", action="append", default=[], help="TOML config file (repeatable; later wins)")
    p.add_argument("--threshold", type=float, help="Jaccard a verified pair needs (verify.threshold)")
    p.add_argument("--num-perm", type=int, help="MinHash permutations (minhash.num_perm)")
    p.add_argument("--bands", type=int, help="pin LSH bands (with --rows)")
    p.add_argument("--rows", type=int, help="pin LSH rows per band (with --bands)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="neardup", description="Near-duplicate documents on Spark.")
    parser.add_argument("--version", action="version", version=f"neardup-spark {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="deduplicate an input and write clusters, pairs and keepers")
    run.add_argument("--input", help="path (file or directory) or table name")
    run.add_argument("--format", choices=["parquet", "jsonl", "json", "table", "delta"])
    run.add_argument("--id-col")
    run.add_argument("--text-col")
    run.add_argument("--metadata-cols", help="comma-separated columns to carry through")
    run.add_argument("--output", help="output directory")
    run.add_argument("--overwrite", action="store_true", help="replace an existing output")
    _add_param_options(run)
    run.add_argument("--seed", type=int)
    run.add_argument("--shingle-unit", choices=["word", "char"])
    run.add_argument("--k", type=int, help="shingle size in words (or characters)")
    run.add_argument("--backend", choices=["dataframe", "graphframes"], help="connected components backend")
    run.add_argument("--keeper-rules", help="comma-separated: earliest, source_priority, longest, smallest_id")
    run.add_argument("--source-priority", help="comma-separated sources, most preferred first")
    run.add_argument("--master", help="Spark master, e.g. local[2]; default: spark-submit's, else local[*]")
    run.add_argument("--shuffle-partitions", type=int)
    run.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting")
    run.add_argument("--quiet", action="store_true", help="print only the output path, not the report")

    params = sub.add_parser("params", help="print the LSH (bands, rows) choice and its S-curve")
    _add_param_options(params)
    params.add_argument("--step", type=float, default=0.05, help="S-curve table step")
    params.add_argument("--json", action="store_true", help="print JSON instead of a table")

    gen = sub.add_parser("generate", help="write a labelled corpus with the seven controlled edits")
    gen.add_argument("--docs", type=int, default=10_000)
    gen.add_argument("--output", required=True)
    gen.add_argument("--format", choices=["parquet", "jsonl"], default="parquet")
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--dup-share", type=float, default=0.5)
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
        "output.path": get("output"),
        "output.mode": "overwrite" if get("overwrite") else None,
        "verify.threshold": get("threshold"),
        "minhash.num_perm": get("num_perm"),
        "minhash.seed": get("seed"),
        "lsh.bands": get("bands"),
        "lsh.rows": get("rows"),
        "shingle.unit": get("shingle_unit"),
        "shingle.k": get("k"),
        "cluster.backend": get("backend"),
        "keeper.rules": get("keeper_rules"),
        "keeper.source_priority": get("source_priority"),
        "spark.master": get("master"),
        "spark.shuffle_partitions": get("shuffle_partitions"),
    }
    if (get("bands") is None) != (get("rows") is None):
        raise NeardupError("--bands and --rows go together: give both or neither")
    if conf:
        out["spark.conf"] = conf
    return {k: v for k, v in out.items() if v is not None}


def config_from_args(args: argparse.Namespace) -> Config:
    overrides = _overrides(args)
    if "spark.conf" in overrides:
        base = load_config(*args.config)
        overrides["spark.conf"] = {**base.spark.conf, **overrides["spark.conf"]}
    return load_config(*args.config, overrides=overrides)


def _cmd_params(args: argparse.Namespace) -> int:
    from .params import advice, format_report, lsh_params, s_curve

    cfg = config_from_args(args)
    lsh = lsh_params(cfg)
    if args.json:
        out = lsh.as_dict()
        out["advice"] = advice(lsh, cfg.lsh.far_fraction, cfg.lsh.max_far_probability)
        out["s_curve"] = [[s, round(p, 6)] for s, p in s_curve(lsh.bands, lsh.rows, args.step)]
        print(json.dumps(out, indent=2))
    else:
        print(format_report(lsh, cfg.lsh.far_fraction, cfg.lsh.max_far_probability, args.step))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    require_io_paths(cfg)  # before the JVM starts
    _check_local_input(cfg)
    from .pipeline import run
    from .session import build_session

    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    spark = build_session(cfg.spark)
    try:
        report = run(spark, cfg)
    finally:
        if existing is None:  # ours to stop; a notebook's or test's session is not
            spark.stop()
    if args.quiet:
        print(cfg.output.path)
    else:
        print(json.dumps(report, indent=2, default=str))
    return 0


def _check_local_input(cfg: Config) -> None:
    """A missing local path is reported before Spark starts (and prints its traces)."""
    path = cfg.input.path
    if cfg.input.format == "table" or any(ch in path for ch in "*?[{") or ":" in path.split("/")[0]:
        return  # tables, globs and URLs (s3://, hdfs://, file:) are Spark's to resolve
    if not Path(path).exists():
        raise NeardupError(f"cannot read {cfg.input.format} input {path!r}: no such file or directory")


def _cmd_generate(args: argparse.Namespace) -> int:
    from .corpus import CorpusSpec, write

    spec = CorpusSpec(n_docs=args.docs, seed=args.seed, dup_share=args.dup_share)
    path = write(spec, args.output, args.format)
    print(f"wrote {args.docs} documents to {path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    commands = {"run": _cmd_run, "params": _cmd_params, "generate": _cmd_generate}
    try:
        return commands[args.command](args)
    except NeardupError as exc:
        print(f"neardup: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
