"""Signature-stage throughput, side by side in one run: docs/s per core.

    .venv/bin/python -m benchmarks.signatures --docs 25000

On the seeded corpus (generated once under --work, as in benchmarks.scale):

* `numpy reference`: a plain vectorised MinHash written here, independent of
  the package: str.lower/split per document, token hashes, 5-word shingles
  combined by slices, 128 affine 32-bit permutations in a loop over a
  cache-sized batch, `np.minimum.reduceat`. One core, text in memory.
* `neardup kernel`: the package's `sketch_arrays` (normalise + digest +
  shingles + MinHash + band keys) on Arrow batches of 10k, one core, no Spark.
* `neardup UDF in Spark`: the same sketch as the pipeline runs it (`sketch`,
  an Arrow UDF, `mapInArrow`) over the cached text in Spark local[2]; wall time of a noop write,
  docs/s divided by the 2 cores, at each of --udf-docs (the first N
  documents of the same corpus). A Spark job has fixed costs (~0.4 s here
  for a UDF that does nothing over 25k documents), which weigh on a run of
  1.5 s: the larger size shows the stage's throughput.
* `datasketch`: `MinHash(num_perm=128).update_batch` with the shingling in
  Python, as its users write it. It runs in the peers venv
  (benchmarks/setup-peers.sh, which installs datasketch there), never in .venv;
  the column is skipped if that venv has no datasketch.

Every implementation runs on each of --variants of the same documents
(`benchmarks/variants.py`): `ascii`, the corpus as generated, and
`typographic`, each document between curly quotes as real English text has
them, the case where Python's str methods slow down (the UDF rows of that
variant run at the largest --udf-docs only).

Prints a table and writes benchmarks/results/signatures.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import machine, save
from benchmarks.scale import corpus_dir
from benchmarks.variants import CLOSE_QUOTE, OPEN_QUOTE, VARIANTS, variant_texts

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
NUM_PERM, K, BATCH = 128, 5, 512

_DATASKETCH = r"""
import sys, time, json
from datasketch import MinHash
with open(sys.argv[1], encoding="utf-8") as fh:
    texts = [json.loads(line) for line in fh]
start = time.process_time()
for t in texts:
    w = t.lower().split()
    m = MinHash(num_perm=128)
    m.update_batch([" ".join(w[i : i + 5]).encode() for i in range(max(1, len(w) - 4))])
