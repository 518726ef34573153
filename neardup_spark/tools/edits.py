"""The seven edits of MISSION.md, applied to real text: labelled stories from texts nobody
here wrote (`real_stories`), for measuring quality where the generator is too easy.

`tools.corpus` edits the articles it makes up, word lists it knows. Real text has no
such lists, so here a text is split into tokens: a run of letters of a script written
with spaces is a word; a character of a script written without them (Han, kana, Thai,
Lao, Khmer, Myanmar...; `kernels.hashing.UNSPACED_BLOCKS`) is a word of its own; whitespace
and each other character are kept as they are. The edits then act on those tokens:

- whitespace: spaced text gets other separators (double spaces, tabs, line breaks) and
  5% of its words upper-cased; unspaced text gets spaces or line breaks between 20% of
  its characters;
- char: one character of one word changed;
- word: one word replaced by another of the corpus's words;
- reorder: the sentences of each paragraph in another order;
- replace5: 5% of the words replaced by others of the corpus (of the same kind);
- append10, append50: 10% or 50% more words, taken from another text of the corpus.

Pure Python and numpy; no Spark.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Iterator, Sequence

import numpy as np

from neardup_spark.kernels.hashing import UNSPACED_BLOCKS
from neardup_spark.tools.corpus import EDITS

_UNSPACED = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in UNSPACED_BLOCKS)
_TOKEN = re.compile(rf"[{_UNSPACED}]|[^\W\d_{_UNSPACED}]+|\d+|\s+|.", re.S)
_UNSPACED_CHAR = re.compile(rf"[{_UNSPACED}]")
# A sentence ends after 。！？, or after . ! ? that whitespace follows (not in "foo.conf" or "1.5").
_SENTENCE_END = re.compile(r"(?<=[。！？])|(?<=[.!?])(?=\s)")
_PARAGRAPH = re.compile(r"(\n\s*\n)")


def tokens(text: str) -> list[str]:
    """text as tokens: ''.join(tokens(text)) == text. A combining mark (a vowel sign, a
    virama, an accent in NFD) stays with the letter before it."""
    out: list[str] = []
    for tok in _TOKEN.findall(text):
        mark = _is_mark(tok[0])
        if out and not out[-1].isspace() and (mark or (_is_mark(out[-1][-1]) and tok[0].isalpha()
                                                      and not unspaced(tok) and not unspaced(out[-1]))):
            out[-1] += tok  # a mark joins the letter before it; a spaced word goes on after a mark
        else:
            out.append(tok)
    return out


def _is_mark(ch: str) -> bool:
    return unicodedata.category(ch).startswith("M")


def is_word(token: str) -> bool:
    return token[:1].isalpha() or token[:1].isdigit()


def unspaced(token: str) -> bool:
    return bool(_UNSPACED_CHAR.match(token)) and token[:1].isalpha()


def vocabulary(texts: Sequence[str]) -> tuple[list[str], list[str]]:
    """(spaced words, unspaced characters) of texts, each once, in order of first use."""
    spaced, chars = {}, {}
    for text in texts:
        for tok in tokens(text):
            if unspaced(tok):
                chars.setdefault(tok, None)
            elif is_word(tok) and not tok[:1].isdigit():
                spaced.setdefault(tok, None)
    return list(spaced), list(chars)


def _same_kind(token: str, vocab: tuple[list[str], list[str]], rng: np.random.Generator) -> str:
    pool = vocab[1] if unspaced(token) else vocab[0]
    if len({w.lower() for w in pool}) < 2:
        return token
    while True:
        other = pool[int(rng.integers(len(pool)))]
        if other.lower() != token.lower():  # "The" for "the" would vanish in normalisation
            return other


def _words(toks: list[str]) -> list[int]:
    return [i for i, t in enumerate(toks) if is_word(t)]


def _whitespace(toks: list[str], rng: np.random.Generator) -> str:
    out = []
    for tok in toks:
        if tok.isspace() and not _PARAGRAPH.search(tok):
            out.append(str(rng.choice(np.array([" ", "  ", "\n", " \t "]), p=[0.7, 0.1, 0.1, 0.1])))
        elif unspaced(tok):
            out.append(tok + str(rng.choice(np.array(["", " ", "\n"]), p=[0.8, 0.15, 0.05])))
        elif is_word(tok) and rng.random() < 0.05:
            out.append(tok.upper())
        else:
            out.append(tok)
    return "".join(out)


def _shuffled(items: list[str], rng: np.random.Generator) -> list[str]:
    order = rng.permutation(len(items))
    if np.all(order == np.arange(len(items))):
        order = np.roll(order, 1)
    return [items[i] for i in order]


def _reorder(text: str, rng: np.random.Generator) -> str:
    """The sentences of each paragraph in another order. A text whose paragraphs each hold
    one sentence gets its paragraphs reordered instead, and a text of one sentence its two
    halves swapped, so the edit always moves text."""
    parts = _PARAGRAPH.split(text)
    paragraphs, moved = parts[0::2], False
    for i, para in enumerate(paragraphs):
        sentences = [x.strip() for x in _SENTENCE_END.split(para) if x.strip()]
        if len(sentences) > 1:
            paragraphs[i] = " ".join(_shuffled(sentences, rng))
            moved = True
    if not moved:
        kept = [p for p in paragraphs if p.strip()]
        if len(kept) > 1:
            return "\n\n".join(_shuffled(kept, rng))
        toks = tokens(text.strip())
        words = _words(toks)
        cut = words[len(words) // 2] if len(words) > 1 else 0
        return "".join(toks[cut:]).strip() + " " + "".join(toks[:cut]).strip()
    out = [paragraphs[0]]
    for sep, para in zip(parts[1::2], paragraphs[1:]):
        out += [sep, para]
    return "".join(out)


def apply_edit(edit: str, text: str, vocab: tuple[list[str], list[str]], other: str,
               rng: np.random.Generator) -> str:
    """The text of one of the seven edits (`corpus.EDITS`) of a real text; `other` is the
    text the append edits take their words from."""
    toks = tokens(text)
    words = _words(toks)
    if not words:
        raise ValueError("a text with no words cannot be edited")
    if edit == "whitespace":
        return _whitespace(toks, rng)
    if edit == "reorder":
        return _reorder(text, rng)
    if edit == "char":
        i = words[int(rng.integers(len(words)))]
        word = toks[i]
        j = int(rng.integers(len(word)))
        if unspaced(word):
            toks[i] = _same_kind(word, vocab, rng)
        else:  # compared without case: "X" to "x" would vanish in normalisation
            toks[i] = word[:j] + ("x" if word[j].lower() != "x" else "y") + word[j + 1:]
    elif edit == "word":
        i = words[int(rng.integers(len(words)))]
        toks[i] = _same_kind(toks[i], vocab, rng)
        if unspaced(toks[i]):  # a two-character word in its place, as a new word would be
            toks[i] += _same_kind(toks[i], vocab, rng)
    elif edit == "replace5":
        for p in rng.choice(len(words), size=max(1, round(0.05 * len(words))), replace=False):
            toks[words[p]] = _same_kind(toks[words[p]], vocab, rng)
    elif edit in ("append10", "append50"):
        want = max(1, round((0.10 if edit == "append10" else 0.50) * len(words)))
        extra, seen = [], 0
        for tok in tokens(other):
            extra.append(tok)
            seen += is_word(tok)
            if seen >= want:
                break
        return text.rstrip() + "\n\n" + "".join(extra).strip()
    else:
        raise ValueError(f"unknown edit {edit!r}")
    return "".join(toks)


def real_stories(texts: Sequence[str], seed: int = 7, story_share: float = 0.5,
                 label: str = "") -> Iterator[dict]:
    """Rows {id, text, group, edit}: about `story_share` of the rows are stories (an original
    from a seeded shuffle of texts and its seven edits, in one group); the other texts are
    unrelated, each a group of its own. An append edit adds fewer words than its share when
    the text it takes them from is shorter. An append edit takes its words from an unrelated text (one
    that is not in a story), so no story is linked to another. Ids run from 1 in order of
    rows; `label` prefixes the groups."""
    rng = np.random.default_rng(seed)
    texts = [texts[i] for i in rng.permutation(len(texts))]
    n_stories = int(len(texts) * story_share / (1 + len(EDITS) * story_share))
    originals, rest = texts[:n_stories], texts[n_stories:]
    if n_stories and not rest:
        raise ValueError("real_stories needs texts left over for the append edits to take words from")
    vocab = vocabulary(texts)
    n = 0
    for s, text in enumerate(originals):
        variants = [("original", text)]
        for edit in EDITS:
            other = rest[int(rng.integers(len(rest)))]
            variants.append((edit, apply_edit(edit, text, vocab, other, rng)))
        for edit, body in variants:
            n += 1
            yield {"id": n, "text": body, "group": f"{label}s{s}", "edit": edit}
    for u, text in enumerate(rest):
        n += 1
        yield {"id": n, "text": text, "group": f"{label}u{u}", "edit": "unrelated"}
