"""Whole-process runs of two source trees on one generated corpus, alternating: is the new code
slower? Prints the figures and writes benchmarks/results/compare-<docs>-<label>.json.

    python -m benchmarks.compare --old /path/to/old/checkout --docs 100000 --pairs 3
    python -m benchmarks.compare --old . --old-config conf/local.toml --new-config none \
        --label defaults        # one tree: the tuned config file against none at all

Each pair runs both sides once, in alternating order (old first, then new first, ...), the
same command (`neardup run` in local mode, by default with conf/local.toml) and a fresh output
each time; the ratio is taken within each pair and the median reported, since the machine drifts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def _corpus(docs: int, cache: Path) -> Path:
    path = cache / f"corpus-{docs}"
    if not (path / "_DONE").exists():
        from neardup_spark.tools.corpus import CorpusSpec
        from neardup_spark.tools.corpus_files import write

        write(CorpusSpec(n_docs=docs, seed=7), path, "parquet")
        (path / "_DONE").write_text("")
    return path


def _run(tree: Path, corpus: Path, out: Path, master: str, threshold: float, config: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    cmd = [sys.executable, "-m", "neardup_spark.cli", "run", "--input", str(corpus), "--format", "parquet",
           "--output", str(out), "--overwrite", "--master", master, "--threshold", str(threshold), "--quiet"]
    if config != "none":
        cmd += ["--config", config]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=out.parent, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: rc {proc.returncode}\n{proc.stderr[-2000:]}")
    report = json.loads((out / "report.json").read_text())
    return {"wall_seconds": round(wall, 2), "stage_seconds": report["stage_seconds"],
            "clusters": report["counts"]["clusters"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="a checkout of the older code (its root)")
    ap.add_argument("--new", default=str(ROOT), help="a checkout of the newer code (default: this one)")
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--threshold", type=float, default=0.3)
    ap.add_argument("--old-config", default=str(ROOT / "conf" / "local.toml"),
                    help="the old side's --config file, or 'none' for no config at all")
    ap.add_argument("--new-config", default=str(ROOT / "conf" / "local.toml"),
                    help="the new side's --config file, or 'none'")
    ap.add_argument("--label", default="", help="suffix of the results file")
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "neardup-bench"))
    args = ap.parse_args(argv)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    corpus = _corpus(args.docs, cache)
    trees = {"old": Path(args.old).resolve(), "new": Path(args.new).resolve()}
    configs = {"old": args.old_config, "new": args.new_config}
    if configs["old"] != "none":
        configs["old"] = str(Path(configs["old"]).resolve())
    if configs["new"] != "none":
        configs["new"] = str(Path(configs["new"]).resolve())
    rows = []
    for i in range(args.pairs):
        order = ["old", "new"] if i % 2 == 0 else ["new", "old"]
        pair = {}
        for name in order:
            pair[name] = _run(trees[name], corpus, cache / f"out-{name}", args.master, args.threshold,
                              configs[name])
            print(f"pair {i + 1} {name}: {pair[name]['wall_seconds']} s", flush=True)
        if pair["old"]["clusters"] != pair["new"]["clusters"]:
            raise SystemExit(f"the trees disagree: {pair['old']['clusters']} against {pair['new']['clusters']} clusters")
        pair["ratio_new_to_old"] = round(pair["new"]["wall_seconds"] / pair["old"]["wall_seconds"], 3)
        rows.append(pair)
    summary = {
        "docs": args.docs, "master": args.master, "threshold": args.threshold, "pairs": rows,
        "median_old_seconds": round(statistics.median(r["old"]["wall_seconds"] for r in rows), 3),
        "median_new_seconds": round(statistics.median(r["new"]["wall_seconds"] for r in rows), 3),
        "median_ratio_new_to_old": round(statistics.median(r["ratio_new_to_old"] for r in rows), 4),
        "old": str(trees["old"]), "new": str(trees["new"]),
        "old_config": configs["old"], "new_config": configs["new"],
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "pairs"}, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = f"compare-{args.docs}{'-' + args.label if args.label else ''}.json"
    (RESULTS / name).write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
