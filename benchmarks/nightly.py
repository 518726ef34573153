"""Nightly batches: whole-process cost of checking a 10,000-document batch against an archive index.

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python -m benchmarks.nightly --sizes 100000,1000000

The issue's target: a 10k batch against a 1M-document archive costs < 3x the
same batch against a 100k archive, and < 20% of re-running the 1M documents.

For each size n, the seeded corpus of n documents (scale.py's cache under
--work) is split once, streamed with pyarrow.dataset, into an archive (ids
<= n - batch) and a batch (the last --batch ids; ids are a seeded
permutation, so the batch is a random subset and its stories are split with
the archive: it has real matches there). Then, each as its own process
(`python -m neardup_spark.cli`, --master local[2], conf/local.toml, the
driver heap set by --driver-memory, JVM start included, as a user runs it):

  build    `neardup index build` over the archive (no --output: the index only)
  append   `neardup run --index ... --append` of the batch: the batch cost
  rerun    (largest size, unless --no-rerun) `neardup run` over all n
           documents (archive + batch): the full re-run the append replaces

Per run: process seconds, the pipeline's own seconds and counts (report.json;
the build prints its counts, its stage times are left to the event log's task
seconds), peak RSS of the process tree, shuffle MB and task seconds per stage
(Spark event log), the index's size on disk after the build and the append,
and the load average (the machine may be shared: 1-minute load before, after
and sampled during each run; it includes the run's own two cores). The
pipeline's source digest is taken around every run: a benchmark whose runs
saw different sources is flagged (source_changed_during_run). With a
rerun, the append's batch assignments are compared with the full run's.
Prints a table and the two ratios, writes benchmarks/results/nightly.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow.dataset as ds

from benchmarks import machine, save, sparklog
from benchmarks.scale import corpus_dir
from benchmarks.skew import pipeline_tree, source_digest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
SCALE_TARGET = 3.0  # append(largest archive) / append(smallest archive), process seconds
RERUN_TARGET = 0.20  # append(largest archive) / rerun(largest corpus), process seconds
APPEND_COUNTS = ("new_documents", "already_indexed", "exact_archive_matches", "archived_documents_met",
                 "candidate_pairs", "verified_pairs", "archived_clusters_touched", "archived_documents_changed")


def split(work: Path, corpus: Path, docs: int, batch: int, seed: int) -> tuple[Path, Path]:
    """(archive, batch) Parquet directories: ids <= docs - batch, and the rest; written once, streamed."""
    path = work / f"nightly-split-{docs}-{seed}-b{batch}"
    if (path / "_DONE").exists():
        return path / "archive", path / "batch"
    shutil.rmtree(path, ignore_errors=True)
    source = ds.dataset(corpus, format="parquet")  # ignores _DONE (prefix "_")
    cut = docs - batch
    for name, keep in (("archive", ds.field("id") <= cut), ("batch", ds.field("id") > cut)):
        ds.write_dataset(source.scanner(filter=keep), path / name, format="parquet",
                         basename_template="part-{i}.parquet", max_rows_per_file=50_000,
                         max_rows_per_group=50_000, existing_data_behavior="error")
    rows = {name: ds.dataset(path / name, format="parquet").count_rows() for name in ("archive", "batch")}
    if rows != {"archive": cut, "batch": batch}:
        raise SystemExit(f"split of {corpus} has {rows}, expected archive {cut} and batch {batch}")
    (path / "_DONE").write_text("")
    return path / "archive", path / "batch"


def tree_bytes(root: Path) -> dict:
    """Bytes of every file under root (apparent sizes, as `du -b`), in total and per index table."""
    total, by_table = 0, {}
    for dirpath, _, files in os.walk(root):
        rel = Path(dirpath).relative_to(root).parts
        # parts/<part>/<table>/...: docs, bands, assign, output, boilerplate; manifests at the top
        table = rel[2] if len(rel) > 2 and rel[0] == "parts" else "manifests"
        size = sum(os.path.getsize(os.path.join(dirpath, f)) for f in files)
        total += size
        by_table[table] = by_table.get(table, 0) + size
    return {"bytes": total, "mb_by_table": {k: round(v / 2**20, 1) for k, v in sorted(by_table.items())}}


class LoadSampler:
    """1-minute load average before, after and (every few seconds) during a run."""

    def __init__(self, interval: float = 5.0):
        self.interval, self.samples = interval, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> "LoadSampler":
        self.before = round(os.getloadavg()[0], 2)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.after = round(os.getloadavg()[0], 2)

    def as_dict(self) -> dict:
        mean = sum(self.samples) / len(self.samples) if self.samples else None
        return {"before": self.before, "after": self.after, "mean_during": None if mean is None else round(mean, 2)}


def run_cli(args: list[str], logs: Path, spark_args: list[str]) -> dict:
    """`python -m neardup_spark.cli ARGS` as its own process: wall time, stdout, peak RSS of the
    process tree, load average, and shuffle MB / task seconds per pipeline stage from its event log."""
    shutil.rmtree(logs, ignore_errors=True)
    cmd = [sys.executable, "-m", "neardup_spark.cli", *args, *spark_args, *sparklog.event_log_conf(logs)]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    source_before = source_digest()
    with LoadSampler() as load:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        with sparklog.PeakRss(proc.pid) as rss:
            stdout, stderr = proc.communicate()
        wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"{' '.join(args[:2])} failed (exit {proc.returncode}):\n{' '.join(cmd)}\n{stderr[-6000:]}")
    costs = sparklog.costs_by_stage(sparklog.newest_log(logs))
    return {"process_seconds": round(wall, 2), "peak_rss_mb": round(rss.peak / 2**20), "peak_pss_mb": round(rss.peak_pss / 2**20),
            "shuffle_mb": {k: round(v["shuffle_bytes"] / 2**20, 1) for k, v in costs.items() if v["shuffle_bytes"]},
            "task_seconds": {k: v["task_seconds"] for k, v in costs.items()},
            "load_average": load.as_dict(), "source_sha256": [source_before, source_digest()], "stdout": stdout}


def build(archive: Path, index: Path, logs: Path, spark_args: list[str]) -> dict:
    shutil.rmtree(index, ignore_errors=True)
    row = run_cli(["index", "build", "--input", str(archive), "--format", "parquet", "--index", str(index),
                   "--json"], logs, spark_args)
    printed = json.loads(row.pop("stdout"))  # the build's report
    return {"run": "build", "pipeline_seconds": printed["wall_seconds"], "stage_seconds": printed.get("stage_seconds"),
            "counts": printed["counts"], **row}


def append(batch: Path, index: Path, out: Path, logs: Path, spark_args: list[str]) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    row = run_cli(["run", "--input", str(batch), "--format", "parquet", "--index", str(index), "--append",
                   "--output", str(out), "--quiet"], logs, spark_args)
    row.pop("stdout")
    report = json.loads((out / "report.json").read_text())
    if report.get("replayed"):
        raise SystemExit(f"the append of {batch} was a replay: the index at {index} already held this batch")
    return {"run": "append", "pipeline_seconds": report["wall_seconds"], "stage_seconds": report["stage_seconds"],
            "counts": report["counts"], "work": report.get("work"), **row}


def rerun(corpus: Path, out: Path, logs: Path, spark_args: list[str]) -> dict:
    row = run_cli(["run", "--input", str(corpus), "--format", "parquet", "--output", str(out), "--overwrite",
                   "--quiet"], logs, spark_args)
    row.pop("stdout")
    report = json.loads((out / "report.json").read_text())
    return {"run": "rerun", "pipeline_seconds": report["wall_seconds"], "stage_seconds": report["stage_seconds"],
            "counts": report["counts"], **row}


def agreement(append_out: Path, rerun_out: Path) -> dict:
    """How far the append's assignments (batch documents, and archived ones it changed) match the full run's."""
    cols = ["doc_id", "cluster_id", "keeper_id", "status"]
    mine = ds.dataset(append_out / "clusters", format="parquet").to_table(columns=[*cols, "in_batch"]).to_pandas()
    full = ds.dataset(rerun_out / "clusters", format="parquet").to_table(
        columns=cols, filter=ds.field("doc_id").isin(mine["doc_id"].tolist())).to_pandas()
    both = mine.merge(full, on="doc_id", suffixes=("", "_full"))
    out = {}
    for label, rows in (("batch", both[both["in_batch"]]), ("archived_changed", both[~both["in_batch"]])):
        out[label] = {"documents": int(len(rows))}
        for c in cols[1:]:
            out[label][f"same_{c}"] = int((rows[c] == rows[f"{c}_full"]).sum())
    return out


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a / b, 3)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000", help="comma-separated corpus sizes (archive + batch)")
    ap.add_argument("--batch", type=int, default=10_000, help="documents in the batch (the last ids)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-rerun", action="store_true", help="skip the full re-run of the largest corpus")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--shuffle-partitions", type=int, default=8)
    ap.add_argument("--driver-memory", default="12g",
                    help="local mode: the driver heap is the whole executor (conf/local.toml says 4g); every run")
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "neardup-bench"))
    ap.add_argument("--out", default=str(RESULTS), help="directory for nightly.json")
    args = ap.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    if any(n <= args.batch for n in sizes):
        raise SystemExit(f"every size must exceed the batch ({args.batch})")
    work = Path(args.work)
    spark_args = ["--config", str(ROOT / "conf" / "local.toml"), "--master", args.master,
                  "--shuffle-partitions", str(args.shuffle_partitions)]
    if args.driver_memory:
        spark_args += ["--conf", f"spark.driver.memory={args.driver_memory}"]
    load_start = [round(x, 2) for x in os.getloadavg()]
    tree = pipeline_tree()

    header = (f"{'docs':>9} {'archive':>9} {'run':<7} {'process s':>10} {'pipeline s':>11} {'peak RSS MB':>12}"
              f" {'index MB':>9} {'B/doc':>7} {'load':>5}  counts")
    print(header)
    sizes_out, runs = [], {}
    for n in sizes:
        corpus = corpus_dir(work, n, args.seed)
        archive, batch = split(work, corpus, n, args.batch, args.seed)
        index = work / f"nightly-index-{n}"
        tag = f"nightly-{n}"
        entry = {"docs": n, "archive_documents": n - args.batch, "batch_documents": args.batch,
                 "corpus": str(corpus), "archive": str(archive), "batch": str(batch), "index": str(index)}

        b = build(archive, index, work / f"{tag}-build-eventlog", spark_args)
        size = tree_bytes(index)
        b["index_bytes"], b["index_mb_by_table"] = size["bytes"], size["mb_by_table"]
        b["index_bytes_per_document"] = round(size["bytes"] / (n - args.batch), 1)
        _print(n, n - args.batch, b, f"documents {b['counts'].get('documents')}, verified {b['counts'].get('verified_pairs')}, "
                     f"clusters {b['counts'].get('clusters')}")

        a = append(batch, index, work / f"{tag}-append", work / f"{tag}-append-eventlog", spark_args)
        size = tree_bytes(index)
        a["index_bytes"], a["index_mb_by_table"] = size["bytes"], size["mb_by_table"]
        a["index_bytes_per_document"] = round(size["bytes"] / n, 1)
        _print(n, n - args.batch, a, ", ".join(f"{k} {a['counts'].get(k)}" for k in APPEND_COUNTS))
        print(f"{'':>9} append stage seconds: {json.dumps(a['stage_seconds'])}", flush=True)
        entry["build"], entry["append"] = b, a

        if n == sizes[-1] and not args.no_rerun:
            r = rerun(corpus, work / f"{tag}-rerun", work / f"{tag}-rerun-eventlog", spark_args)
            _print(n, "-", r, f"documents {r['counts'].get('documents')}, verified {r['counts'].get('verified_pairs')}, "
                         f"clusters {r['counts'].get('clusters')}")
            entry["rerun"] = r
            entry["agreement_with_rerun"] = agreement(work / f"{tag}-append", work / f"{tag}-rerun")
            print(f"{'':>9} append vs rerun assignments: {json.dumps(entry['agreement_with_rerun'])}", flush=True)
        sizes_out.append(entry)
        runs[n] = entry

    # Others may edit the package meanwhile: a result mixing pipeline versions is flagged, not silently kept.
    digests = {d for e in sizes_out for k in ("build", "append", "rerun") if k in e for d in e[k]["source_sha256"]}
    digests |= {tree["source_sha256"], source_digest()}
    if len(digests) > 1:
        print(f"WARNING: the pipeline's source changed during the benchmark ({len(digests)} versions): "
              "the runs may not be comparable")
    small, large = runs[sizes[0]], runs[sizes[-1]]
    targets = {
        "append_scale": {
            "what": f"append process seconds, {sizes[-1] - args.batch} / {sizes[0] - args.batch} archived documents",
            "ratio": ratio(large["append"]["process_seconds"], small["append"]["process_seconds"]),
            "pipeline_ratio": ratio(large["append"]["pipeline_seconds"], small["append"]["pipeline_seconds"]),
            "target": SCALE_TARGET,
        },
        "append_vs_rerun": {
            "what": f"append process seconds / full re-run of {sizes[-1]} documents, process seconds",
            "ratio": ratio(large["append"]["process_seconds"], large.get("rerun", {}).get("process_seconds")),
            "pipeline_ratio": ratio(large["append"]["pipeline_seconds"],
                                    large.get("rerun", {}).get("pipeline_seconds")),
            "target": RERUN_TARGET,
        },
    }
    if len(sizes) < 2:
        targets["append_scale"]["ratio"] = targets["append_scale"]["pipeline_ratio"] = None
    for key, t in targets.items():
        t["met"] = None if t["ratio"] is None else t["ratio"] < t["target"]
        verdict = "not measured" if t["met"] is None else ("met" if t["met"] else "MISSED")
        print(f"{key}: {t['ratio']} (pipeline only {t['pipeline_ratio']}), target < {t['target']}: {verdict}"
              f"  [{t['what']}]")
    result = {"benchmark": "nightly", "master": args.master, "shuffle_partitions": args.shuffle_partitions,
              "driver_memory": args.driver_memory, "batch": args.batch, "seed": args.seed,
              "machine": machine(), "load_average": {"start": load_start,
                                                     "end": [round(x, 2) for x in os.getloadavg()]},
              "pipeline": tree, "pipeline_at_end": pipeline_tree(), "source_changed_during_run": len(digests) > 1,
              "targets": targets, "sizes": sizes_out}
    save(result, args.out, "nightly.json")
    return result


def _print(n: int, archived: int | str, row: dict, counts: str) -> None:
    index_mb = f"{row['index_bytes'] / 2**20:.1f}" if "index_bytes" in row else "-"
    per_doc = f"{row['index_bytes_per_document']:.0f}" if "index_bytes_per_document" in row else "-"
    print(f"{n:>9} {archived:>9} {row['run']:<7} {row['process_seconds']:>10}"
          f" {row['pipeline_seconds']:>11} {row['peak_rss_mb']:>12} {index_mb:>9} {per_doc:>7}"
          f" {row['load_average']['mean_during'] or row['load_average']['before']:>5}  {counts}", flush=True)


if __name__ == "__main__":
    main()