print(json.dumps({"seconds": time.process_time() - start, "docs": len(texts)}))
"""


def numpy_reference(texts: list[str]) -> np.ndarray:
    """Plain vectorised MinHash: [n, 128] uint32. Deliberately independent of neardup_spark."""
    rng = np.random.default_rng(0)
    a = rng.integers(1, 2**32, NUM_PERM, dtype=np.uint64).astype(np.uint32) | np.uint32(1)
    b = rng.integers(0, 2**32, NUM_PERM, dtype=np.uint64).astype(np.uint32)
    out = np.empty((len(texts), NUM_PERM), dtype=np.uint32)
    for lo in range(0, len(texts), BATCH):
        words = [t.lower().split() for t in texts[lo : lo + BATCH]]
        counts = np.fromiter((max(len(w) - K + 1, 1) for w in words), np.int64, len(words))
        tok = np.fromiter((hash(x) for w in words for x in w), np.int64).view(np.uint64)
        lens = np.fromiter((len(w) for w in words), np.int64, len(words))
        starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
        acc = np.zeros(tok.size, dtype=np.uint64)
        for j in range(K):  # shingle i = tokens i..i+4, combined by slices
            acc[: tok.size - j] = acc[: tok.size - j] * np.uint64(0x100000001B3) + tok[j:]
        keep = np.concatenate([np.arange(s, s + c) for s, c in zip(starts, counts)])
        sh = (acc[keep] >> np.uint64(32)).astype(np.uint32)
        seg = np.concatenate(([0], np.cumsum(counts)[:-1]))
        buf = np.empty_like(sh)
        for i in range(NUM_PERM):  # one permutation at a time over the batch
            np.multiply(sh, a[i], out=buf)
            np.add(buf, b[i], out=buf)
            out[lo : lo + len(words), i] = np.minimum.reduceat(buf, seg)
    return out


def cpu_rate(fn, texts, repeats: int = 2) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn(texts)
        best = min(best, time.process_time() - start)
    return len(texts) / best


def kernel(texts: list[str]) -> None:
    import pyarrow as pa

    from neardup_spark import hashing
    from neardup_spark.config import Config
    from neardup_spark.params import lsh_params
    from neardup_spark.sketch import sketch_arrays

    cfg = Config()
    a, b = hashing.permutations(cfg.minhash.num_perm, cfg.minhash.seed)
    lsh = lsh_params(cfg)
    for lo in range(0, len(texts), 10_000):  # Arrow batches of 10k UTF-8 bytes, as the worker sees them
        batch = pa.array([t.encode("utf-8") for t in texts[lo : lo + 10_000]], pa.binary())
        sketch_arrays(batch, cfg.normalise, "word", K, cfg.minhash.seed, a, b, lsh)


def spark_udf(path: Path, sizes: list[int], master: str, variants: list[str]) -> dict[tuple[str, int], dict]:
    from pyspark.sql import functions as F

    from neardup_spark.config import load_config
    from neardup_spark.session import build_session
    from neardup_spark.sketch import sketch

    cfg = load_config(ROOT / "conf" / "local.toml", overrides={"spark.master": master})
    spark = build_session(cfg.spark)
    try:
        cores = spark.sparkContext.defaultParallelism
        out = {}
        runs = [(v, docs) for v in variants for docs in (sizes if v == "ascii" else sizes[-1:])]
        for variant, docs in runs:
            # limit() leaves one partition: spread the rows so every core works.
            parts = 2 * cores * max(1, docs // 25_000)
            col = F.col("text")
            if variant != "ascii":
                col = F.concat(F.lit(OPEN_QUOTE), col, F.lit(CLOSE_QUOTE))
            text = spark.read.parquet(str(path)).select(col.alias("text")).limit(docs).repartition(parts).cache()
            n = text.count()
            rates = []
            for _ in range(2):
                start = time.perf_counter()
                sketch(text, cfg).write.format("noop").mode("overwrite").save()
                rates.append(n / (time.perf_counter() - start) / cores)
            text.unpersist()
            out[(variant, n)] = {"docs_per_s_per_core": max(rates), "cores": cores, "partitions": parts, "docs": n}
        return out
    finally:
        spark.stop()


def datasketch(texts: list[str], python: str) -> dict | None:
    if not Path(python).exists():
        print(f"datasketch skipped: no {python} (run benchmarks/setup-peers.sh)", file=sys.stderr)
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as fh:
        fh.writelines(json.dumps(t) + "\n" for t in texts)
    try:
        proc = subprocess.run([python, "-c", _DATASKETCH, fh.name], capture_output=True, text=True)
    finally:
        os.unlink(fh.name)
    if proc.returncode:
        print(f"datasketch skipped: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    out = json.loads(proc.stdout)
    return {"docs_per_s_per_core": out["docs"] / out["seconds"]}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=25_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--udf-docs", type=int, nargs="+", default=[25_000, 100_000],
                    help="documents for the in-Spark UDF rows (the first N of one corpus)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS),
                    help="the documents as generated (ascii) and/or between curly quotes (typographic)")
    ap.add_argument("--peers-python", default=str(ROOT / ".venv-peers" / "bin" / "python"))
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "neardup-bench"))
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    import pyarrow.parquet as pq

    corpus_docs = max(args.docs, *args.udf_docs)
    path = corpus_dir(Path(args.work), corpus_docs, args.seed)
    texts = pq.read_table(path, columns=["text"]).column("text").to_pylist()[: args.docs]
    chars = float(np.mean([len(t) for t in texts]))
    udf = spark_udf(path, sorted(args.udf_docs), args.master, args.variants)
    rows = {}
    for variant in args.variants:
        docs = variant_texts(texts, variant)
        rows[f"{variant}: numpy reference (1 core)"] = {"docs_per_s_per_core": cpu_rate(numpy_reference, docs)}
        rows[f"{variant}: neardup kernel (1 core, no Spark)"] = {"docs_per_s_per_core": cpu_rate(kernel, docs)}
        for (v, n), row in udf.items():
            if v == variant:
                rows[f"{variant}: neardup Arrow UDF, Spark {args.master}, {n // 1000}k"] = row
        rows[f"{variant}: datasketch 128 perm (1 core)"] = datasketch(docs, args.peers_python)
    print(f"corpus: the first {args.docs} of {corpus_docs} docs (seed {args.seed}), mean {chars:.0f} chars")
    print(f"{'implementation':<55} {'docs/s/core':>12} {'vs numpy ref':>13} {'vs datasketch':>14}")
    for name, row in rows.items():
        variant = name.split(":")[0]
        if row is None:
            print(f"{name:<55} {'skipped':>12}")
            continue
        ref = rows[f"{variant}: numpy reference (1 core)"]["docs_per_s_per_core"]
        ds = (rows[f"{variant}: datasketch 128 perm (1 core)"] or {}).get("docs_per_s_per_core")
        rate = row["docs_per_s_per_core"]
        vs_ds = f"{rate / ds:.1f}x" if ds else "-"
        print(f"{name:<55} {rate:>12,.0f} {rate / ref:>12.2f}x {vs_ds:>14}")
    result = {
        "benchmark": "signatures", "docs": args.docs, "corpus_docs": corpus_docs, "udf_docs": args.udf_docs,
        "variants": args.variants,
        "mean_chars": round(chars),
        "machine": machine(),
        "rows": rows,
    }
    save(result, args.out, "signatures.json")
    return result


if __name__ == "__main__":
    main()
