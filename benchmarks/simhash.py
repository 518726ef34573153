"""SimHash against MinHash on the seven-edit corpus: pair precision/recall/F1 per method,
recall per edit type, and the bytes each keeps per document.

    .venv/bin/python -m benchmarks.simhash --docs 10000 \
        --simhash k=3 k=6 k=6,blocks=9 k=12,bits=128,blocks=16 k=6,weighting=tf

Each configuration is one whole-pipeline run of `benchmarks.quality` (same
corpus, same session): MinHash at threshold 0.3 with the chosen (b, r), and
one SimHash run per `--simhash` spec (k = Hamming distance; blocks, 0 for
k + 1; bits, 64 or 128; weighting, none or tf). Bytes per document are what
the method's index keeps to find candidates (MinHash: the band keys; SimHash:
the 8- or 16-byte fingerprint; both also keep the shingle set for exact
verification). Writes benchmarks/results/simhash.json.
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


_DEFAULTS = {"blocks": 0, "bits": 64, "weighting": "none"}


def _spec(text: str) -> dict:
    """'k=6,blocks=9,bits=128,weighting=tf' -> a SimHash configuration (k is required)."""
    try:
        given = dict(part.split("=", 1) for part in text.split(","))
        spec = {"k": int(given.pop("k")), **_DEFAULTS}
        for key, value in given.items():
            if key not in _DEFAULTS:
                raise KeyError(key)
            spec[key] = value if key == "weighting" else int(value)
    except (KeyError, ValueError) as e:
        raise argparse.ArgumentTypeError(f"bad SimHash spec {text!r} ({e}): want k=K[,blocks=B][,bits=..][,weighting=..]")
    return spec


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--simhash", nargs="+", type=_spec, default=[_spec("k=3"), _spec("k=6")],
                    metavar="k=K[,blocks=B][,bits=64|128][,weighting=none|tf]")
    ap.add_argument("--threshold", type=float, default=0.3)
    ap.add_argument("--shuffle-partitions", type=int, default=8)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    scratch = tempfile.mkdtemp(prefix="neardup-simhash-")
    common = ["--docs", str(args.docs), "--seed", str(args.seed), "--threshold", str(args.threshold),
              "--shuffle-partitions", str(args.shuffle_partitions), "--out", scratch]
    runs = [("minhash", quality.main([*common, "--method", "minhash"]))]
    for spec in args.simhash:
        name = "simhash " + ",".join(f"{k}={v}" for k, v in spec.items() if (k, v) not in _DEFAULTS.items())
        runs.append((name, quality.main([
            *common, "--method", "simhash", "--hamming-distance", str(spec["k"]), "--blocks", str(spec["blocks"]),
            "--simhash-bits", str(spec["bits"]), "--simhash-weighting", spec["weighting"]])))
    rows = []
    for name, r in runs:
        lsh = r["lsh"]
        per_doc = lsh["fingerprint_bytes"] if r["method"] == "simhash" else 8 * lsh["bands"]
        rows.append({
            "method": name, "pairs": r["pairs"], "recall_by_edit": r["recall_by_edit"],
            "candidate_pairs": r["counts"]["candidate_pairs"], "verified_pairs": r["counts"]["verified_pairs"],
            "lookup_bytes_per_document": per_doc, "lsh": lsh, "pipeline_wall_seconds": r["pipeline_wall_seconds"],
        })
    print(f"\nseven-edit corpus, {args.docs} documents (seed {args.seed}), MinHash threshold {args.threshold}")
    width = max(13, *(len(row["method"]) + 1 for row in rows))
    head = f"{'method':<{width}}{'precision':>10}{'recall':>8}{'F1':>8}{'cands':>9}{'bytes/doc':>10}  " + " ".join(
        f"{e[:9]:>9}" for e in EDITS)
    print(head)
    for row in rows:
        p = row["pairs"]
        edits = " ".join(f"{row['recall_by_edit'].get(e, float('nan')):>9.3f}" for e in EDITS)
        print(f"{row['method']:<{width}}{p['precision']:>10.4f}{p['recall']:>8.4f}{p['f1']:>8.4f}"
              f"{row['candidate_pairs']:>9}{row['lookup_bytes_per_document']:>10}  {edits}")
    result = {"benchmark": "simhash", "docs": args.docs, "seed": args.seed, "threshold": args.threshold,
              "rows": rows, "machine": machine()}
    save(result, args.out, "simhash.json")
    return result


if __name__ == "__main__":
    main()
