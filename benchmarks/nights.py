"""One night, two sides, one index: alternating whole-process appends of the same batch to
copies of the same archive index. Is the new code (or config) faster at the night?

    python -m benchmarks.nights --index /data/index --batch /data/batch --old /path/to/old/checkout
    python -m benchmarks.nights --index /data/index --batch /data/batch --old . \\
        --old-set index.band_probe=join --label join-vs-scan   # one tree, two settings

Each run appends the batch to a fresh hard-linked copy of the index (`cp -al`: no data is
copied, and a night only ever adds files, so the original stays as it was; the benchmark
checks that it did), with a fresh output, in its own process. Pairs alternate which side
goes first; with --drop-caches (root) the page cache is dropped before every run, so each
night reads the index cold, as a nightly job does. Both sides must give the same clusters.
The ratio is taken within each pair and the median reported, since the machine drifts.
Writes benchmarks/results/nights-<label>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.dataset as ds

from benchmarks import machine, save, sparklog

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CLUSTER_COLUMNS = ["doc_id", "cluster_id", "keeper_id", "status", "in_batch"]


def tree_state(root: Path) -> dict[str, tuple[int, int]]:
    """{relative path: (size, mtime_ns)} of every file under root."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            st = os.stat(os.path.join(dirpath, name))
            out[os.path.relpath(os.path.join(dirpath, name), root)] = (st.st_size, st.st_mtime_ns)
    return out


def linked_copy(index: Path, dest: Path) -> None:
    """dest: the index's directories made anew, its files hard links to the index's."""
    subprocess.run(["rm", "-rf", str(dest)], check=True)
    subprocess.run(["cp", "-al", str(index), str(dest)], check=True)


