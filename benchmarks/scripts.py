"""Pair precision and recall, per script, on a mixed corpus of English and scripts written
without spaces (Chinese, Thai), for each shingle unit.

    .venv/bin/python -m benchmarks.scripts --docs-per-script 2500 --words real

Each script gets its own seven-edit corpus (`tools.corpus`, `script=`) of the same size;
the corpora are run together, as one archive, through `neardup_spark.deduplicate` once per
setting (`--settings`, default: word k=5, char k=3, auto k=5), and the clusters are scored
against the labels, overall and per script (`tools.evaluate.pair_scores`).

`--words real` takes each unspaced script's words, most frequent first, from word lists that
ship inside PyPI packages (jieba's dict.txt, PyThaiNLP's phupha_word_freqs.txt), fetched
with `pip download --no-deps` into the cache on first use and never committed here;
`--words made-up` uses the generator's made-up words. English always uses made-up words.
Writes benchmarks/results/scripts-<docs>-<words>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

import pandas as pd

from benchmarks import machine, save
from neardup_spark.tools import corpus
from neardup_spark.tools.evaluate import adjusted_rand_index, pair_scores, recall_by_edit

RESULTS = Path(__file__).parent / "results"
SETTINGS = ("word:5", "char:3", "auto:5")
# (package, file inside its sdist or wheel, parser) of each script's real word list.
WORD_LISTS = {
    "han": ("jieba==0.42.1", "jieba/dict.txt"),
    "thai": ("pythainlp==5.4.0", "pythainlp/corpus/phupha_word_freqs.txt"),
}
VOCAB = 30_000


def _fetch(package: str, member: str, cache: Path) -> str:
    """The text of `member` inside `package`, downloaded once into `cache`."""
    folder = cache / package.replace("==", "-")
    if not folder.exists() or not any(folder.iterdir()):
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(folder), package],
                       check=True)
    archive = next(folder.iterdir())
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as z:
            return z.read(member).decode("utf-8")
    with tarfile.open(archive) as t:
        name = next(n for n in t.getnames() if n.endswith(member))
        return t.extractfile(name).read().decode("utf-8")


def real_words(script: str, cache: Path) -> tuple[str, ...]:
    """The script's words, most frequent first: whole words of its own letters, two or more."""
    package, member = WORD_LISTS[script]
    counted = []
    for line in _fetch(package, member, cache).splitlines():
        parts = line.split()
        if len(parts) >= 2 and len(parts[0]) >= 2 and parts[1].isdigit():
            word = parts[0]
            if script == "han" and not all("\u4e00" <= ch <= "\u9fff" for ch in word):
                continue
            if script == "thai" and not all("\u0e00" <= ch <= "\u0e7f" for ch in word):
                continue
            counted.append((int(parts[1]), word))
    counted.sort(key=lambda c: -c[0])
    return tuple(w for _, w in counted[:VOCAB])


def mixed_corpus(scripts: list[str], docs: int, words: str, cache: Path) -> pd.DataFrame:
    frames = []
    for i, script in enumerate(scripts):
        vocabulary = real_words(script, cache) if words == "real" and script in WORD_LISTS else ()
        rows = pd.DataFrame(corpus.generate(corpus.CorpusSpec(n_docs=docs, seed=7 + i, script=script,
                                                              vocabulary=vocabulary)))
        rows["id"] = rows["id"] + i * 10 * docs
        rows["group"] = script + ":" + rows["group"]
        rows["script"] = script
        frames.append(rows[["id", "text", "group", "edit", "script"]])
    return pd.concat(frames, ignore_index=True)


def score(clusters: pd.Series, labels: pd.DataFrame) -> dict:
    scores = pair_scores(clusters, labels["group"])
    out = {**scores.as_dict(), "ari": round(adjusted_rand_index(scores, len(clusters)), 6)}
    by_edit = recall_by_edit(clusters, labels)
    out["recall_by_edit"] = {e: round(float(r), 4) for e, r in by_edit["recall"].items()}
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs-per-script", type=int, default=2500)
    ap.add_argument("--scripts", default="latin,han,thai")
    ap.add_argument("--words", choices=["real", "made-up"], default="real")
    ap.add_argument("--settings", default=",".join(SETTINGS), help="unit:k, comma-separated")
    ap.add_argument("--threshold", type=float, default=0.3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "neardup-bench" / "word-lists"))
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    scripts = args.scripts.split(",")
    docs = mixed_corpus(scripts, args.docs_per_script, args.words, Path(args.cache))
    labels = docs.set_index("id")[["group", "edit", "script"]]

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from neardup_spark import deduplicate
    from neardup_spark.config import Config, SparkConfig
    from neardup_spark.runtime.session import build_session

    spark = build_session(SparkConfig(master=args.master, shuffle_partitions=8))
    frame = spark.createDataFrame(docs[["id", "text"]]).cache()
    runs = []
    for setting in args.settings.split(","):
        unit, k = setting.split(":")
        cfg = Config().with_overrides({"shingle.unit": unit, "shingle.k": int(k)})
        start = time.perf_counter()
        result = deduplicate(frame, cfg, threshold=args.threshold)
        clusters = result.clusters.select("doc_id", "cluster_id").toPandas().set_index("doc_id")["cluster_id"]
        seconds = round(time.perf_counter() - start, 2)
        row = {"unit": unit, "k": int(k), "seconds": seconds, "all": score(clusters, labels),
               "counts": dict(result.report["counts"])}
        for script in scripts:
            mine = labels.index[labels["script"] == script]
            row[script] = score(clusters.loc[mine], labels.loc[mine])
        result.unpersist()
        runs.append(row)
        print(f"{unit} k={k}: all P {row['all']['precision']:.4f} R {row['all']['recall']:.4f} | " + " | ".join(
            f"{s} P {row[s]['precision']:.4f} R {row[s]['recall']:.4f}" for s in scripts) + f"  ({seconds} s)",
            flush=True)
        for script in scripts:
            print(f"    {script} recall by edit: {json.dumps(row[script]['recall_by_edit'])}")
    spark.stop()
    result = {"benchmark": "scripts", "docs_per_script": args.docs_per_script, "scripts": scripts,
              "words": args.words, "threshold": args.threshold, "runs": runs, "master": args.master,
              "machine": machine()}
    save(result, args.out, f"scripts-{args.docs_per_script}-{args.words}.json")
    return result


if __name__ == "__main__":
    main()
