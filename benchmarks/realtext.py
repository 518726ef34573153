"""Quality on real running text: English, Chinese and Japanese man pages with the seven edits,
run together as one archive, for each shingle unit and each linkage.

    .venv/bin/python -m benchmarks.realtext --threshold 0.3

The texts are the man pages of Debian packages, fetched with `apt-get download` into the
cache on first use and never committed here: `manpages` and `manpages-dev` (English),
`manpages-zh` (its zh_CN pages: Simplified Chinese) and `manpages-ja` (Japanese: kanji and
kana). Each page is stripped of its roff markup and cut at paragraphs into pieces of about
`--piece-chars` characters (at most five a page); a Chinese or Japanese piece is kept only
when most of its letters are in that script (a page left partly untranslated is not).
`tools.edits.real_stories` then makes each language's corpus: a share of the pieces are
originals of stories with the seven edits, the rest unrelated.

Scores per language and overall, for each setting (`--settings`, unit:k:linkage, and
`:strip` for boilerplate stripping):

- recall: the labelled story pairs found, and recall by edit;
- precision against the labels, and against the labels plus the pairs that real man
  pages already hold (two pieces with exact Jaccard >= the threshold under the default
  shingling, auto k=5: a boilerplate section many pages share is a true near-duplicate
  that no label names). Beyond `--max-checked` predicted pairs, that second precision is
  estimated from a seeded sample of them;
- F1 and ARI against the labels.

Writes benchmarks/results/realtext-<threshold>.json.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import lzma
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks import machine, save
from neardup_spark.config import Config
from neardup_spark.kernels.sketch import shingle_sets
from neardup_spark.tools.edits import real_stories, tokens, unspaced
from neardup_spark.tools.evaluate import adjusted_rand_index, pair_scores, recall_by_edit

RESULTS = Path(__file__).parent / "results"
# language: (Debian packages, the part of a member's path that marks its pages)
LANGUAGES = {
    "en": (("manpages", "manpages-dev"), "/usr/share/man/man"),
    "zh": (("manpages-zh",), "/usr/share/man/zh_CN/"),
    "ja": (("manpages-ja",), "/usr/share/man/ja/"),
}
SETTINGS = ("word:5:components", "char:3:components", "auto:5:components", "auto:5:components:strip",
            "auto:5:keeper")


def _deb_members(deb: Path) -> tarfile.TarFile:
    """The data archive of a .deb (an `ar` archive holding data.tar.*)."""
    blob = deb.read_bytes()
    if not blob.startswith(b"!<arch>\n"):
        raise SystemExit(f"{deb} is not a Debian package")
    at = 8
    while at < len(blob):
        name, size = blob[at:at + 16].decode().strip().rstrip("/"), int(blob[at + 48:at + 58])
        body = blob[at + 60:at + 60 + size]
        if name.startswith("data.tar"):
            raw = lzma.decompress(body) if name.endswith(".xz") else (
                gzip.decompress(body) if name.endswith(".gz") else body)
            return tarfile.open(fileobj=io.BytesIO(raw))
        at += 60 + size + (size % 2)
    raise SystemExit(f"{deb} holds no data archive")


def fetch(package: str, cache: Path) -> Path:
    """The package's .deb, downloaded once into cache with apt-get."""
    folder = cache / "debs"
    folder.mkdir(parents=True, exist_ok=True)
    found = sorted(folder.glob(f"{package}_*.deb"))
    if not found:
        try:
            subprocess.run(["apt-get", "download", package], cwd=folder, check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError) as e:
            raise SystemExit(f"apt-get download {package} failed ({e}): this benchmark needs Debian's archive")
        found = sorted(folder.glob(f"{package}_*.deb"))
    return found[-1]


_MACRO_TEXT = re.compile(r"^\.(?:B|I|BR|RB|IR|RI|BI|IB|SM|SB|SH|SS)\s+(.*)$")
_BREAK = re.compile(r"^\.(?:PP|P|LP|TP|IP|SH|SS|HP|sp|br|RS|RE)\b")
_ESCAPES = [(re.compile(r"\\f(?:\[[^\]]*\]|\(..|.)"), ""), (re.compile(r"\\\*(?:\[[^\]]*\]|\(..|.)"), ""),
            (re.compile(r"\\\((?:em|en)"), "—"), (re.compile(r"\\\(..|\\\[[^\]]*\]"), ""),
            (re.compile(r"\\[-]"), "-"), (re.compile(r"\\[e\\]"), "\\\\"), (re.compile(r"\\[&,/:%c|^~0 ]"), " "),
            (re.compile(r'"'), "")]


