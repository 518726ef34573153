"""SimHash against MinHash on the seven-edit corpus: pair precision/recall/F1 per method,
recall per edit type, and the bytes each keeps per document.

    .venv/bin/python -m benchmarks.simhash --docs 10000 --distances 3 6 6 --blocks 0 0 9

Each configuration is one whole-pipeline run of `benchmarks.quality` (same
corpus, same session): MinHash at threshold 0.3 with the chosen (b, r), and
SimHash at each Hamming distance. Bytes per document are what the method's
index keeps to find candidates (MinHash: the band keys; SimHash: the 8-byte
fingerprint; both also keep the shingle set for exact verification).
Writes benchmarks/results/simhash.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from benchmarks import machine, quality, save

RESULTS = Path(__file__).parent / "results"
EDITS = ("whitespace", "char", "word", "reorder", "replace5", "append10", "append50")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--distances", type=int, nargs="+", default=[3, 6])
    ap.add_argument("--blocks", type=int, nargs="+", default=None,
                    help="blocks per distance (same order; 0: distance + 1)")
    ap.add_argument("--threshold", type=float, default=0.3)
    ap.add_argument("--shuffle-partitions", type=int, default=8)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    scratch = tempfile.mkdtemp(prefix="neardup-simhash-")
    common = ["--docs", str(args.docs), "--seed", str(args.seed), "--threshold", str(args.threshold),
              "--shuffle-partitions", str(args.shuffle_partitions), "--out", scratch]
    runs = [("minhash", quality.main([*common, "--method", "minhash"]))]
    blocks = args.blocks or [0] * len(args.distances)
    for k, nb in zip(args.distances, blocks):
        name = f"simhash k={k}" + (f" b={nb}" if nb else "")
        runs.append((name, quality.main([*common, "--method", "simhash", "--hamming-distance", str(k),
                                         "--blocks", str(nb)])))
    rows = []
    for name, r in runs:
        lsh = r["lsh"]
        per_doc = 8 if r["method"] == "simhash" else 8 * lsh["bands"]
        rows.append({
            "method": name, "pairs": r["pairs"], "recall_by_edit": r["recall_by_edit"],
            "candidate_pairs": r["counts"]["candidate_pairs"], "verified_pairs": r["counts"]["verified_pairs"],
            "lookup_bytes_per_document": per_doc, "lsh": lsh, "pipeline_wall_seconds": r["pipeline_wall_seconds"],
        })
    print(f"\nseven-edit corpus, {args.docs} documents (seed {args.seed}), MinHash threshold {args.threshold}")
    head = f"{'method':<13}{'precision':>10}{'recall':>8}{'F1':>8}{'cands':>9}{'bytes/doc':>10}  " + " ".join(
        f"{e[:9]:>9}" for e in EDITS)
    print(head)
    for row in rows:
        p = row["pairs"]
        edits = " ".join(f"{row['recall_by_edit'].get(e, float('nan')):>9.3f}" for e in EDITS)
        print(f"{row['method']:<13}{p['precision']:>10.4f}{p['recall']:>8.4f}{p['f1']:>8.4f}"
              f"{row['candidate_pairs']:>9}{row['lookup_bytes_per_document']:>10}  {edits}")
    result = {"benchmark": "simhash", "docs": args.docs, "seed": args.seed, "threshold": args.threshold,
              "rows": rows, "machine": machine()}
    save(result, args.out, "simhash.json")
    return result


if __name__ == "__main__":
    main()
