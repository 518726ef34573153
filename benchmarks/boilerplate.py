"""Pair precision/recall with boilerplate stripping off and on, on corpora where every document carries site boilerplate.

    .venv/bin/python -m benchmarks.boilerplate --docs 20000 --shares 0.30 0.45 0.50

For each share S in --shares, a seeded corpus in which every document
(footer_share 1.0) carries one of four site header/footer blocks making up
share S of a median document (generated once, cached under --cache as
benchmarks.skew caches its boilerplate corpora; generation not timed). Each
corpus is run twice through the same `run` the CLI uses, in one local
SparkSession: stripping off, then on (boilerplate.enabled, the default rule:
unit "line", min_docs 100), at --threshold. Each run's clusters are scored
against the corpus `group` labels (neardup_spark.tools.evaluate.pair_scores, and
recall per edit type). Prints one row per (share, off/on) and whether every
"on" row meets the target (precision >= 0.99, recall >= 0.98), and writes
benchmarks/results/boilerplate.json (`meets_target` per row). The exit code
is 0 either way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from benchmarks import machine, save
from benchmarks.skew import corpus_path, pipeline_tree, source_digest
from neardup_spark.config import Config
from neardup_spark.tools import corpus
from neardup_spark.tools.evaluate import pair_scores, recall_by_edit
from neardup_spark.api import run
from neardup_spark.runtime.session import build_session

RESULTS = Path(__file__).parent / "results"
PRECISION_TARGET = 0.99
RECALL_TARGET = 0.98


def score(corpus_dir: Path, out: Path) -> dict:
    """Pair scores, recall per edit type and the largest predicted cluster of out/clusters."""
    labels = pd.read_parquet(corpus_dir, columns=["id", "group", "edit"]).set_index("id")
    clusters = pd.read_parquet(out / "clusters", columns=["doc_id", "cluster_id"]).set_index("doc_id")["cluster_id"]
    if len(clusters) != len(labels) or not clusters.index.isin(labels.index).all():
        raise SystemExit(f"{out / 'clusters'} does not hold every corpus document exactly once")
    scores = pair_scores(clusters, labels["group"])
    by_edit = recall_by_edit(clusters, labels)
    sizes = clusters.value_counts()
    largest = clusters.index[clusters == sizes.index[0]]
    return {
        "pairs": scores.as_dict(),
        "recall_by_edit": {e: round(float(r), 6) for e, r in by_edit["recall"].items()},
        "largest_cluster": {"documents": int(sizes.iloc[0]),
                            "labels": int(labels["group"].reindex(largest).nunique())},
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--shares", type=float, nargs="+", default=[0.30, 0.45, 0.50],
                    help="boilerplate shares of a median document, one corpus each")
    ap.add_argument("--only", type=float, default=None, help="run only this share (e.g. 0.45)")
    ap.add_argument("--threshold", type=float, default=0.3)
    ap.add_argument("--num-perm", type=int, default=128)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--shuffle-partitions", type=int, default=8)
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "neardup-bench"),
                    help="generated corpora (and run outputs) live here")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    shares = [args.only] if args.only is not None else args.shares
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)

    base = Config().with_overrides(
        {
            "input.format": "parquet",
            "output.mode": "overwrite",
            "verify.threshold": args.threshold,
            "minhash.num_perm": args.num_perm,
            "spark.master": args.master,
            "spark.shuffle_partitions": args.shuffle_partitions,
        }
    )
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    spark = build_session(base.spark)

    runs = []
    report: dict = {}
    for share in shares:
        spec = corpus.CorpusSpec(n_docs=args.docs, seed=args.seed, boilerplate_share=share, footer_share=1.0)
        path, gen_s = corpus_path(cache, f"boilerplate-{share:.2f}", spec)
        gen = "cached" if gen_s is None else f"generated in {gen_s} s"
        print(f"[{share:.2f}] corpus {path} ({gen})", flush=True)
        for strip in (False, True):
            mode = "on" if strip else "off"
            out = cache / f"boilerplate-out-{args.docs}-{share:.2f}-{mode}"
            cfg = base.with_overrides({"input.path": str(path), "output.path": str(out),
                                       "boilerplate.enabled": strip})
            load = [round(x, 2) for x in os.getloadavg()]  # the machine is shared: record how busy it was
            tree = pipeline_tree()  # and the pipeline may be edited between (or during) runs
            start = time.perf_counter()
            report = run(spark, cfg)
            wall = round(time.perf_counter() - start, 2)
            q = score(path, out)
            p = q["pairs"]
            row = {
                "share": share, "stripping": mode, "docs": args.docs,
                "precision": p["precision"], "recall": p["recall"], "f1": p["f1"],
                "candidate_pairs": report["counts"].get("candidate_pairs"),
                "verified_pairs": report["counts"].get("verified_pairs"),
                "largest_cluster": q["largest_cluster"]["documents"],
                "largest_cluster_labels": q["largest_cluster"]["labels"],
                "wall_seconds": wall, "pipeline_wall_seconds": report["wall_seconds"],
                "stage_seconds": report["stage_seconds"],
                "pairs": p, "recall_by_edit": q["recall_by_edit"], "counts": report["counts"],
                "boilerplate": ({k: report["boilerplate"].get(k) for k in
                                 ("lines", "stripped_segments", "documents_stripped", "min_documents", "unit")}
                                if strip else None),
                "lsh": report["lsh"],
                "meets_target": p["precision"] >= PRECISION_TARGET and p["recall"] >= RECALL_TARGET,
                "corpus_generation_seconds": gen_s if not strip else None,
                "load_average_before": load,
                "pipeline_tree": tree, "pipeline_changed_during_run": source_digest() != tree["source_sha256"],
            }
            runs.append(row)
            bp = row["boilerplate"]
            extra = (f", stripped {bp['lines']} lines from {bp['documents_stripped']} documents" if bp else "")
            print(f"[{share:.2f} {mode}] {wall} s, candidates {row['candidate_pairs']}, verified {row['verified_pairs']}, "
                  f"precision {row['precision']:.6f}, recall {row['recall']:.6f}{extra}", flush=True)
    if existing is None:
        spark.stop()

    print()
    print(f"corpus: {args.docs} documents (seed {args.seed}, every one with site boilerplate), "
          f"threshold {args.threshold}, P={args.num_perm}")
    print(f"{'share':>5} {'strip':>5} {'precision':>10} {'recall':>9} {'F1':>9} {'candidates':>11} {'verified':>10} "
          f"{'largest':>8} {'bp lines':>8} {'docs stripped':>13} {'wall s':>7} {'target':>6}")
    for r in runs:
        bp = r["boilerplate"] or {}
        target = ("met" if r["meets_target"] else "NOT") if r["stripping"] == "on" else "-"
        print(f"{r['share']:>5.2f} {r['stripping']:>5} {r['precision']:>10.6f} {r['recall']:>9.6f} {r['f1']:>9.6f} "
              f"{r['candidate_pairs']:>11} {r['verified_pairs']:>10} {r['largest_cluster']:>8} "
              f"{bp.get('lines', '-')!s:>8} {bp.get('documents_stripped', '-')!s:>13} {r['wall_seconds']:>7} {target:>6}")
    print()
    for r in runs:
        print(f"{r['share']:.2f} {r['stripping']:<3} stage seconds {json.dumps(r['stage_seconds'])}")
    for r in runs:
        print(f"{r['share']:.2f} {r['stripping']:<3} recall by edit {json.dumps(r['recall_by_edit'])}")

    sources = {r["pipeline_tree"]["source_sha256"] for r in runs}
    changed = [f"{r['share']:.2f} {r['stripping']}" for r in runs if r["pipeline_changed_during_run"]]
    if len(sources) > 1 or changed:
        print(f"\nWARNING: the pipeline source changed across these runs ({len(sources)} versions"
              f"{'; during ' + ', '.join(changed) if changed else ''})")
    on = [r for r in runs if r["stripping"] == "on"]
    all_met = bool(on) and all(r["meets_target"] for r in on)
    print(f"\nstripping on: every share meets precision >= {PRECISION_TARGET} and recall >= {RECALL_TARGET}: "
          f"{'yes' if all_met else 'NO'}"
          + ("" if all_met else " (not met: " + ", ".join(f"{r['share']:.2f}" for r in on if not r["meets_target"]) + ")"))

    result = {
        "benchmark": "boilerplate", "docs": args.docs, "seed": args.seed, "shares": shares,
        "threshold": args.threshold, "num_perm": args.num_perm, "master": args.master,
        "shuffle_partitions": args.shuffle_partitions,
        "target": {"precision": PRECISION_TARGET, "recall": RECALL_TARGET},
        "all_on_meet_target": all_met,
        "machine": machine(), "spark_version": report.get("spark_version"),
        "runs": runs,
    }
    save(result, args.out, "boilerplate.json")
    return result


if __name__ == "__main__":
    main()
