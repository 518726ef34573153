"""Chaining, measured: pair precision, recall and F1 of each cluster linkage against exact
Jaccard, on generated chains, the seven-edit corpus and two corpora of real licence texts.

    .venv/bin/python -m benchmarks.linkage --threshold 0.7

Corpora (`--corpora`):

- `chains`: `tools.corpus.chains`, windows of one run of words, each shifted from the last
  (neighbours ~0.47 Jaccard, two apart ~0.16);
- `seven-edit`: the generator's stories and unrelated articles;
- `debian-copyright`: every /usr/share/doc/*/copyright file of this machine's Debian
  packages (licence texts, many of them near-identical yet distinct);
- `python-licences`: the licence files of the Python packages installed for this
  interpreter and Debian's (`*.dist-info/LICEN[CS]E*`, `*.dist-info/licenses/**`).

The real texts are read where they are installed, never copied into the repository. The
truth is every pair at or above the threshold by exact Jaccard of the pipeline's own shingle
sets (brute force over all pairs: the ceiling any linkage is measured against); ARI is against
the corpus labels where there are labels (chains, seven-edit). Writes
benchmarks/results/linkage-<threshold>.json.
"""

from __future__ import annotations

import argparse
import glob
import itertools
import os
import site
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks import machine, save
from neardup_spark.config import Config
from neardup_spark.kernels.sketch import shingle_sets
from neardup_spark.tools import corpus
from neardup_spark.tools.evaluate import PairScores, adjusted_rand_index, pair_scores

RESULTS = Path(__file__).parent / "results"
CORPORA = ("chains", "seven-edit", "debian-copyright", "python-licences")


def _files(patterns: list[str]) -> pd.DataFrame:
    seen, rows = set(), []
    for path in sorted(p for pattern in patterns for p in glob.glob(pattern, recursive=True)):
        real = os.path.realpath(path)
        if real in seen or not os.path.isfile(real):
            continue
        seen.add(real)
        text = Path(real).read_text("utf-8", errors="replace")
        if text.strip():
            rows.append({"text": text, "source": path})
    frame = pd.DataFrame(rows)
    frame.insert(0, "id", np.arange(1, len(frame) + 1))
    return frame


def load(name: str, docs: int) -> pd.DataFrame:
    if name == "chains":
        return pd.DataFrame(corpus.chains(n_chains=max(1, docs // 5), seed=5, unrelated=docs // 10))
    if name == "seven-edit":
        return pd.DataFrame(corpus.generate(corpus.CorpusSpec(n_docs=docs, seed=7, words=200)))
    if name == "debian-copyright":
        return _files(["/usr/share/doc/*/copyright"])
    roots = sorted({*site.getsitepackages(), "/usr/lib/python3/dist-packages"})
    return _files([f"{root}/*.dist-info/LICEN[CS]E*" for root in roots] +
                  [f"{root}/*.dist-info/licenses/**/*" for root in roots])


def truth_pairs(texts: list[str], ids: np.ndarray, cfg: Config, threshold: float) -> set:
    """Every (a, b), a < b, with exact Jaccard >= threshold of the pipeline's shingle sets
    (all pairs, numpy intersections: the corpora here are a few thousand documents)."""
    sets = shingle_sets(texts, cfg.normalise, cfg.shingle.unit, cfg.shingle.k, cfg.minhash.seed)
    sizes = np.array([s.size for s in sets])
    out = set()
    for i, j in itertools.combinations(range(len(sets)), 2):
        small, big = sorted((sizes[i], sizes[j]))
        if small == 0 or small < threshold * big:  # J <= small / big: cannot reach the threshold
            continue
        n = np.intersect1d(sets[i], sets[j], assume_unique=True).size
        if n / (sizes[i] + sizes[j] - n) >= threshold:
            out.add((min(ids[i], ids[j]), max(ids[i], ids[j])))
    return out


def scores_against(clusters: pd.Series, truth: set) -> PairScores:
    groups = clusters.groupby(clusters).groups
    predicted = {(min(a, b), max(a, b)) for members in groups.values() for a, b in itertools.combinations(members, 2)}
    return PairScores(true_pairs=len(truth), predicted_pairs=len(predicted), correct_pairs=len(predicted & truth))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpora", default=",".join(CORPORA))
    ap.add_argument("--docs", type=int, default=2000, help="documents of the generated corpora")
    ap.add_argument("--threshold", type=float, default=0.7)
    ap.add_argument("--num-perm", type=int, default=256)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from neardup_spark import deduplicate
    from neardup_spark.config import SparkConfig
    from neardup_spark.runtime.session import build_session

    spark = build_session(SparkConfig(master=args.master, shuffle_partitions=8))
    base = Config().with_overrides({"verify.threshold": args.threshold, "minhash.num_perm": args.num_perm})
    rows = []
    for name in args.corpora.split(","):
        docs = load(name, args.docs)
        truth = truth_pairs(list(docs["text"]), docs["id"].to_numpy(), base, args.threshold)
        frame = spark.createDataFrame(docs[["id", "text"]]).cache()
        for linkage in ("components", "keeper"):
            start = time.perf_counter()
            result = deduplicate(frame, base.with_overrides({"cluster.linkage": linkage}))
            clusters = result.clusters.select("doc_id", "cluster_id").toPandas().set_index("doc_id")["cluster_id"]
            work = dict(result.report["work"])
            result.unpersist()
            seconds = round(time.perf_counter() - start, 2)
            s = scores_against(clusters, truth)
            row = {"corpus": name, "documents": len(docs), "linkage": linkage, "seconds": seconds,
                   "truth_pairs": len(truth), **s.as_dict(),
                   "clusters": int(clusters.nunique()), "on_driver": work.get("linkage_on_driver"),
                   "reclustered": work.get("linkage_reclustered")}
            if "group" in docs:
                labels = docs.set_index("id")["group"]
                row["ari_vs_labels"] = round(adjusted_rand_index(pair_scores(clusters, labels), len(clusters)), 6)
            rows.append(row)
            print(f"{name:<17} {len(docs):>6} docs  {linkage:<10} P {s.precision:.4f} R {s.recall:.4f} "
                  f"F1 {s.f1:.4f}" + (f" ARI {row['ari_vs_labels']:.4f}" if "ari_vs_labels" in row else "")
                  + f"  ({len(truth)} true pairs, {seconds} s)", flush=True)
        frame.unpersist()
    spark.stop()
    result = {"benchmark": "linkage", "threshold": args.threshold, "num_perm": args.num_perm, "docs": args.docs,
              "rows": rows, "master": args.master, "machine": machine()}
    save(result, args.out, f"linkage-{args.threshold:g}.json")
    return result


if __name__ == "__main__":
    main()
