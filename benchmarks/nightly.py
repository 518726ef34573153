"""Nightly batches: whole-process cost of a batch appended to an archive index, against a full re-run.

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python -m benchmarks.nightly --sizes 100000,1000000

The default targets: a 10k batch against a 1M-document archive costs <= 3x the
same batch against a 100k archive, and <= 20% of re-running the 1M documents.
The mission's scale, a 200k night against a 10M archive, as a user without a
config file runs it (self-sized partitions and driver heap):

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python -m benchmarks.nightly \
        --sizes 1200000,10200000 --batch 200000 --rerun-every-size --config none \
        --shuffle-partitions 0 --driver-memory '' --scale-target 2 --rerun-target 0.1

Corpora above 1.5M documents are generated in 1M-document shards on both cores
(`scale.corpus_dir`; ~12 GB and ~30-60 min for 10M here) and kept under --work;
the 10M runs need ~57 GB more disk at their peak. A run that would not fit
in the free disk under --work is refused before anything is generated
(`check_disk`, estimated from the measured 10.2M run; --no-disk-check skips it).

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

Every run's documents are accounted for: the build's count against the
archive, and each re-run's clusters table (one row per input document, no
id twice). Further targets, between the smallest and largest size: build and
re-run seconds grow at most --growth-target x the documents, candidates and
verified pairs per document stay within --growth-target, and no run's peak
PSS exceeds --memory-target-gb.

Per run: process seconds, the pipeline's own seconds and counts (report.json;
the build prints its counts, its stage times are left to the event log's task
seconds), peak RSS of the process tree, shuffle MB and task seconds per stage
and what tasks spilled (Spark event log), the disk the run used at its peak
and left (growth of the work directory's file system, sampled), the index's
size on disk after the build and the append, and the load average (the machine may be shared: 1-minute load before, after
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
import sys
import tempfile
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from benchmarks import machine, save, sparklog
from benchmarks.scale import SHARD_DOCS, corpus_dir, corpus_path, shards_of
from benchmarks.skew import pipeline_tree, source_digest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
SCALE_TARGET = 3.0  # append(largest archive) / append(smallest archive), process seconds
RERUN_TARGET = 0.20  # append(largest archive) / rerun(largest corpus), process seconds
# Disk per document, measured at 10.2M (nightly-b200000.json, code 63f9a37): the generated corpus,
# the archive index (its shingle sets in flat files: 1,866 bytes a document, 1,368 with them in
# Parquet), and the growth of the work directory's file system at a build's or a re-run's peak
# (shuffle, spill, the index or outputs being written: 54.3 GB and 57.0 GB).
CORPUS_BYTES_PER_DOC = 1_200
INDEX_BYTES_PER_DOC = 1_900
RUN_PEAK_BYTES_PER_DOC = 5_700
APPEND_COUNTS = ("new_documents", "already_indexed", "exact_archive_matches", "archived_documents_met",
                 "candidate_pairs", "verified_pairs", "archived_clusters_touched", "archived_documents_changed")


def disk_needed(sizes: list[int], batch: int, free: bool, made: set[Path], work: Path, seed: int) -> int:
    """Bytes the benchmark still needs under `work` at its peak (the largest size's build or
    re-run): the corpora and splits not yet made (those of the smaller sizes only until
    their runs end, with `free`), the smaller sizes' indexes (unless `free`), the largest
    size's index during its re-run (unless `free`), and the largest run's own peak.
    `made`: the corpus and split directories that are already complete."""
    def corpus_and_split(n: int) -> int:
        corpus = 0 if corpus_path(work, n, seed) in made else n * CORPUS_BYTES_PER_DOC
        # A split hard-links the files whose ids fall on one side: all of a sharded corpus's but
        # about a shard's worth; every file of a one-stream corpus (its ids are permuted) is copied.
        copied = n if shards_of(n) == 1 else batch + SHARD_DOCS
        split_done = split_path(work, n, batch, seed) in made
        return corpus + (0 if split_done else copied * CORPUS_BYTES_PER_DOC)

    largest, smaller = sizes[-1], sizes[:-1]
    kept = 0 if free else sum(corpus_and_split(n) + (n - batch) * INDEX_BYTES_PER_DOC for n in smaller)
    index_in_rerun = 0 if free else (largest - batch) * INDEX_BYTES_PER_DOC
    peak = max(RUN_PEAK_BYTES_PER_DOC * (largest - batch), RUN_PEAK_BYTES_PER_DOC * largest + index_in_rerun)
    return kept + corpus_and_split(largest) + peak


def check_disk(sizes: list[int], batch: int, free: bool, work: Path, seed: int) -> None:
    """Refuse, before anything is generated, a run whose peak would fill the disk under `work`."""
    work.mkdir(parents=True, exist_ok=True)
    made = {p for p in work.iterdir() if (p / "_DONE").exists()}
    needed, have = disk_needed(sizes, batch, free, made, work, seed), shutil.disk_usage(work).free
    if needed > have:
        hint = "" if free else "; --free-index deletes what is no longer needed as it goes"
        raise SystemExit(f"the benchmark needs ~{needed / 1e9:.0f} GB free under {work} at its peak (estimated "
                         f"from a 10.2M run), and {have / 1e9:.0f} GB are free{hint}; --no-disk-check runs it anyway")


def split_path(work: Path, docs: int, batch: int, seed: int) -> Path:
    """Where `split` keeps the archive and batch of the corpus of `docs` documents."""
    return work / f"nightly-split-{docs}-{seed}-b{batch}"


def split(work: Path, corpus: Path, docs: int, batch: int, seed: int) -> tuple[Path, Path]:
    """(archive, batch) Parquet directories: ids <= docs - batch, and the rest; written once,
    streamed. A file whose ids all fall on one side is hard-linked, not copied (a sharded
    10M corpus keeps its ids in ranges per shard, so only the files across the cut are read)."""
    path = split_path(work, docs, batch, seed)
    if (path / "_DONE").exists():
        return path / "archive", path / "batch"
    shutil.rmtree(path, ignore_errors=True)
    cut = docs - batch
    mixed = []
    for name in ("archive", "batch"):
        (path / name).mkdir(parents=True)
    for f in sorted(corpus.glob("*.parquet")):
        ids = pq.read_table(f, columns=["id"]).column("id")
        lo, hi = pc.min(ids).as_py(), pc.max(ids).as_py()
        if hi <= cut or lo > cut:
            os.link(f, path / ("archive" if hi <= cut else "batch") / f.name)
        else:
            mixed.append(str(f))
    if mixed:
        source = ds.dataset(mixed, format="parquet")
        for name, keep in (("archive", ds.field("id") <= cut), ("batch", ds.field("id") > cut)):
            ds.write_dataset(source.scanner(filter=keep), path / name, format="parquet",
                             basename_template="split-{i}.parquet", max_rows_per_file=50_000,
                             max_rows_per_group=50_000, existing_data_behavior="overwrite_or_ignore")
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


def run_cli(args: list[str], logs: Path, spark_args: list[str]) -> dict:
    """`python -m neardup_spark.cli ARGS` as its own process: wall time, stdout, peak RSS of the
    process tree, load average, and shuffle MB / task seconds per pipeline stage from its event log."""
    shutil.rmtree(logs, ignore_errors=True)
    cmd = [sys.executable, "-m", "neardup_spark.cli", *args, *spark_args, *sparklog.event_log_conf(logs)]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    source_before = source_digest()
    with sparklog.LoadSampler(logs.parent) as load:
        proc, wall, rss = sparklog.measured(cmd, ROOT, env)
    stdout = proc.stdout
    if proc.returncode:
        raise SystemExit(f"{' '.join(args[:2])} failed (exit {proc.returncode}):\n{' '.join(cmd)}\n{proc.stderr[-6000:]}")
    costs = sparklog.costs_by_stage(sparklog.newest_log(logs))
    return {"process_seconds": round(wall, 2), "peak_rss_mb": round(rss.peak / 2**20), "peak_pss_mb": round(rss.peak_pss / 2**20),
            "shuffle_mb": {k: round(v["shuffle_bytes"] / 2**20, 1) for k, v in costs.items() if v["shuffle_bytes"]},
            "task_seconds": {k: v["task_seconds"] for k, v in costs.items()},
            "spill_disk_mb": {k: round(v["spill_disk_bytes"] / 2**20, 1) for k, v in costs.items()
                              if v["spill_disk_bytes"]},
            "spill_memory_mb": {k: round(v["spill_memory_bytes"] / 2**20, 1) for k, v in costs.items()
                                if v["spill_memory_bytes"]},
            "disk_mb": load.disk(), "load_average": load.as_dict(), "source_sha256": [source_before, source_digest()], "stdout": stdout}


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
    shutil.rmtree(out, ignore_errors=True)  # an old output deleted during the run would hide its disk use
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


def indexed(index: Path, expected: int) -> dict:
    """Every archived document exactly once in a freshly built index's assignments table."""
    return sparklog.once(sorted(index.glob("parts/*/assign/*.parquet")), expected)


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 3)