def drop_caches() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def settings_toml(items: list[str]) -> str:
    """SECTION.KEY=VALUE items as a TOML config file's text (a value that is not a number or a
    boolean is a string)."""
    sections: dict[str, list[str]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        section, dot, name = key.partition(".")
        if not sep or not dot or not section or not name:
            raise SystemExit(f"--old-set and --new-set take SECTION.KEY=VALUE; got {item!r}")
        literal = value if value in ("true", "false") or _number(value) else json.dumps(value)
        sections.setdefault(section, []).append(f"{name} = {literal}")
    return "\n".join(f"[{section}]\n" + "\n".join(lines) + "\n" for section, lines in sections.items())


def _number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def side_configs(base: str, extra: list[str], path: Path) -> list[str]:
    """The side's --config files: the base file (unless 'none'), then its own settings."""
    files = [] if base == "none" else [str(Path(base).resolve())]
    if extra:
        path.write_text(settings_toml(extra))
        files.append(str(path))
    return files


def night(tree: Path, index: Path, batch: Path, fmt: str, out: Path, logs: Path, configs: list[str],
          spark_args: list[str], master: str) -> dict:
    """One append of batch to index as its own process, with tree's code first on the path."""
    subprocess.run(["rm", "-rf", str(out), str(logs)], check=True)
    cmd = [sys.executable, "-m", "neardup_spark.cli", "run", "--input", str(batch), "--format", fmt,
           "--index", str(index), "--append", "--output", str(out), "--master", master, "--quiet", *spark_args,
           *sparklog.event_log_conf(logs)]
    for config in configs:
        cmd += ["--config", config]
    env = {**os.environ, "PYTHONPATH": str(tree), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    proc, wall, rss = sparklog.measured(cmd, tree, env)
    if proc.returncode:
        raise SystemExit(f"{tree}: exit {proc.returncode}\n{' '.join(cmd)}\n{proc.stderr[-4000:]}")
    report = json.loads((out / "report.json").read_text())
    if report.get("replayed"):
        raise SystemExit(f"the night was a replay: the index at {index} already holds this batch")
    costs = sparklog.costs_by_stage(sparklog.newest_log(logs))
    return {"process_seconds": round(wall, 2), "pipeline_seconds": report["wall_seconds"],
            "stage_seconds": report["stage_seconds"],
            "task_seconds": {k: v["task_seconds"] for k, v in costs.items()},
            "peak_rss_mb": round(rss.peak / 2**20), "counts": report["counts"], "work": report.get("work", {})}


def clusters_of(out: Path):
    table = ds.dataset(out / "clusters", format="parquet").to_table(columns=CLUSTER_COLUMNS)
    return table.sort_by("doc_id")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", required=True, help="an archive index on a local path (it is not changed)")
    ap.add_argument("--batch", required=True, help="the night's input, not yet in the index")
    ap.add_argument("--format", default="parquet", help="the batch's input format")
    ap.add_argument("--old", required=True, help="a checkout of the older code (its root)")
    ap.add_argument("--new", default=str(ROOT), help="a checkout of the newer code (default: this one)")
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--config", default=str(ROOT / "conf" / "local.toml"),
                    help="both sides' --config file, or 'none'")
    ap.add_argument("--old-set", nargs="+", action="extend", default=[], metavar="SECTION.KEY=VALUE",
                    help="settings of the old side only, after --config")
    ap.add_argument("--new-set", nargs="+", action="extend", default=[], metavar="SECTION.KEY=VALUE")
    ap.add_argument("--shuffle-partitions", type=int, default=8, help="0: not set (the run sizes it)")
    ap.add_argument("--driver-memory", default="12g", help="both sides' driver heap; empty: not set")
    ap.add_argument("--conf", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                    help="further Spark settings of both sides (e.g. spark.io.compression.codec=zstd)")
    ap.add_argument("--drop-caches", action="store_true", help="drop the page cache before each run (root)")
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "neardup-nights"),
                    help="where the index copies and outputs go: the index's filesystem (hard links)")
    ap.add_argument("--label", default="side-by-side")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    index, batch, work = Path(args.index).resolve(), Path(args.batch).resolve(), Path(args.work).resolve()
    if not (index / "manifest.json").exists():
        raise SystemExit(f"no index at {index} (no manifest.json)")
    work.mkdir(parents=True, exist_ok=True)
    if os.stat(work).st_dev != os.stat(index).st_dev:
        raise SystemExit(f"--work {work} must be on the index's filesystem (hard links)")
    trees = {"old": Path(args.old).resolve(), "new": Path(args.new).resolve()}
    configs = {side: side_configs(args.config, extra, work / f"{side}.toml")
               for side, extra in (("old", args.old_set), ("new", args.new_set))}
    spark_args = ["--shuffle-partitions", str(args.shuffle_partitions)] if args.shuffle_partitions else []
    if args.driver_memory:
        spark_args += ["--conf", f"spark.driver.memory={args.driver_memory}"]
    for item in args.conf:
        spark_args += ["--conf", item]
    before = tree_state(index)
    pairs = []
    for i in range(args.pairs):
        order = ["old", "new"] if i % 2 == 0 else ["new", "old"]
        pair: dict = {}
        for side in order:
            copy = work / f"index-{side}"
            linked_copy(index, copy)
            if args.drop_caches:
                drop_caches()
            pair[side] = night(trees[side], copy, batch, args.format, work / f"out-{side}", work / f"logs-{side}",
                               configs[side], spark_args, args.master)
            print(f"pair {i + 1} {side}: {pair[side]['process_seconds']} s "
                  f"(pipeline {pair[side]['pipeline_seconds']} s)", flush=True)
        if tree_state(index) != before:
            raise SystemExit(f"the index at {index} changed under a copy: its files are not write-once")
        if not clusters_of(work / "out-old").equals(clusters_of(work / "out-new")):
            raise SystemExit("the two sides' nights gave different clusters")
        pair["ratio_new_to_old"] = round(pair["new"]["process_seconds"] / pair["old"]["process_seconds"], 3)
        pairs.append(pair)
    for side in ("old", "new"):
        subprocess.run(["rm", "-rf", str(work / f"index-{side}")], check=True)
    median = lambda side, key: statistics.median(p[side][key] for p in pairs)  # noqa: E731
    stages = sorted({s for p in pairs for side in ("old", "new") for s in p[side]["stage_seconds"]})
    result = {
        "benchmark": "nights", "label": args.label, "machine": machine(), "master": args.master,
        "index": str(index), "batch": str(batch), "drop_caches": args.drop_caches,
        "index_documents": json.loads((index / "manifest.json").read_text()).get("documents"),
        "batch_documents": pairs[0]["new"]["counts"]["documents"],
        "old": str(trees["old"]), "new": str(trees["new"]), "config": args.config,
        "old_set": args.old_set, "new_set": args.new_set, "shuffle_partitions": args.shuffle_partitions,
        "driver_memory": args.driver_memory, "conf": args.conf,
        "median_old_seconds": median("old", "process_seconds"),
        "median_new_seconds": median("new", "process_seconds"),
        "median_ratio_new_to_old": statistics.median(p["ratio_new_to_old"] for p in pairs),
        "median_stage_seconds": {side: {s: statistics.median(p[side]["stage_seconds"].get(s, 0.0) for p in pairs)
                                        for s in stages} for side in ("old", "new")},
        "pairs": pairs,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "pairs"}, indent=2))
    save(result, args.out, f"nights-{args.label}.json")
    return result


if __name__ == "__main__":
    main()