def roff_text(source: str) -> str:
    """The running text of a man page: macros that carry words keep them, others become
    paragraph breaks or nothing; escapes are dropped."""
    out: list[str] = []
    for line in source.splitlines():
        if line.startswith(('.\\"', "'\\\"", '.\\}')) or line.startswith(".so "):
            continue
        text = line
        if line.startswith((".", "'")):
            words = _MACRO_TEXT.match(line)
            if _BREAK.match(line):
                out.append("")
            if not words:
                continue
            text = words.group(1)
        for pattern, repl in _ESCAPES:
            text = pattern.sub(repl, text)
        out.append(re.sub(r"[ \t]+", " ", text).strip())
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


def pieces(text: str, size: int, most: int = 5) -> list[str]:
    """text cut at paragraph breaks into pieces of about `size` characters, at most `most`."""
    out, cur = [], ""
    for para in re.split(r"\n\s*\n", text):
        para = re.sub(r"\s*\n\s*", " ", para).strip()
        if not para:
            continue
        cur = f"{cur}\n\n{para}" if cur else para
        if len(cur) >= size:
            out.append(cur)
            cur = ""
            if len(out) == most:
                return out
    if len(cur) >= size // 2:
        out.append(cur)
    return out


def _in_script(piece: str, language: str) -> bool:
    letters = [t for t in tokens(piece) if t.isalpha()]
    if language == "en":
        return bool(letters)
    return sum(map(unspaced, letters)) >= 0.5 * len(letters)


def language_texts(language: str, cache: Path, size: int) -> list[str]:
    packages, marker = LANGUAGES[language]
    texts, seen = [], set()
    for package in packages:
        with _deb_members(fetch(package, cache)) as tar:
            for member in sorted(tar.getmembers(), key=lambda m: m.name):
                if not (member.isfile() and marker in member.name and member.name.endswith(".gz")):
                    continue
                source = gzip.decompress(tar.extractfile(member).read()).decode("utf-8", errors="replace")
                for piece in pieces(roff_text(source), size):
                    if piece not in seen and _in_script(piece, language):
                        seen.add(piece)
                        texts.append(piece)
    return texts


def corpus(languages: list[str], cache: Path, size: int, seed: int) -> pd.DataFrame:
    frames = []
    for i, language in enumerate(languages):
        rows = pd.DataFrame(real_stories(language_texts(language, cache, size), seed=seed + i, label=f"{language}:"))
        rows["id"] = rows["id"] + i * 1_000_000
        rows["language"] = language
        frames.append(rows)
    return pd.concat(frames, ignore_index=True)


def _predicted(clusters: pd.Series) -> np.ndarray:
    """Every (a, b), a < b, of one cluster, as an (n, 2) array."""
    out = []
    for members in clusters.groupby(clusters).groups.values():
        m = np.sort(np.asarray(members))
        if m.size > 1:
            i, j = np.triu_indices(m.size, 1)
            out.append(np.stack([m[i], m[j]], axis=1))
    return np.concatenate(out) if out else np.zeros((0, 2), dtype=np.int64)


class Ceiling:
    """Exact Jaccard under the default shingling, for pairs of documents."""

    def __init__(self, docs: pd.DataFrame, threshold: float):
        cfg = Config()
        sets = shingle_sets(docs["text"].tolist(), cfg.normalise, cfg.shingle.unit, cfg.shingle.k, cfg.minhash.seed)
        self.sets = dict(zip(docs["id"].to_numpy(), sets))
        self.threshold = threshold

    def holds(self, a: int, b: int) -> bool:
        x, y = self.sets[a], self.sets[b]
        if x.size == 0 or y.size == 0:
            return False
        n = np.intersect1d(x, y, assume_unique=True).size
        return n / (x.size + y.size - n) >= self.threshold


