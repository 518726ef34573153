"""A seeded, labelled corpus of news-like documents for tests, demos and benchmarks.

Each *story* is an original article plus the seven controlled edits of
MISSION.md (whitespace/case reflow, one character changed, one word changed,
sentences reordered within paragraphs, 5% of words replaced, 10% of text
appended, 50% of text appended); all eight share a `group` label. The rest
are unrelated articles, some of which carry one of a few shared boilerplate
footers, each in a group of its own. Pure Python + numpy; no Spark.

Two options stress what the default corpus does not (both off by default, and
with both off the output is byte-for-byte what it always was):

- `big_clusters=(5000, 20000)`: stories copied that many times (the original
  plus light edits and exact copies, `BIG_CLUSTER_EDITS`), each cluster one
  `group` (`b0`, `b1`, ...). They take the place of other documents, so
  `n_docs` stays as asked: the remaining documents are split between 8-document
  stories and unrelated articles by `dup_share` as usual.
- `boilerplate_share=0.3`: the `n_footers` shared blocks become site
  boilerplate, header lines before and footer lines after the article, sized so
  that they make up that share of the words of a median-length document. The
  `footer_share` draw then applies to every document (story copies included),
  and a document that carries a block carries its site's: its `source` is one of
  the sites using that block (`SOURCES[i]` uses block `i % n_footers`), so copies
  of one story on different sites carry different blocks, and unrelated articles
  of one site share many shingles.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Iterator

import numpy as np

EDITS = ("whitespace", "char", "word", "reorder", "replace5", "append10", "append50")
SOURCES = tuple(f"site{i:02d}" for i in range(12))
# Edits of the copies in a big cluster, with their shares: light edits, all
# well above Jaccard 0.3 with the original; "exact" is the original's text.
BIG_CLUSTER_EDITS = (
    ("exact", 0.10),
    ("whitespace", 0.10),
    ("char", 0.20),
    ("word", 0.20),
    ("replace5", 0.10),
    ("append10", 0.15),
    ("append50", 0.05),
    ("reorder", 0.10),
)
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
    big_clusters: tuple[int, ...] = ()  # sizes of stories copied many times (documents each)
    boilerplate_share: float = 0.0  # > 0: shared blocks are site boilerplate, this share of a median document
    script: str = "latin"  # latin | han | thai: han and thai are written without spaces between words
    vocabulary: tuple[str, ...] = ()  # real words, most frequent first, instead of made-up ones


SCRIPTS = ("latin", "han", "thai")
# Made-up words of the unspaced scripts: Han words of 1-4 characters from the first
# HAN_CHARS ideographs; Thai words of 1-4 syllables (a consonant and a vowel sign).
HAN_CHARS = 3000
_THAI_CONSONANTS = [chr(c) for c in range(0x0E01, 0x0E2F)]
_THAI_VOWELS = [chr(c) for c in (0x0E30, 0x0E31, 0x0E32, 0x0E34, 0x0E35, 0x0E36, 0x0E37, 0x0E38, 0x0E39)]


class _Writer:
    """Random article text from a Zipf-like vocabulary, in one script."""

    def __init__(self, rng: np.random.Generator, vocab_size: int, script: str = "latin",
                 vocabulary: tuple[str, ...] = ()):
        self.rng = rng
        self.script = script
        self.spaced = script == "latin"
        if vocabulary:
            out = list(dict.fromkeys(w for w in vocabulary if w.strip()))[:vocab_size]
        else:
            if script == "han":
                syl, n_syl = np.array([chr(0x4E00 + i) for i in range(HAN_CHARS)]), rng.choice(
                    [1, 2, 3, 4], size=vocab_size, p=[0.15, 0.6, 0.2, 0.05])
            elif script == "thai":
                syl = np.array([c + v for c in _THAI_CONSONANTS for v in _THAI_VOWELS])
                n_syl = rng.integers(1, 5, size=vocab_size)
            else:
                syl, n_syl = np.array(_SYLLABLES), rng.integers(2, 5, size=vocab_size)
            words = set()
            out = []
            for n in n_syl:
                w = "".join(rng.choice(syl, size=n))
                if w not in words:
                    words.add(w)
                    out.append(w)
        self.vocab = np.array(out)
        self.letters = sorted({ch for w in out for ch in w})
        ranks = np.arange(1, self.vocab.size + 1, dtype=float)
        p = 1.0 / ranks**0.9
        self.cdf = np.cumsum(p / p.sum())

    def words(self, n: int) -> list[str]:
        idx = np.searchsorted(self.cdf, self.rng.random(n))
        return self.vocab[np.minimum(idx, self.vocab.size - 1)].tolist()

    def sentence(self) -> list[str]:
        return self.words(int(self.rng.integers(8, 21)))

    def render(self, paragraphs: list[list[list[str]]]) -> str:
        return render(paragraphs, self.script)

    def mark(self) -> str:
        """A letter that makes a word a new one ("word" edit)."""
        return "q" if self.spaced else self.letters[-1]

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


def render(paragraphs: list[list[list[str]]], script: str = "latin") -> str:
    """Paragraphs -> text with capitalised sentences and full stops (latin), or, in a script
    written without spaces, words run together: Han sentences end with "。", Thai ones with
    a space."""
    if script == "han":
        return "\n\n".join("".join("".join(s) + "。" for s in para) for para in paragraphs)
    if script == "thai":
        return "\n\n".join(" ".join("".join(s) for s in para) for para in paragraphs)
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
    if edit == "whitespace" and not writer.spaced:  # spaces and line breaks between some words
        paras = [[[w + str(rng.choice(np.array(["", " ", "\n"]), p=[0.8, 0.15, 0.05])) for w in s] for s in para]
                 for para in paragraphs]
        return writer.render(paras)
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
        if writer.spaced:
            s[i] = w[:j] + ("x" if w[j] != "x" else "y") + w[j + 1 :]
        else:
            s[i] = w[:j] + (writer.letters[0] if w[j] != writer.letters[0] else writer.letters[1]) + w[j + 1 :]
    elif edit == "word":
        s = sentences[int(rng.integers(len(sentences)))]
        s[int(rng.integers(len(s)))] = writer.words(1)[0] + writer.mark()
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
        return writer.render(paras) + "\n\n" + writer.render(extra)
    else:
        raise ValueError(f"unknown edit {edit!r}")
    return writer.render(paras)


def generate(spec: CorpusSpec = CorpusSpec(), shard: int = 0, shards: int = 1) -> Iterator[dict]:
    """Rows {id, text, group, edit, source, published_at}, ids in shuffled order.

    Ids are integers 1..n_docs assigned by a seeded permutation, so an
    original is not always the smallest id of its story.

    With shards > 1 this is piece `shard` of a corpus written in `shards`
    independent pieces (`write_sharded`): the vocabulary and the shared
    footers or site blocks are the whole corpus's (drawn from the seed alone),
    so a footer is shared across every shard; the stories, unrelated
    documents and their ids are the shard's own (its stories do not cross
    shards; ids are a permutation of the shard's own range, groups end in
    "@shard"); the big clusters are all in shard 0. One shard (the default)
    is exactly the corpus of `spec`.
    """
    check_spec(spec)
    if not 0 <= shard < shards:
        raise ValueError(f"shard must be in [0, {shards}), got {shard}")
    rng = np.random.default_rng(spec.seed)
    writer = _Writer(rng, spec.vocab_size, spec.script, spec.vocabulary)
    render = writer.render
    site = spec.boilerplate_share > 0
    if site:
        blocks = _site_blocks(spec, writer)
    else:
        footers = [render(writer.article(int(rng.integers(25, 45)))) for _ in range(spec.n_footers)]
    first, n_docs = shard_range(spec.n_docs, shard, shards)
    suffix = f"@{shard}" if shards > 1 else ""
    if shards > 1:
        rng = writer.rng = np.random.default_rng([spec.seed, shard])
    big = spec.big_clusters if shard == 0 else ()
    if sum(big) > n_docs:
        raise ValueError(f"big_clusters ({sum(big)} documents) do not fit in shard 0 ({n_docs} documents)")
    rest = n_docs - sum(big)
    n_stories = int(rest * spec.dup_share) // (len(EDITS) + 1)
    n_unrelated = rest - n_stories * (len(EDITS) + 1)
    ids = rng.permutation(n_docs) + first
    n = 0

    def dress(text: str):
        """Site mode: (text with its site's header and footer, source) or (text, None)."""
        if rng.random() >= spec.footer_share:
            return text, None
        s = int(rng.integers(len(SOURCES)))
        header, footer = blocks[s % spec.n_footers]
        return f"{header}\n\n{text}\n\n{footer}", SOURCES[s]

    for story in range(n_stories):
        paragraphs = writer.article(int(rng.integers(spec.words * 3 // 4, spec.words * 5 // 4)))
        base_time = _EPOCH + dt.timedelta(minutes=int(rng.integers(0, 525_600)))
        variants = [("original", render(paragraphs))]
        variants += [(edit, apply_edit(edit, paragraphs, writer, rng)) for edit in EDITS]
        for k, (edit, text) in enumerate(variants):
            source = None
            if site:
                text, source = dress(text)
            yield _row(ids[n], text, f"s{story}{suffix}", edit, rng, base_time + dt.timedelta(minutes=int(k * 7)),
                       source)
            n += 1
    for u in range(n_unrelated):
        paragraphs = writer.article(int(rng.integers(spec.words * 3 // 4, spec.words * 5 // 4)))
        text = render(paragraphs)
        edit = "unrelated"
        source = None
        if site:
            text, source = dress(text)
            if source is not None:
                edit = "unrelated_boilerplate"
        elif rng.random() < spec.footer_share:
            text += "\n\n" + footers[int(rng.integers(spec.n_footers))]
            edit = "unrelated_footer"
        t = _EPOCH + dt.timedelta(minutes=int(rng.integers(0, 525_600)))
        yield _row(ids[n], text, f"u{u}{suffix}", edit, rng, t, source)
        n += 1
    big_edits = np.array([e for e, _ in BIG_CLUSTER_EDITS])
    big_p = np.array([p for _, p in BIG_CLUSTER_EDITS])
    for b, size in enumerate(big):
        paragraphs = writer.article(int(rng.integers(spec.words * 3 // 4, spec.words * 5 // 4)))
        original = render(paragraphs)
        base_time = _EPOCH + dt.timedelta(minutes=int(rng.integers(0, 525_600)))
        picks = rng.choice(big_edits.size, size=size - 1, p=big_p / big_p.sum())
        for k in range(size):
            edit = "original" if k == 0 else str(big_edits[picks[k - 1]])
            if edit in ("original", "exact"):
                text = original
            else:
                text = apply_edit(edit, paragraphs, writer, rng)
            source = None
            if site:
                text, source = dress(text)
            t = base_time + dt.timedelta(minutes=int(rng.integers(0, 30 * 1440))) if k else base_time
            yield _row(ids[n], text, f"b{b}{suffix}", edit, rng, t, source)
            n += 1


def chains(n_chains: int = 12, seed: int = 5, shift: int = 35, window: int = 100,
           unrelated: int = 10) -> list[dict]:
    """Documents that chain: each chain of 3-6 documents is `window`-word windows of one run of
    unique words, each `shift` words on from the last, so neighbours share about
    (window - shift) / (window + shift) of their 5-shingles (~0.47) and documents two apart far
    less (~0.16). Rows {id, text, group (the chain), position}; ids are shuffled, so the
    smallest id of a chain falls anywhere along it. `unrelated` documents of their own words
    come last (group u0, u1, ...)."""
    rng = np.random.default_rng(seed)
    rows, word = [], 0
    for c in range(n_chains):
        length = int(rng.integers(3, 7))
        words = [f"w{word + i}" for i in range(window + shift * (length - 1))]
        word += len(words)
        rows += [{"text": " ".join(words[shift * j: shift * j + window]), "group": f"c{c}", "position": j}
                 for j in range(length)]
    rows += [{"text": " ".join(f"u{i}x{j}" for j in range(80)), "group": f"u{i}", "position": 0}
             for i in range(unrelated)]
    ids = rng.permutation(len(rows)) + 1
    return [{"id": int(i), **r} for i, r in zip(ids, rows)]


def check_spec(spec: CorpusSpec) -> None:
    """Refuse, with a ValueError naming the field, a spec no corpus can be generated from."""
    if spec.n_docs < 1:
        raise ValueError("n_docs must be >= 1")
    if spec.script not in SCRIPTS:
        raise ValueError(f"script must be one of {SCRIPTS}; got {spec.script!r}")
    if any(int(size) != size or size < 2 for size in spec.big_clusters):
        raise ValueError(f"big_clusters sizes must be integers >= 2; got {spec.big_clusters}")
    if sum(spec.big_clusters) > spec.n_docs:
        raise ValueError(f"big_clusters hold {sum(spec.big_clusters)} documents, more than n_docs={spec.n_docs}")
    if not 0.0 <= spec.boilerplate_share < 1.0:
        raise ValueError(f"boilerplate_share must be in [0, 1); got {spec.boilerplate_share}")
    if spec.boilerplate_share > 0 and spec.n_footers < 1:
        raise ValueError("boilerplate_share > 0 needs n_footers >= 1")


def boilerplate_words(spec: CorpusSpec) -> int:
    """Words in one site block, so that it is boilerplate_share of the words of a median document."""
    return round(spec.boilerplate_share / (1.0 - spec.boilerplate_share) * median_article_words(spec.words))


def median_article_words(words: int) -> int:
    """Median length in words of the generator's articles for `words` (targets overshoot by part of a sentence).

    Simulated with a fixed private seed, as `_Writer.article` draws lengths, so
    it does not depend on (or disturb) any corpus's random stream.
    """
    rng = np.random.default_rng(0)
    targets = rng.integers(words * 3 // 4, words * 5 // 4, size=4001)
    sentences = rng.integers(8, 21, size=(targets.size, max(words * 5 // 4, 1) // 8 + 2))
    totals = np.cumsum(sentences, axis=1)
    first = np.argmax(totals >= targets[:, None], axis=1)  # the sentence that reaches the target
    return int(np.median(totals[np.arange(targets.size), first]))


def _site_blocks(spec: CorpusSpec, writer: _Writer) -> list[tuple[str, str]]:
    """n_footers (header, footer) pairs: short menu-like lines, about a third of the words before."""
    total = boilerplate_words(spec)
    blocks = []
    for _ in range(spec.n_footers):
        n_header = total // 3
        blocks.append((_lines(writer, n_header), _lines(writer, total - n_header)))
    return blocks


def _lines(writer: _Writer, n_words: int) -> str:
    """n_words words as lines of 3-9 words, like navigation menus and footer links."""
    words = writer.words(n_words)
    lines, i = [], 0
    while i < len(words):
        step = int(writer.rng.integers(3, 10))
        lines.append(" | ".join(words[i : i + step]))
        i += step
    return "\n".join(lines)


def site_blocks(spec: CorpusSpec) -> list[tuple[str, str]]:
    """The (header, footer) blocks `generate(spec)` uses when boilerplate_share > 0."""
    check_spec(spec)
    if spec.boilerplate_share <= 0:
        return []
    rng = np.random.default_rng(spec.seed)
    return _site_blocks(spec, _Writer(rng, spec.vocab_size, spec.script, spec.vocabulary))


def _row(doc_id, text, group, edit, rng, published_at, source=None) -> dict:
    return {
        "id": int(doc_id),
        "text": text,
        "group": group,
        "edit": edit,
        "source": SOURCES[int(rng.integers(len(SOURCES)))] if source is None else source,
        "published_at": published_at,
    }


def shard_range(n_docs: int, shard: int, shards: int) -> tuple[int, int]:
    """(first id, documents) of shard `shard` of n_docs split in `shards` near-equal pieces."""
    size, extra = divmod(n_docs, shards)
    return 1 + shard * size + min(shard, extra), size + (shard < extra)


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
