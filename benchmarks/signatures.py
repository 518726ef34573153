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
  documents of the same corpus; each size cached and run once untimed
  first). A Spark job has fixed costs (~0.4 s here for a UDF that does
  nothing over 25k documents), which weigh on a run of 1.5 s: the larger
  size shows the stage's throughput.
* `datasketch`: `MinHash(num_perm=128).update_batch` with the shingling in
  Python, as its users write it. It runs in the peers venv
  (benchmarks/setup-peers.sh, which installs datasketch there), never in .venv;
  the column is skipped if that venv has no datasketch.

Every implementation runs on each of --variants of the same documents
(`benchmarks/variants.py`): `ascii`, the corpus as generated, and
`typographic`, each document between curly quotes as real English text has
them, the case where Python's str methods slow down (the UDF rows of that
variant run at the largest --udf-docs only).

Every row is timed --rounds times (3 by default), all rows once a round, in
reverse order every other round, with one Spark session kept up throughout.
This machine is shared: its speed drifts by a third between runs minutes
apart, so a ratio of two figures taken minutes apart moves with it. Each
round's ratios (to its own numpy reference and datasketch run) are therefore
taken within the round, and the table gives the median rate and the median
of each ratio over the rounds, with the per-round ratios to datasketch.

Every row is timed by wall clock, the Spark rows' clock; the single-core
rows' CPU-time rates (which leave out what the hypervisor steals) are kept
in the JSON as cpu_docs_per_s, and each round's steal is printed. Until
2026-12-03 the single-core rows were timed by CPU time alone, against the
Spark rows' wall time, which favoured them by what was stolen (wall time
ran 3-22% over CPU time in eight single-core runs by hand here, with 8% of
the machine stolen in one of them); and datasketch was timed once, where
it now gets the best of REPEATS passes like the package's single-core rows.

Prints each round and the table, and writes benchmarks/results/signatures.json
(medians under "rows", every timing under "by_round").
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

import numpy as np

from benchmarks import machine, save
from benchmarks.scale import corpus_dir
from benchmarks.variants import CLOSE_QUOTE, OPEN_QUOTE, VARIANTS, variant_texts

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
NUM_PERM, K, BATCH = 128, 5, 512
REPEATS = 2  # passes per single-core timing, the best kept (datasketch's too)

