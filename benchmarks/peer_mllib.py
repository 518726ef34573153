"""Near-duplicate pairs with Spark MLlib's MinHashLSH, written the way a user would.

    .venv/bin/python benchmarks/peer_mllib.py --input CORPUS_DIR --output pairs.csv

A peer for benchmarks/peers.py, not part of the package. Reads the parquet
corpus (id and text columns), lower-cases and splits on non-word characters
(RegexTokenizer), builds word 5-grams (NGram), hashes them into a sparse
binary vector (HashingTF), fits MinHashLSH with 5 hash tables and self-joins
with approxSimilarityJoin at Jaccard *distance* 0.7 (similarity >= 0.3, the
same threshold as neardup's default). Pairs with a < b are collected to the
driver and written as a CSV file (a, b, distance). Session: local[2], 8
shuffle partitions, 4g driver heap, as conf/local.toml gives neardup.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time

from pyspark.ml import Pipeline
from pyspark.ml.feature import HashingTF, MinHashLSH, NGram, RegexTokenizer
from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", required=True, help="parquet file or directory")
    ap.add_argument("--output", required=True, help="CSV file of pairs to write (a,b,distance)")
    ap.add_argument("--id-col", default="id")
    ap.add_argument("--text-col", default="text")
    ap.add_argument("--distance", type=float, default=0.7, help="Jaccard distance threshold (1 - similarity)")
    ap.add_argument("--ngram", type=int, default=5)
    ap.add_argument("--hash-tables", type=int, default=5)
    ap.add_argument("--num-features", type=int, default=1 << 18)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--shuffle-partitions", type=int, default=8)
    ap.add_argument("--driver-memory", default="4g")
    args = ap.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.appName("peer-mllib-minhashlsh")
        .master(args.master)
        .config("spark.driver.memory", args.driver_memory)
        .config("spark.sql.shuffle.partitions", str(args.shuffle_partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    t0 = time.perf_counter()

    docs = spark.read.parquet(args.input).select(
        F.col(args.id_col).alias("id"), F.lower(F.col(args.text_col)).alias("text"))
    features = Pipeline(stages=[
        RegexTokenizer(inputCol="text", outputCol="tokens", pattern="\\W+", minTokenLength=1),
        NGram(n=args.ngram, inputCol="tokens", outputCol="ngrams"),
        HashingTF(inputCol="ngrams", outputCol="features", numFeatures=args.num_features, binary=True),
    ]).fit(docs).transform(docs)
    # MinHashLSH rejects all-zero vectors: documents shorter than n words have no n-grams.
    features = features.filter(F.size("ngrams") > 0).select("id", "features").cache()
    model = MinHashLSH(inputCol="features", outputCol="hashes", numHashTables=args.hash_tables,
                       seed=args.seed).fit(features)
    joined = model.approxSimilarityJoin(features, features, args.distance, distCol="distance")
    pairs = (joined.select(F.col("datasetA.id").alias("a"), F.col("datasetB.id").alias("b"), "distance")
             .filter(F.col("a") < F.col("b")))
    rows = pairs.collect()

    with open(args.output, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["a", "b", "distance"])
        w.writerows((r["a"], r["b"], r["distance"]) for r in rows)
    print(json.dumps({"pairs": len(rows), "spark_version": spark.version,
                      "seconds_after_session": round(time.perf_counter() - t0, 2)}))
    spark.stop()


if __name__ == "__main__":
    main()
