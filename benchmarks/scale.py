"""Whole-process time of `neardup run` on generated corpora of growing size.

    .venv/bin/python -m benchmarks.scale --docs 10000 100000

Each size: the seeded seven-edit corpus is generated once (cached under
--work), then `neardup run` runs as a separate process with --master
local[2] and conf/local.toml, session start included, as a user would
experience it. Prints a table and writes benchmarks/results/scale.json.
Peak memory is the summed RSS of the process tree (JVM and Python
workers), which counts pages that forked workers share once per worker,
and the summed PSS, which splits them (see `sparklog.PeakRss`); shuffle
bytes per pipeline stage come from Spark's event log.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import machine, save, sparklog
from neardup_spark.tools import corpus, corpus_files

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"


SHARD_DOCS = 1_000_000  # above 1.5x this, corpora are written in shards of about this many documents


def shards_of(docs: int) -> int:
    """How many shards `corpus_dir` writes a corpus of `docs` documents in (1: one stream)."""
    return 1 if docs <= SHARD_DOCS * 3 // 2 else round(docs / SHARD_DOCS)


def corpus_path(work: Path, docs: int, seed: int) -> Path:
    """Where `corpus_dir` keeps the corpus of `docs` documents (without making it)."""
    shards = shards_of(docs)
    return work / (f"corpus-{docs}-{seed}" if shards == 1 else f"corpus-{docs}-{seed}-s{shards}")


def corpus_dir(work: Path, docs: int, seed: int) -> Path:
    """The seeded corpus of `docs` documents under work, generated once. Up to 1.5M
    documents it is one `corpus.generate` stream; larger ones are written in shards of
    about SHARD_DOCS (`corpus_files.write_sharded`, both cores, restartable), so a 10M corpus
    is ten 1M-like pieces sharing one vocabulary and one set of footers."""
    shards = shards_of(docs)
    path = corpus_path(work, docs, seed)
    if not (path / "_DONE").exists():
        spec = corpus.CorpusSpec(n_docs=docs, seed=seed)
        if shards == 1:
            corpus_files.write(spec, path, "parquet")
        else:
            corpus_files.write_sharded(spec, path, shards, workers=min(shards, os.cpu_count() or 1),
                                 log=lambda line: print(f"{path.name}: {line}", flush=True))
        (path / "_DONE").write_text("")
    return path


def run_once(corpus_path: Path, out: Path, master: str, partitions: int | None, extra: list[str] | None = None,
             instrumented: bool = True) -> dict:
    """One `neardup run` as its own process: wall time, the report's stage
    times and counts, peak RSS of the process tree and shuffle bytes per stage.

    With `instrumented` off, the run is timed bare, as a user runs it and as the
    peers are timed: no Spark event log (~0.6 s at 100k here) and no memory
    monitor, so no shuffle bytes or peak memory either. With `partitions` None the
    run gets no config file and no partition count: it sizes itself, as a user's
    first run does."""
    neardup = Path(sys.executable).parent / "neardup"
    logs = out.parent / f"{out.name}-eventlog"
    shutil.rmtree(logs, ignore_errors=True)
    cmd = [str(neardup), "run", "--input", str(corpus_path), "--format", "parquet", "--output", str(out),
           "--overwrite", "--master", master, "--quiet",
           *(["--config", str(ROOT / "conf" / "local.toml"), "--shuffle-partitions", str(partitions)]
             if partitions is not None else []),
           *(sparklog.event_log_conf(logs) if instrumented else []), *(extra or [])]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    shutil.rmtree(out, ignore_errors=True)  # an old output deleted during the run would hide its disk use
    with sparklog.LoadSampler(out.parent) as load:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        with (sparklog.PeakRss(proc.pid) if instrumented else contextlib.nullcontext()) as rss:
            _, stderr = proc.communicate()
        wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"neardup run failed:\n{stderr[-3000:]}")
    report = json.loads((out / "report.json").read_text())
    timing = {"process_seconds": round(wall, 2), "pipeline_seconds": report["wall_seconds"],
              "sizing": report.get("sizing"),
              "stage_seconds": report["stage_seconds"], "counts": report["counts"]}
    if not instrumented:
        return {**timing, "instrumented": False}
    costs = sparklog.costs_by_stage(sparklog.newest_log(logs))
    return {**timing,
            "peak_rss_mb": round(rss.peak / 2**20), "peak_pss_mb": round(rss.peak_pss / 2**20),
            "processes_at_peak_rss": rss.processes,
            "shuffle_mb": {k: round(v["shuffle_bytes"] / 2**20, 1) for k, v in costs.items() if v["shuffle_bytes"]},
            "task_seconds": {k: v["task_seconds"] for k, v in costs.items()},
            "spill_disk_mb": {k: round(v["spill_disk_bytes"] / 2**20, 1) for k, v in costs.items()
                              if v["spill_disk_bytes"]},
            "disk_mb": load.disk(), "load_average": load.as_dict()}


def ensure_class_archive(master: str, work: Path) -> dict:
    """Make the driver JVM's class-data archive with an untimed run on the
    bundled sample, if it is missing, so no timed run pays for making it
    (a user's first run does, once). Returns what was done, for the record."""
    from neardup_spark.api import SAMPLE
    from neardup_spark.config import SparkConfig
    from neardup_spark.runtime.jvm import class_archive

    archive = class_archive(SparkConfig(master=master))
    if archive is None:
        return {"class_archive": None}
    if archive.making is None:
        return {"class_archive": str(archive.path), "made_seconds": None}
    neardup = Path(sys.executable).parent / "neardup"
    start = time.perf_counter()
    subprocess.run([str(neardup), "run", "--input", str(SAMPLE), "--format", "jsonl", "--output",
                    str(work / "out-class-archive"), "--overwrite", "--master", master, "--quiet"],
                   env={**os.environ, "PYSPARK_PYTHON": sys.executable}, check=True, capture_output=True)
    return {"class_archive": str(archive.path), "made_seconds": round(time.perf_counter() - start, 1)}


def describe_class_archive(info: dict) -> str:
    if info["class_archive"] is None:
        return "class-data archive: not used (see spark.class_cache)"
    if info["made_seconds"] is None:
        return f"class-data archive: present ({info['class_archive']})"
    return f"class-data archive: made by an untimed run on the bundled sample ({info['made_seconds']} s)"


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--shuffle-partitions", type=int, default=8)
    ap.add_argument("--driver-memory", default="12g",
                    help="local mode: the driver heap is the whole executor (conf/local.toml says 4g)")
    ap.add_argument("--conf", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                    help="Spark settings for every run, e.g. spark.io.compression.codec=zstd")
    ap.add_argument("--sized", action="store_true",
                    help="no config file, partition count or driver heap: each run sizes itself")
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "neardup-bench"))
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    if args.sized:
        args.shuffle_partitions, args.driver_memory = None, None
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    archive = ensure_class_archive(args.master, work)
    print(describe_class_archive(archive))
    rows = []
    print(f"{'docs':>9} {'process s':>10} {'pipeline s':>11} {'candidates':>11} {'verified':>9} {'peak RSS MB':>12}"
          f" {'peak PSS MB':>12} {'shuffle MB':>11}  stage seconds")
    for docs in args.docs:
        path = corpus_dir(work, docs, args.seed)
        extra = ["--conf", f"spark.driver.memory={args.driver_memory}"] if args.driver_memory else []
        for item in args.conf:
            extra += ["--conf", item]
        row = {"docs": docs, **run_once(path, work / f"out-{docs}", args.master, args.shuffle_partitions, extra)}
        row["accounted"] = sparklog.accounted(work / f"out-{docs}", docs)
        rows.append(row)
        print(f"{'':>9} accounted: {json.dumps(row['accounted'])}; disk MB {json.dumps(row['disk_mb'])};"
              f" spill to disk MB {json.dumps(row['spill_disk_mb'])}", flush=True)
        c = row["counts"]
        print(f"{docs:>9} {row['process_seconds']:>10} {row['pipeline_seconds']:>11} {c['candidate_pairs']:>11}"
              f" {c['verified_pairs']:>9} {row['peak_rss_mb']:>12} {row['peak_pss_mb']:>12} {sum(row['shuffle_mb'].values()):>11.1f}"
              f"  {json.dumps(row['stage_seconds'])}", flush=True)
        print(f"{'':>9} shuffle MB by stage: {json.dumps(row['shuffle_mb'])}", flush=True)
        print(f"{'':>9} task seconds by stage: {json.dumps(row['task_seconds'])}", flush=True)
    result = {"benchmark": "scale", "sized": args.sized, "master": args.master,
              "shuffle_partitions": args.shuffle_partitions,
              "driver_memory": args.driver_memory, "conf": args.conf or None,
              "machine": machine(), **archive,
              "runs": rows}
    name = "scale" if max(args.docs) <= 1_000_000 else f"scale-{max(args.docs)}"
    save(result, args.out, f"{name}-sized.json" if args.sized else f"{name}.json")
    return rows


if __name__ == "__main__":
    main()