def score(clusters: pd.Series, labels: pd.DataFrame, ceiling: Ceiling, most: int, seed: int) -> dict:
    by_label = pair_scores(clusters, labels["group"])
    out = {**by_label.as_dict(), "ari": round(adjusted_rand_index(by_label, len(clusters)), 6)}
    by_edit = recall_by_edit(clusters, labels)
    out["recall_by_edit"] = {e: round(float(r), 4) for e, r in by_edit["recall"].items()}
    pairs = _predicted(clusters)
    group = labels["group"]
    unlabelled = pairs[group.loc[pairs[:, 0]].to_numpy() != group.loc[pairs[:, 1]].to_numpy()] if len(pairs) else pairs
    checked = unlabelled
    if len(unlabelled) > most:
        checked = unlabelled[np.random.default_rng(seed).choice(len(unlabelled), size=most, replace=False)]
    real = sum(ceiling.holds(int(a), int(b)) for a, b in checked)
    share = real / len(checked) if len(checked) else 1.0
    correct = by_label.correct_pairs + share * len(unlabelled)
    out["precision_with_real_pairs"] = round(correct / len(pairs), 6) if len(pairs) else 1.0
    out["unlabelled_pairs"] = int(len(unlabelled))
    out["unlabelled_checked"] = int(len(checked))
    out["unlabelled_real"] = int(real)
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--languages", default="en,zh,ja")
    ap.add_argument("--settings", default=",".join(SETTINGS),
                    help="unit:k:linkage[:strip], comma-separated (strip: boilerplate stripping on)")
    ap.add_argument("--threshold", type=float, default=0.3)
    ap.add_argument("--piece-chars", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-checked", type=int, default=200_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "neardup-bench" / "realtext"))
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    languages = args.languages.split(",")
    docs = corpus(languages, Path(args.cache), args.piece_chars, args.seed)
    labels = docs.set_index("id")[["group", "edit", "language"]]
    sizes = docs.groupby("language").size().to_dict()
    print("documents: " + ", ".join(f"{k} {v:,}" for k, v in sizes.items()), flush=True)
    ceiling = Ceiling(docs, args.threshold)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from neardup_spark import deduplicate
    from neardup_spark.config import SparkConfig
    from neardup_spark.runtime.session import build_session

    spark = build_session(SparkConfig(master=args.master, shuffle_partitions=8))
    frame = spark.createDataFrame(docs[["id", "text"]]).cache()
    runs = []
    for setting in args.settings.split(","):
        unit, k, linkage, *strip = setting.split(":")
        cfg = Config().with_overrides({"shingle.unit": unit, "shingle.k": int(k), "cluster.linkage": linkage,
                                       "boilerplate.enabled": strip == ["strip"]})
        start = time.perf_counter()
        result = deduplicate(frame, cfg, threshold=args.threshold)
        clusters = result.clusters.select("doc_id", "cluster_id").toPandas().set_index("doc_id")["cluster_id"]
        seconds = round(time.perf_counter() - start, 2)
        row = {"unit": unit, "k": int(k), "linkage": linkage, "strip": strip == ["strip"], "seconds": seconds,
               "all": score(clusters, labels, ceiling, args.max_checked, args.seed),
               "counts": dict(result.report["counts"])}
        for language in languages:
            mine = labels.index[labels["language"] == language]
            row[language] = score(clusters.loc[mine], labels.loc[mine], ceiling, args.max_checked, args.seed)
        result.unpersist()
        runs.append(row)
        print(f"{setting}: " + " | ".join(
            f"{s} P {row[s]['precision']:.4f} (real {row[s]['precision_with_real_pairs']:.4f}) R {row[s]['recall']:.4f}"
            for s in ["all", *languages]) + f"  ({seconds} s)", flush=True)
        for language in languages:
            print(f"    {language} recall by edit: {json.dumps(row[language]['recall_by_edit'])}", flush=True)
    spark.stop()
    result = {"benchmark": "realtext", "languages": languages, "documents": sizes, "threshold": args.threshold,
              "piece_chars": args.piece_chars, "seed": args.seed, "runs": runs, "master": args.master,
              "machine": machine()}
    save(result, args.out, f"realtext-{args.threshold}.json")
    return result


if __name__ == "__main__":
    main()
