"""Pair precision/recall against labels on a generated seven-edit corpus.

    .venv/bin/python -m benchmarks.quality --docs 25000 --threshold 0.3 --num-perm 128

Generates the corpus (seeded), runs the whole pipeline in local mode through
the same `run` the CLI uses, scores clusters against the corpus labels, prints
a table and writes benchmarks/results/quality-<docs>.json.
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
from neardup_spark.tools import corpus, corpus_files
from neardup_spark.config import Config
from neardup_spark.tools.evaluate import pair_scores, recall_by_edit
from neardup_spark.api import run
from neardup_spark.runtime.session import build_session

RESULTS = Path(__file__).parent / "results"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=25_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--threshold", type=float, default=0.3)
    ap.add_argument("--num-perm", type=int, default=128)
    ap.add_argument("--method", choices=["minhash", "simhash"], default="minhash")
    ap.add_argument("--hamming-distance", type=int, default=3, help="SimHash: bits a duplicate may differ in")
    ap.add_argument("--blocks", type=int, default=0, help="SimHash: blocks (0: hamming distance + 1)")
    ap.add_argument("--simhash-bits", type=int, choices=[64, 128], default=64)
    ap.add_argument("--simhash-weighting", choices=["none", "tf"], default="none")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--shuffle-partitions", type=int, default=8)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="neardup-quality-"))
    t0 = time.perf_counter()
    corpus_files.write(corpus.CorpusSpec(n_docs=args.docs, seed=args.seed), work / "corpus", "parquet")
    gen_s = time.perf_counter() - t0
    cfg = Config().with_overrides(
        {
            "input.path": str(work / "corpus"),
            "input.format": "parquet",
            "output.path": str(work / "out"),
            "verify.threshold": args.threshold,
            "minhash.num_perm": args.num_perm,
            "match.method": args.method,
            "simhash.hamming_distance": args.hamming_distance,
            "simhash.blocks": args.blocks,
            "simhash.bits": args.simhash_bits,
            "simhash.weighting": args.simhash_weighting,
            "spark.master": args.master,
            "spark.shuffle_partitions": args.shuffle_partitions,
        }
    )
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    spark = build_session(cfg.spark)
    report = run(spark, cfg)
    if existing is None:
        spark.stop()

    labels = pd.read_parquet(work / "corpus", columns=["id", "group", "edit"]).set_index("id")
    clusters = pd.read_parquet(work / "out" / "clusters", columns=["doc_id", "cluster_id"]).set_index("doc_id")
    scores = pair_scores(clusters["cluster_id"], labels["group"])
    by_edit = recall_by_edit(clusters["cluster_id"], labels)

    result = {
        "benchmark": "quality",
        "docs": args.docs,
        "seed": args.seed,
        "threshold": args.threshold,
        "num_perm": args.num_perm,
        "method": args.method,
        "lsh": report["lsh"],
        "pairs": scores.as_dict(),
        "recall_by_edit": {e: round(float(r), 6) for e, r in by_edit["recall"].items()},
        "counts": report["counts"],
        "stage_seconds": report["stage_seconds"],
        "pipeline_wall_seconds": report["wall_seconds"],
        "corpus_generation_seconds": round(gen_s, 2),
        "master": args.master,
        "machine": machine(),
        "spark_version": report["spark_version"],
    }
    layout = (f"P={args.num_perm}, b={report['lsh']['bands']} r={report['lsh']['rows']}" if args.method == "minhash"
              else f"SimHash {args.simhash_bits} bits ({args.simhash_weighting} weights) k={args.hamming_distance}, "
                   f"{report['lsh']['tables']} tables")
    print(f"corpus: {args.docs} documents (seed {args.seed}), threshold {args.threshold}, {layout}")
    print(f"pair precision {scores.precision:.6f}  recall {scores.recall:.6f}  F1 {scores.f1:.6f}  "
          f"(true {scores.true_pairs}, predicted {scores.predicted_pairs}, correct {scores.correct_pairs})")
    print("recall by edit:")
    for edit, row in by_edit.iterrows():
        print(f"  {edit:<11} {row['recall']:.4f}  ({int(row['found'])}/{int(row['copies'])})")
    print("counts:", json.dumps(report["counts"]))
    print("stage seconds:", json.dumps(report["stage_seconds"]), f"pipeline wall {report['wall_seconds']} s")
    name = f"quality-{args.docs}.json" if args.method == "minhash" else \
        f"quality-{args.docs}-simhash{args.simhash_bits}-{args.simhash_weighting}-k{args.hamming_distance}.json"
    save(result, args.out, name)
    return result


if __name__ == "__main__":
    main()
