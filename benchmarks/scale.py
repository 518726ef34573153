"""Whole-process time of `neardup run` on generated corpora of growing size.

    .venv/bin/python -m benchmarks.scale --docs 10000 100000

Each size: the seeded seven-edit corpus is generated once (cached under
--work), then `neardup run` runs as a separate process with --master
local[2] and conf/local.toml, session start included, as a user would
experience it. Prints a table and writes benchmarks/results/scale.json.
Peak memory is not measured here yet.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from neardup_spark import corpus

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"


def corpus_dir(work: Path, docs: int, seed: int) -> Path:
    path = work / f"corpus-{docs}-{seed}"
    if not (path / "_DONE").exists():
        corpus.write(corpus.CorpusSpec(n_docs=docs, seed=seed), path, "parquet")
        (path / "_DONE").write_text("")
    return path


def run_once(corpus_path: Path, out: Path, master: str, partitions: int) -> dict:
    neardup = Path(sys.executable).parent / "neardup"
    cmd = [str(neardup), "run", "--input", str(corpus_path), "--format", "parquet", "--output", str(out),
           "--overwrite", "--config", str(ROOT / "conf" / "local.toml"), "--master", master,
           "--shuffle-partitions", str(partitions), "--quiet"]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"neardup run failed:\n{proc.stderr[-3000:]}")
    report = json.loads((out / "report.json").read_text())
    return {"process_seconds": round(wall, 2), "pipeline_seconds": report["wall_seconds"],
            "stage_seconds": report["stage_seconds"], "counts": report["counts"]}


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--shuffle-partitions", type=int, default=8)
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "neardup-bench"))
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    work = Path(args.work)
    rows = []
    print(f"{'docs':>9} {'process s':>10} {'pipeline s':>11} {'candidates':>11} {'verified':>9}  stage seconds")
    for docs in args.docs:
        path = corpus_dir(work, docs, args.seed)
        row = {"docs": docs, **run_once(path, work / f"out-{docs}", args.master, args.shuffle_partitions)}
        rows.append(row)
        c = row["counts"]
        print(f"{docs:>9} {row['process_seconds']:>10} {row['pipeline_seconds']:>11} "
              f"{c['candidate_pairs']:>11} {c['verified_pairs']:>9}  {json.dumps(row['stage_seconds'])}", flush=True)
    result = {"benchmark": "scale", "master": args.master, "shuffle_partitions": args.shuffle_partitions,
              "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
              "runs": rows}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "scale.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {Path(args.out) / 'scale.json'}")
    return rows


if __name__ == "__main__":
    main()
