"""A seeded, labelled corpus of news-like documents for tests, demos and benchmarks.

Each *story* is an original article plus the seven controlled edits of
MISSION.md (whitespace/case reflow, one character changed, one word changed,
sentences reordered within paragraphs, 5% of words replaced, 10% of text
appended, 50% of text appended); all eight share a `group` label. The rest
are unrelated articles, some of which carry one of a few shared boilerplate
footers, each in a group of its own. Pure Python + numpy; no Spark.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

EDITS = ("whitespace", "char", "word", "reorder", "replace5", "append10", "append50")
SOURCES = tuple(f"site{i:02d}" for i in range(12))
_SYLLABLES = (
    "ba be bi bo bu ca ce ci co cu da de di do du fa fe fi fo fu ga ge gi go gu ha he hi ho hu "
    "ka ke ki ko ku la le li lo lu ma me mi mo mu na ne ni no nu pa pe pi po pu ra re ri ro ru "
    "sa se si so su ta te ti to tu va ve vi vo vu za ze zi zo zu tra tre pro pla ste str ment ion"
).split()
_EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class CorpusSpec:
    n_docs: int = 25_000
    seed: int = 7
    dup_share: float = 0.5  # share of documents that belong to 8-document stories
    footer_share: float = 0.3  # share of unrelated documents with a shared footer
    n_footers: int = 4
    words: int = 350  # typical article length in words
    vocab_size: int = 30_000


class _Writer:
    """Random article text from a Zipf-like vocabulary."""

    def __init__(self, rng: np.random.Generator, vocab_size: int):
        self.rng = rng
        syl = np.array(_SYLLABLES)
        n_syl = rng.integers(2, 5, size=vocab_size)
        words = set()
        out = []
        for n in n_syl:
            w = "".join(rng.choice(syl, size=n))
            if w not in words:
                words.add(w)
                out.append(w)
        self.vocab = np.array(out)
        ranks = np.arange(1, self.vocab.size + 1, dtype=float)
        p = 1.0 / ranks**0.9
        self.cdf = np.cumsum(p / p.sum())

    def words(self, n: int) -> list[str]:
        idx = np.searchsorted(self.cdf, self.rng.random(n))
        return self.vocab[np.minimum(idx, self.vocab.size - 1)].tolist()

    def sentence(self) -> list[str]:
        return self.words(int(self.rng.integers(8, 21)))

    def article(self, n_words: int) -> list[list[list[str]]]:
        """Paragraphs of sentences of words, about n_words in all."""
        paragraphs, total = [], 0
        while total < n_words:
            para = []
            for _ in range(int(self.rng.integers(3, 7))):
                s = self.sentence()
                para.append(s)
                total += len(s)
                if total >= n_words:
                    break
            paragraphs.append(para)
        return paragraphs


def render(paragraphs: list[list[list[str]]]) -> str:
    """Paragraphs -> text with capitalised sentences and full stops."""
    return "\n\n".join(" ".join(_sentence_text(s) for s in para) for para in paragraphs)


def _sentence_text(words: list[str]) -> str:
    if not words:
        return ""
    first = words[0][:1].upper() + words[0][1:]
    return " ".join([first, *words[1:]]) + "."


def _flat(paragraphs) -> list[str]:
    return [w for para in paragraphs for s in para for w in s]


def apply_edit(edit: str, paragraphs, writer: _Writer, rng: np.random.Generator) -> str:
    """The text of one controlled edit of an article."""
    if edit == "whitespace":
        text = render(paragraphs)
        tokens = text.split(" ")
        seps = rng.choice(np.array([" ", "  ", "\n", " \t "]), size=len(tokens) - 1, p=[0.7, 0.1, 0.1, 0.1])
        out = [tokens[0]]
        for sep, tok in zip(seps, tokens[1:]):
            out.append(sep)
            out.append(tok.upper() if rng.random() < 0.05 else tok)
        return "".join(out).replace("\n\n", "\n \n")
    paras = [[list(s) for s in para] for para in paragraphs]
    sentences = [s for para in paras for s in para]
    if edit == "char":
        s = sentences[int(rng.integers(len(sentences)))]
        i = int(rng.integers(len(s)))
        w = s[i]
        j = int(rng.integers(len(w)))
        s[i] = w[:j] + ("x" if w[j] != "x" else "y") + w[j + 1 :]
    elif edit == "word":
        s = sentences[int(rng.integers(len(sentences)))]
        s[int(rng.integers(len(s)))] = writer.words(1)[0] + "q"
    elif edit == "reorder":
        for para in paras:
            if len(para) > 1:
                order = rng.permutation(len(para))
                if np.all(order == np.arange(len(para))):
                    order = np.roll(order, 1)
                para[:] = [para[i] for i in order]
    elif edit == "replace5":
        positions = [(si, wi) for si, s in enumerate(sentences) for wi in range(len(s))]
        pick = rng.choice(len(positions), size=max(1, round(0.05 * len(positions))), replace=False)
        fresh = writer.words(len(pick))
        for n, p in enumerate(pick):
            si, wi = positions[p]
            sentences[si][wi] = fresh[n]
    elif edit in ("append10", "append50"):
        share = 0.10 if edit == "append10" else 0.50
        extra = writer.article(max(1, round(share * len(_flat(paragraphs)))))
        return render(paras) + "\n\n" + render(extra)
    else:
        raise ValueError(f"unknown edit {edit!r}")
    return render(paras)


def generate(spec: CorpusSpec = CorpusSpec()) -> Iterator[dict]:
    """Rows {id, text, group, edit, source, published_at}, ids in shuffled order.

    Ids are integers 1..n_docs assigned by a seeded permutation, so an
    original is not always the smallest id of its story.
    """
    if spec.n_docs < 1:
        raise ValueError("n_docs must be >= 1")
    rng = np.random.default_rng(spec.seed)
    writer = _Writer(rng, spec.vocab_size)
    footers = [render(writer.article(int(rng.integers(25, 45)))) for _ in range(spec.n_footers)]
    n_stories = int(spec.n_docs * spec.dup_share) // (len(EDITS) + 1)
    n_unrelated = spec.n_docs - n_stories * (len(EDITS) + 1)
    ids = rng.permutation(spec.n_docs) + 1
    n = 0
    for story in range(n_stories):
        paragraphs = writer.article(int(rng.integers(spec.words * 3 // 4, spec.words * 5 // 4)))
        base_time = _EPOCH + dt.timedelta(minutes=int(rng.integers(0, 525_600)))
        variants = [("original", render(paragraphs))]
        variants += [(edit, apply_edit(edit, paragraphs, writer, rng)) for edit in EDITS]
        for k, (edit, text) in enumerate(variants):
            yield _row(ids[n], text, f"s{story}", edit, rng, base_time + dt.timedelta(minutes=int(k * 7)))
            n += 1
    for u in range(n_unrelated):
        paragraphs = writer.article(int(rng.integers(spec.words * 3 // 4, spec.words * 5 // 4)))
        text = render(paragraphs)
        edit = "unrelated"
        if rng.random() < spec.footer_share:
            text += "\n\n" + footers[int(rng.integers(spec.n_footers))]
            edit = "unrelated_footer"
        t = _EPOCH + dt.timedelta(minutes=int(rng.integers(0, 525_600)))
        yield _row(ids[n], text, f"u{u}", edit, rng, t)
        n += 1


def _row(doc_id, text, group, edit, rng, published_at) -> dict:
    return {
        "id": int(doc_id),
        "text": text,
        "group": group,
        "edit": edit,
        "source": SOURCES[int(rng.integers(len(SOURCES)))],
        "published_at": published_at,
    }


def write(spec: CorpusSpec, path: str | Path, fmt: str = "parquet", rows_per_file: int = 50_000) -> Path:
    """Write the corpus as Parquet files or gzipped JSON Lines under `path` (a directory)."""
    import gzip
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    batch, part = [], 0

    def flush():
        nonlocal batch, part
        if not batch:
            return
        if fmt == "parquet":
            table = pa.Table.from_pylist(batch)
            pq.write_table(table, out / f"part-{part:05d}.parquet")
        elif fmt == "jsonl":
            with gzip.open(out / f"part-{part:05d}.jsonl.gz", "wt", encoding="utf-8") as fh:
                for row in batch:
                    fh.write(json.dumps({**row, "published_at": row["published_at"].isoformat()}) + "\n")
        else:
            raise ValueError(f"format must be parquet or jsonl, got {fmt!r}")
        batch, part = [], part + 1

    for row in generate(spec):
        batch.append(row)
        if len(batch) >= rows_per_file:
            flush()
    flush()
    return out


def label_pairs(rows) -> set[tuple]:
    """All unordered (id_a, id_b), id_a < id_b, of documents sharing a group."""
    by_group: dict[str, list] = {}
    for r in rows:
        by_group.setdefault(r["group"], []).append(r["id"])
    pairs = set()
    for members in by_group.values():
        members = sorted(members)
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                pairs.add((a, b))
    return pairs