def per_doc(run: dict, key: str) -> float | None:
    c = run.get("counts") or {}
    return None if not c.get("documents") or c.get(key) is None else c[key] / c["documents"]


def targets_of(args, small: dict, large: dict) -> dict:
    """The ratios the issues set, between the smallest and the largest size (each None where
    a run it needs was not made)."""
    both = small is not large
    t = {
        "append_scale": {
            "what": f"append process seconds, {large['archive_documents']} / {small['archive_documents']} archived documents",
            "ratio": ratio(large["append"]["process_seconds"], small["append"]["process_seconds"]) if both else None,
            "pipeline_ratio": ratio(large["append"]["pipeline_seconds"], small["append"]["pipeline_seconds"]) if both else None,
            "target": args.scale_target,
        },
        "append_vs_rerun": {
            "what": f"append process seconds / full re-run of {large['docs']} documents, process seconds",
            "ratio": ratio(large["append"]["process_seconds"], large.get("rerun", {}).get("process_seconds")),
            "pipeline_ratio": ratio(large["append"]["pipeline_seconds"], large.get("rerun", {}).get("pipeline_seconds")),
            "target": args.rerun_target,
        },
    }
    if both:
        # A run's cost per document may grow by at most growth_target: 10x the documents in <= 11x the time.
        for run in ("build", "rerun"):
            if run in small and run in large:
                t[f"{run}_scale"] = {
                    "what": f"{run} process seconds, {large[run]['counts']['documents']} / "
                            f"{small[run]['counts']['documents']} documents (target: {args.growth_target} x the growth)",
                    "ratio": ratio(large[run]["process_seconds"], small[run]["process_seconds"]),
                    "pipeline_ratio": ratio(large[run]["pipeline_seconds"], small[run]["pipeline_seconds"]),
                    "target": round(args.growth_target * large[run]["counts"]["documents"]
                                    / small[run]["counts"]["documents"], 2),
                }
        # Pairs per document, whole corpora against whole corpora: the re-runs. An archive is a
        # random subset of its corpus, and a story's copies in a subset of share f are about f
        # of them, so builds compare only when both archives are the same share of their corpus.
        share = [e["archive_documents"] / e["docs"] for e in (small, large)]
        run = "rerun" if "rerun" in small and "rerun" in large else "build"
        comparable = run == "rerun" or abs(share[0] - share[1]) < 0.01
        for key in ("candidate_pairs", "verified_pairs"):
            a, b = per_doc(small[run], key), per_doc(large[run], key)
            t[f"flat_{key}"] = {
                "what": f"{key} per document, {run} of {large['docs']} / {small['docs']} documents (nothing quadratic)",
                "ratio": ratio(b, a) if comparable else None,
                "per_document": [None if a is None else round(a, 4), None if b is None else round(b, 4)],
                "target": args.growth_target,
            }
            if not comparable:
                t[f"flat_{key}"]["why_not"] = (f"the archives are {share[0]:.3f} and {share[1]:.3f} of their corpora: "
                                               "compare re-runs (--rerun-every-size)")
    checked = [r["accounted"] for e in (small, large) for r in (e.get("build"), e.get("rerun")) if r and "accounted" in r]
    t["accounted"] = {"what": "runs whose documents are not each accounted for exactly once (index or clusters table)",
                      "ratio": sum(not c["ok"] for c in checked), "target": 0}
    runs = [r for e in (small, large) for r in (e.get("build"), e.get("append"), e.get("rerun")) if r]
    peak = max(r["peak_pss_mb"] for r in runs) / 1024
    t["peak_memory"] = {"what": "largest peak PSS of the process tree over every run, GB",
                        "ratio": round(peak, 2), "target": args.memory_target_gb}
    for v in t.values():
        v["met"] = None if v["ratio"] is None else v["ratio"] <= v["target"]
    return t


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000", help="comma-separated corpus sizes (archive + batch)")
    ap.add_argument("--batch", type=int, default=10_000, help="documents in the batch (the last ids)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-rerun", action="store_true", help="skip the full re-run of the largest corpus")
    ap.add_argument("--rerun-every-size", action="store_true",
                    help="re-run every size in full, not only the largest (for the build and rerun scale ratios)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--config", default=str(ROOT / "conf" / "local.toml"),
                    help="the config file of every run, or none: a run as a user without one makes it (self-sized)")
    ap.add_argument("--shuffle-partitions", type=int, default=8, help="0: not set (the run sizes it)")
    ap.add_argument("--driver-memory", default="12g",
                    help="local mode: the driver heap is the whole executor (conf/local.toml says 4g); every run;"
                         " empty: not set (the run sizes it)")
    ap.add_argument("--conf", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                    help="further Spark settings of every run (e.g. spark.io.compression.codec=zstd)")
    ap.add_argument("--scale-target", type=float, default=SCALE_TARGET,
                    help="append at the largest archive / at the smallest, process seconds")
    ap.add_argument("--rerun-target", type=float, default=RERUN_TARGET,
                    help="append at the largest archive / full re-run of the largest corpus")
    ap.add_argument("--growth-target", type=float, default=1.1,
                    help="cost per document, largest / smallest size (build, re-run, candidates, verified pairs)")
    ap.add_argument("--memory-target-gb", type=float, default=20.0, help="peak PSS of any run's process tree")
    ap.add_argument("--free-index", action="store_true",
                    help="delete each index once its append is measured, before any re-run, and each smaller"
                         " size's corpus and split once its runs are done (the 10M sizes need ~72 GB free with"
                         " it, ~96 GB without)")
    ap.add_argument("--no-disk-check", action="store_true",
                    help="run even when the estimated peak exceeds the free disk under --work")
    ap.add_argument("--linkage", choices=["components", "keeper"], default="components",
                    help="cluster.linkage of the index and every run (keeper: results in nightly-keeper.json)")
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "neardup-bench"))
    ap.add_argument("--out", default=str(RESULTS), help="directory for nightly.json (nightly-bN.json for other batches)")
    args = ap.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    if any(n <= args.batch for n in sizes):
        raise SystemExit(f"every size must exceed the batch ({args.batch})")
    work = Path(args.work)
    if not args.no_disk_check:
        check_disk(sizes, args.batch, args.free_index, work, args.seed)
    spark_args = ["--master", args.master]
    if args.config.lower() != "none":
        spark_args += ["--config", args.config]
    if args.shuffle_partitions:
        spark_args += ["--shuffle-partitions", str(args.shuffle_partitions)]
    if args.driver_memory:
        spark_args += ["--conf", f"spark.driver.memory={args.driver_memory}"]
    for item in args.conf:
        spark_args += ["--conf", item]
    spark_args += ["--linkage", args.linkage]  # always named: the package's default is keeper
    load_start = [round(x, 2) for x in os.getloadavg()]
    tree = pipeline_tree()

    header = (f"{'docs':>9} {'archive':>9} {'run':<7} {'process s':>10} {'pipeline s':>11} {'peak RSS MB':>12}"
              f" {'index MB':>9} {'B/doc':>7} {'load':>5}  counts")
    print(header)
    sizes_out, runs = [], {}
    for n in sizes:
        corpus = corpus_dir(work, n, args.seed)
        archive, batch = split(work, corpus, n, args.batch, args.seed)
        keeper = "" if args.linkage == "components" else f"-{args.linkage}"
        index = work / f"nightly-index-{n}{keeper}"
        tag = f"nightly-{n}{keeper}"
        entry = {"docs": n, "archive_documents": n - args.batch, "batch_documents": args.batch,
                 "corpus": str(corpus), "archive": str(archive), "batch": str(batch), "index": str(index)}

        b = build(archive, index, work / f"{tag}-build-eventlog", spark_args)
        size = tree_bytes(index)
        b["index_bytes"], b["index_mb_by_table"] = size["bytes"], size["mb_by_table"]
        b["index_bytes_per_document"] = round(size["bytes"] / (n - args.batch), 1)
        b["accounted"] = indexed(index, n - args.batch)
        _print(n, n - args.batch, b, f"documents {b['counts'].get('documents')}, verified {b['counts'].get('verified_pairs')}, "
                     f"clusters {b['counts'].get('clusters')}, accounted {b['accounted']}")

        a = append(batch, index, work / f"{tag}-append", work / f"{tag}-append-eventlog", spark_args)
        size = tree_bytes(index)
        a["index_bytes"], a["index_mb_by_table"] = size["bytes"], size["mb_by_table"]
        a["index_bytes_per_document"] = round(size["bytes"] / n, 1)
        _print(n, n - args.batch, a, ", ".join(f"{k} {a['counts'].get(k)}" for k in APPEND_COUNTS))
        print(f"{'':>9} append stage seconds: {json.dumps(a['stage_seconds'])}", flush=True)
        entry["build"], entry["append"] = b, a
        shutil.rmtree(work / f"{tag}-build-eventlog", ignore_errors=True)  # costs read; event logs grow with n
        if args.free_index:  # before the re-run starts, so its disk growth is measured from the freed baseline
            shutil.rmtree(index, ignore_errors=True)

        if not args.no_rerun and (n == sizes[-1] or args.rerun_every_size):
            r = rerun(corpus, work / f"{tag}-rerun", work / f"{tag}-rerun-eventlog", spark_args)
            r["accounted"] = sparklog.accounted(work / f"{tag}-rerun", n)
            _print(n, "-", r, f"documents {r['counts'].get('documents')}, verified {r['counts'].get('verified_pairs')}, "
                         f"clusters {r['counts'].get('clusters')}, accounted {r['accounted']}")
            entry["rerun"] = r
            entry["agreement_with_rerun"] = agreement(work / f"{tag}-append", work / f"{tag}-rerun")
            print(f"{'':>9} append vs rerun assignments: {json.dumps(entry['agreement_with_rerun'])}", flush=True)
        for key in ("build", "append", "rerun"):
            if key in entry:
                print(f"{'':>9} {key}: disk {json.dumps(entry[key]['disk_mb'])}, spill to disk MB "
                      f"{json.dumps(entry[key]['spill_disk_mb'])}, peak PSS MB {entry[key]['peak_pss_mb']}", flush=True)
        sizes_out.append(entry)
        runs[n] = entry
        if args.free_index and n != sizes[-1]:  # the largest size's peak needs the room
            shutil.rmtree(corpus, ignore_errors=True)
            shutil.rmtree(archive.parent, ignore_errors=True)

    # Others may edit the package meanwhile: a result mixing pipeline versions is flagged, not silently kept.
    digests = {d for e in sizes_out for k in ("build", "append", "rerun") if k in e for d in e[k]["source_sha256"]}
    digests |= {tree["source_sha256"], source_digest()}
    if len(digests) > 1:
        print(f"WARNING: the pipeline's source changed during the benchmark ({len(digests)} versions): "
              "the runs may not be comparable")
    targets = targets_of(args, runs[sizes[0]], runs[sizes[-1]])
    for key, t in targets.items():
        verdict = "not measured" if t["met"] is None else ("met" if t["met"] else "MISSED")
        extra = f" (pipeline only {t['pipeline_ratio']})" if "pipeline_ratio" in t else ""
        print(f"{key}: {t['ratio']}{extra}, target <= {t['target']}: {verdict}  [{t['what']}]")
    config = None if args.config == ap.get_default("config") else args.config  # the default: no machine path
    result = {"benchmark": "nightly", "master": args.master, "config": config,
              "growth_target": args.growth_target, "memory_target_gb": args.memory_target_gb,
              "shuffle_partitions": args.shuffle_partitions, "driver_memory": args.driver_memory,
              "conf": args.conf or None, "batch": args.batch, "seed": args.seed, "rerun_every_size": args.rerun_every_size,
              "free_index": args.free_index, "linkage": args.linkage,
              "machine": machine(), "load_average": {"start": load_start,
                                                     "end": [round(x, 2) for x in os.getloadavg()]},
              "pipeline": tree, "pipeline_at_end": pipeline_tree(), "source_changed_during_run": len(digests) > 1,
              "targets": targets, "sizes": sizes_out}
    name = "nightly" if args.batch == 10_000 else f"nightly-b{args.batch}"
    save(result, args.out, f"{name}{'' if args.linkage == 'components' else '-' + args.linkage}.json")
    return result


def _print(n: int, archived: int | str, row: dict, counts: str) -> None:
    index_mb = f"{row['index_bytes'] / 2**20:.1f}" if "index_bytes" in row else "-"
    per_doc = f"{row['index_bytes_per_document']:.0f}" if "index_bytes_per_document" in row else "-"
    print(f"{n:>9} {archived:>9} {row['run']:<7} {row['process_seconds']:>10}"
          f" {row['pipeline_seconds']:>11} {row['peak_rss_mb']:>12} {index_mb:>9} {per_doc:>7}"
          f" {row['load_average']['mean_during'] or row['load_average']['before']:>5}  {counts}", flush=True)


if __name__ == "__main__":
    main()