_DATASKETCH = r"""
import sys, time, json
from datasketch import MinHash
with open(sys.argv[1], encoding="utf-8") as fh:
    texts = [json.loads(line) for line in fh]
best = {"seconds": float("inf"), "cpu_seconds": float("inf")}
for _ in range(int(sys.argv[2])):  # the best of as many passes as the package's rows get
    wall, cpu = time.perf_counter(), time.process_time()
    for t in texts:
        w = t.lower().split()
        m = MinHash(num_perm=128)
        m.update_batch([" ".join(w[i : i + 5]).encode() for i in range(max(1, len(w) - 4))])
    best = {"seconds": min(best["seconds"], time.perf_counter() - wall),
            "cpu_seconds": min(best["cpu_seconds"], time.process_time() - cpu)}
print(json.dumps({**best, "docs": len(texts)}))
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


def one_core_rate(fn, texts, repeats: int = REPEATS) -> dict:
    """docs/s of fn over texts on this one core: the best of `repeats` by wall time, the
    clock the Spark rows are timed by (and, for the record, by this process's CPU time,
    which leaves out what the hypervisor steals: wall time ran 3-22% over it here)."""
    wall = cpu = float("inf")
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn(texts)
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return {"docs_per_s_per_core": len(texts) / wall, "cpu_docs_per_s": len(texts) / cpu}


def kernel(texts: list[str]) -> None:
    import pyarrow as pa

    from neardup_spark.kernels import hashing
    from neardup_spark.config import Config
    from neardup_spark.kernels.lsh import lsh_params
    from neardup_spark.kernels.sketch import sketch_arrays

    cfg = Config()
    a, b = hashing.permutations(cfg.minhash.num_perm, cfg.minhash.seed)
    lsh = lsh_params(cfg)
    for lo in range(0, len(texts), 10_000):  # Arrow batches of 10k UTF-8 bytes, as the worker sees them
        batch = pa.array([t.encode("utf-8") for t in texts[lo : lo + 10_000]], pa.binary())
        sketch_arrays(batch, cfg.normalise, "word", K, cfg.minhash.seed, a, b, lsh)


class SparkUdf:
    """The sketch as the pipeline runs it, over text cached once per (variant, size) in a
    session kept up for the whole benchmark, so that every round times it again."""

    def __init__(self, path: Path, sizes: list[int], master: str, variants: list[str]):
        from pyspark.sql import functions as F

        from neardup_spark.config import load_config
        from neardup_spark.runtime.session import build_session

        self.cfg = load_config(ROOT / "conf" / "local.toml", overrides={"spark.master": master})
        self.spark = build_session(self.cfg.spark)
        self.cores = self.spark.sparkContext.defaultParallelism
        self.frames = {}
        for variant in variants:
            for docs in (sizes if variant == "ascii" else sizes[-1:]):
                # limit() leaves one partition: spread the rows so every core works.
                parts = 2 * self.cores * max(1, docs // 25_000)
                col = F.col("text")
                if variant != "ascii":
                    col = F.concat(F.lit(OPEN_QUOTE), col, F.lit(CLOSE_QUOTE))
                text = self.spark.read.parquet(str(path)).select(col.alias("text")).limit(docs).repartition(parts).cache()
                n = text.count()
                self.frames[(variant, docs)] = (text, n, parts)
                self._write(text)  # untimed: the first run of a plan pays for its code generation

    def sizes(self, variant: str) -> list[int]:
        return [docs for v, docs in self.frames if v == variant]

    def _write(self, text) -> None:
        from neardup_spark.plan import resolve
        from neardup_spark.stages.sketch import sketch

        sketch(text, self.cfg, resolve(self.cfg).matcher).write.format("noop").mode("overwrite").save()

    def rate(self, variant: str, docs: int) -> dict:
        """One timed run: docs/s of wall time, divided by the cores."""
        text, n, parts = self.frames[(variant, docs)]
        start = time.perf_counter()
        self._write(text)
        return {"docs_per_s_per_core": n / (time.perf_counter() - start) / self.cores, "cores": self.cores,
                "partitions": parts, "docs": n}

    def stop(self) -> None:
        for text, _, _ in self.frames.values():
            text.unpersist()
        self.spark.stop()


def datasketch(texts: list[str], python: str) -> dict | None:
    if not Path(python).exists():
        print(f"datasketch skipped: no {python} (run benchmarks/setup-peers.sh)", file=sys.stderr)
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as fh:
        fh.writelines(json.dumps(t) + "\n" for t in texts)
    try:
        proc = subprocess.run([python, "-c", _DATASKETCH, fh.name, str(REPEATS)], capture_output=True, text=True)
    finally:
        os.unlink(fh.name)
    if proc.returncode:
        print(f"datasketch skipped: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    out = json.loads(proc.stdout)
    return {"docs_per_s_per_core": out["docs"] / out["seconds"], "cpu_docs_per_s": out["docs"] / out["cpu_seconds"]}


def measures(variant: str, texts: list[str], udf: SparkUdf, master: str, python: str):
    """(row name, a function timing it once) for one variant, in display order."""
    out = [("numpy reference (1 core)", lambda: one_core_rate(numpy_reference, texts)),
           ("neardup kernel (1 core, no Spark)", lambda: one_core_rate(kernel, texts))]
    for n in udf.sizes(variant):
        out.append((f"neardup Arrow UDF, Spark {master}, {n // 1000}k", lambda n=n: udf.rate(variant, n)))
    out.append(("datasketch 128 perm (1 core)", lambda: datasketch(texts, python)))
    return out


def run_round(rnd: int, plan: list[tuple[str, object]]) -> dict[str, dict | None]:
    """One timing of every row; every other round runs them in reverse order, so that
    drift in the machine's speed falls on every implementation alike."""
    order = plan if rnd % 2 == 0 else plan[::-1]
    timed = {name: fn() for name, fn in order}
    return {name: timed[name] for name, _ in plan}


_PER_ROUND = ("docs_per_s_per_core", "cpu_docs_per_s")


