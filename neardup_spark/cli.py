"""`neardup` command line: run, calibrate, evaluate, index, params, inspect, report, generate.

A thin shell over `neardup_spark.api`: the flags come from the option table in
`flags` (which also says the config key each sets), config files load first (left
to right) and flags override them, `api.preflight` refuses what it can before the
JVM starts, and every command is one `api` call and the printing of its result.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Sequence

from neardup_spark import flags
from neardup_spark.config import Config, load_config
from neardup_spark.errors import NeardupError, io_failure
from neardup_spark.runtime.progress import progress_to
from neardup_spark.terminal import printable
from neardup_spark.version import __version__


def _add(parser: argparse.ArgumentParser, command: flags.Command) -> None:
    groups = {name: parser.add_mutually_exclusive_group(required=required)
              for name, required in command.groups.items()}
    for option in command.options:
        target = groups[option.group] if option.group else parser
        target.add_argument(option.name, help=option.help, **option.settings)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="neardup", description="Near-duplicate documents on Spark.")
    parser.add_argument("--version", action="version", version=f"neardup-spark {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    subs = {(): sub}
    for path, command in flags.COMMANDS.items():
        p = subs[path[:-1]].add_parser(path[-1], help=command.help)
        _add(p, command)
        if not command.options and len(path) == 1 and any(k[:1] == path and len(k) > 1 for k in flags.COMMANDS):
            subs[path] = p.add_subparsers(dest=f"{path[0]}_command", required=True)
    return parser


def _command(args: argparse.Namespace) -> tuple[str, ...]:
    sub = getattr(args, f"{args.command}_command", None)
    return (args.command, sub) if sub else (args.command,)


def _overrides(args: argparse.Namespace) -> dict:
    return flags.overrides(_command(args), vars(args))


def config_files(args: argparse.Namespace) -> list[str]:
    """The preset (if any), then the --config files, in the order they apply."""
    return flags.config_files(vars(args))


def config_from_args(args: argparse.Namespace) -> Config:
    overrides = _overrides(args)
    files = config_files(args)
    if "spark.conf" in overrides:
        base = load_config(*files)
        overrides["spark.conf"] = {**base.spark.conf, **overrides["spark.conf"]}
    return load_config(*files, overrides=overrides)


def _shown(args: argparse.Namespace):
    """Progress lines on stderr while the command works, unless --quiet."""
    return nullcontext() if getattr(args, "quiet", False) else progress_to(sys.stderr)


def _print_report(args: argparse.Namespace, report) -> None:
    """The summary (default), the report as JSON (--json), or nothing (--quiet)."""
    if args.json:
        print(report.to_json(), end="")
    elif not args.quiet:
        print(report.summary())


def _print(args: argparse.Namespace, result, text) -> int:
    print(json.dumps(result, indent=2, default=str) if args.json else text(result))
    return 0


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
    from neardup_spark import api

    cfg = config_from_args(args)
    api.preflight(cfg)  # before the JVM starts
    with _shown(args), api.command_session(cfg) as spark:
        report = api.append(spark, cfg) if cfg.index.append else api.run(spark, cfg)
    for note in loud_advice(report):
        print(f"neardup: warning: {note}", file=sys.stderr)
    _print_report(args, report)
    return 0


def _cmd_params(args: argparse.Namespace) -> int:
    from neardup_spark import api

    cfg = config_from_args(args)
    print(json.dumps(api.params(cfg, args.step), indent=2) if args.json else api.params_text(cfg, args.step))
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from neardup_spark import api

    if args.labels:  # scoring a labelled file needs no Spark
        return _print(args, api.score_labels(args.labels), api.labels_text)
    cfg = config_from_args(args)
    api.preflight(cfg, job="read")
    if args.sample_for_labelling is not None:
        if not args.output:
            raise NeardupError("--sample-for-labelling needs --output FILE.csv")
        span = _jaccard_range(args.range)
        with _shown(args), api.command_session(cfg) as spark:
            frame = api.labelling_sample(api.read(spark, cfg), cfg, n=args.sample_for_labelling, jaccard_range=span,
                                         seed=args.sample_seed, text_chars=args.text_chars)
        return _print(args, api.write_labelling_sample(frame, args.output), api.labelling_text)
    if args.plots:
        api.require_matplotlib()
    with _shown(args), api.command_session(cfg) as spark:
        result = api.calibrate(api.read(spark, cfg), cfg, pairs=args.pairs, seed=args.sample_seed,
                               margin=args.margin, floor=args.floor)
    report = result.report
    if args.plots:
        report["plots"] = api.calibration_plots(result, args.plots)
    return _print(args, report, api.calibration_text)


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from neardup_spark import api

    cfg = config_from_args(args)
    api.preflight(cfg, job="read")
    api.clusters_of_run(args.clusters)
    with api.command_session(cfg) as spark:
        result = api.evaluate_run(spark, cfg, args.clusters, args.labels_col, args.edit_col)
    return _print(args, result, api.evaluation_text)


def _cmd_index(args: argparse.Namespace) -> int:
    from neardup_spark import api

    cfg = config_from_args(args)
    if args.index_command == "export":
        out = cfg.output
        api.preflight(cfg, job="export")
        with api.command_session(cfg) as spark:
            n = api.export(spark, cfg.index.path, out.path, out.mode, table=out.table, table_format=out.table_format)
        print(f"wrote the current clusters of {n} archived documents to {api.clusters_written_to(out.path, out.table)}")
        return 0
    if args.index_command == "compact":
        with api.command_session(cfg) as spark:
            done = api.compact_index(spark, cfg.index.path, cfg.index.set_layout)
        if done.part is None:
            print(f"the index at {cfg.index.path} has one part already (version {done.version}): nothing to do")
        else:
            print(f"compacted {len(done.parts_replaced)} parts into {done.part}: version {done.version_before} -> "
                  f"{done.version}, {done.documents} documents; `neardup index vacuum` removes the replaced parts")
        return 0
    if args.index_command == "vacuum":
        with api.command_session(cfg) as spark:
            done = api.vacuum_index(spark, cfg.index.path, args.retain_days, args.dry_run)
        verb = "would remove" if args.dry_run else "removed"
        print(f"{verb} {len(done.removed)} parts, kept only the batch results of {len(done.trimmed)}; "
              f"{len(done.kept)} unlisted parts are younger than {args.retain_days:g} days and stay")
        if done.set_files:
            print(f"{verb} {len(done.set_files)} set files of listed parts that no document names "
                  "(left by failed task attempts)")
        for part in done.removed:
            print(f"  {verb} {part}")
        return 0
    api.preflight(cfg, job="build")
    with _shown(args), api.command_session(cfg) as spark:
        report = api.build_index(spark, cfg, args.output)
    _print_report(args, report)
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    from neardup_spark import api

    path = api.generate(args.output, args.docs, fmt=args.format, seed=args.seed, dup_share=args.dup_share,
                        shards=args.shards, workers=args.workers)
    print(f"wrote {args.docs} documents to {path}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from neardup_spark.api import SAMPLE

    argv = ["run", "--input", str(SAMPLE), "--format", "jsonl", "--preset", "local", "--output", args.output,
            "--metadata-cols", "source,published_at", *(["--overwrite"] if args.overwrite else []),
            *(["--json"] if args.json else []), *(["--quiet"] if args.quiet else [])]
    return main(argv)


def _cmd_inspect(args: argparse.Namespace) -> int:
    from neardup_spark import api

    cfg = config_from_args(args)
    api.require_finished(args.run_output)
    span = _jaccard_range(args.jaccard_range, "--jaccard-range", low=0.0)
    with api.command_session(cfg) as spark:
        frames = api.inspect_clusters(spark, args.run_output, doc=args.doc, cluster=args.cluster, sample=args.sample,
                                      jaccard_range=span, seed=args.sample_seed, max_members=args.max_members)
    if args.json:
        print(json.dumps({"clusters": [api.cluster_json(f) for f in frames]}, indent=2, default=str))
    elif not frames:
        print("no near pairs in that Jaccard range")
    else:
        print("\n\n".join(api.cluster_text(f) for f in frames))
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from neardup_spark import api

    cfg = config_from_args(args)
    api.require_finished(args.run_output)
    target = Path(args.html)
    if not target.parent.is_dir():
        raise NeardupError(f"cannot write {args.html}: {target.parent} is not a directory")
    with api.command_session(cfg) as spark:
        html = api.review_page(spark, args.run_output, per_stratum=args.per_stratum)
    target.write_text(html, encoding="utf-8")
    print(f"wrote {target} ({target.stat().st_size / 1024:.0f} KiB); open it in a browser")
    return 0


def _cmd_job_file(args: argparse.Namespace) -> int:
    print(Path(__file__).with_name("__main__.py"))
    return 0


COMMANDS = {
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


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
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
    from neardup_spark.api import save_trace

    what, path, todo = failure
    if path is None:  # the JVM did not say: the places this command writes
        named = [p for p in (getattr(args, "output", None), getattr(args, "index", None)) if p]
        path = " or ".join(named) if named else None
    where = f" at {path}" if path else ""
    return (f"{what}{where}: {todo}, then run the same command again (outputs and index versions are published "
            f"whole or not at all; {save_trace(exc)})")


def job() -> None:
    """The entry point of a Databricks Python wheel task (`neardup-job`): the task's parameters
    are the command line, and a failing command fails the task (SystemExit with its code)
    instead of returning a code nobody reads."""
    code = main(sys.argv[1:])
    if code:
        sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