def steal_ticks() -> tuple[int, int] | None:
    """(ticks stolen by the hypervisor, all ticks) so far, from /proc/stat (None off Linux)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (fields[7] if len(fields) > 7 else 0), sum(fields)


def steal_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The share of the machine's CPU time the hypervisor took between two readings."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return round((after[0] - before[0]) / (after[1] - before[1]), 3)


def summarise(rounds: list[dict[str, dict | None]]) -> dict[str, dict | None]:
    """Per row ("variant: implementation"): the median docs/s/core over the rounds, and the
    medians of its per-round ratios to the same round's numpy reference and datasketch
    (ratios within a round are what this shared machine keeps; seconds drift between
    rounds). None for a row no round could time."""
    out: dict[str, dict | None] = {}
    for name in rounds[0]:
        variant = name.split(":")[0]
        timed = [r[name] for r in rounds if r.get(name)]
        if not timed:
            out[name] = None
            continue
        rates = [t["docs_per_s_per_core"] for t in timed]
        row = {k: v for k, v in timed[0].items() if k not in _PER_ROUND}
        row.update(docs_per_s_per_core=statistics.median(rates), rounds=[round(x, 1) for x in rates])
        cpu = [t["cpu_docs_per_s"] for t in timed if "cpu_docs_per_s" in t]
        if cpu:
            row["cpu_docs_per_s"] = statistics.median(cpu)
        for label, ref in (("vs_numpy_ref", "numpy reference (1 core)"), ("vs_datasketch", "datasketch 128 perm (1 core)")):
            ref = f"{variant}: {ref}"
            ratios = [r[name]["docs_per_s_per_core"] / r[ref]["docs_per_s_per_core"]
                      for r in rounds if r.get(name) and r.get(ref)]
            if ratios:
                row[label] = round(statistics.median(ratios), 2)
                row[f"{label}_rounds"] = [round(x, 2) for x in ratios]
        out[name] = row
    return out


def table(rows: dict[str, dict | None]) -> list[str]:
    """The printed table: medians, and the per-round ratios to datasketch."""
    lines = [f"{'implementation':<55} {'docs/s/core':>12} {'vs numpy ref':>13} {'vs datasketch':>14}  by round"]
    for name, row in rows.items():
        if row is None:
            lines.append(f"{name:<55} {'skipped':>12}")
            continue
        ref = f"{row['vs_numpy_ref']:.2f}x" if "vs_numpy_ref" in row else "-"
        ds = f"{row['vs_datasketch']:.1f}x" if "vs_datasketch" in row else "-"
        rounds = ", ".join(f"{x:.1f}" for x in row.get("vs_datasketch_rounds", []))
        lines.append(f"{name:<55} {row['docs_per_s_per_core']:>12,.0f} {ref:>13} {ds:>14}  {rounds}")
    return lines


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=25_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--udf-docs", type=int, nargs="+", default=[25_000, 100_000],
                    help="documents for the in-Spark UDF rows (the first N of one corpus)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="times every row is timed, alternating the order; the table gives medians")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS),
                    help="the documents as generated (ascii) and/or between curly quotes (typographic)")
    ap.add_argument("--peers-python", default=str(ROOT / ".venv-peers" / "bin" / "python"))
    ap.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "neardup-bench"))
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    import pyarrow.parquet as pq

    corpus_docs = max(args.docs, *args.udf_docs)
    path = corpus_dir(Path(args.work), corpus_docs, args.seed)
    texts = pq.read_table(path, columns=["text"]).column("text").to_pylist()[: args.docs]
    chars = float(np.mean([len(t) for t in texts]))
    print(f"corpus: the first {args.docs} of {corpus_docs} docs (seed {args.seed}), mean {chars:.0f} chars")
    udf = SparkUdf(path, sorted(args.udf_docs), args.master, args.variants)
    try:
        plan = [(f"{variant}: {name}", fn) for variant in args.variants
                for name, fn in measures(variant, variant_texts(texts, variant), udf, args.master, args.peers_python)]
        rounds, steal = [], []
        for rnd in range(args.rounds):
            before = steal_ticks()
            rounds.append(run_round(rnd, plan))
            steal.append(steal_share(before, steal_ticks()))
            stolen = "" if steal[-1] is None else f" (hypervisor steal {steal[-1]:.1%})"
            print(f"round {rnd + 1}{stolen}:")
            for name, row in rounds[-1].items():
                print(f"  {name:<55} {row['docs_per_s_per_core']:>12,.0f}" if row else f"  {name:<55} {'skipped':>12}")
    finally:
        udf.stop()
    rows = summarise(rounds)
    print(f"medians of {args.rounds} round(s), each ratio taken within its round:")
    print("\n".join(table(rows)))
    result = {
        "benchmark": "signatures", "docs": args.docs, "corpus_docs": corpus_docs, "udf_docs": args.udf_docs,
        "variants": args.variants, "rounds": args.rounds, "steal_by_round": steal,
        "mean_chars": round(chars),
        "machine": machine(),
        "rows": rows,
        "by_round": rounds,
    }
    save(result, args.out, "signatures.json")
    return result


if __name__ == "__main__":
    main()
