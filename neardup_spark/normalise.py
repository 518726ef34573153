"""Normalisation, the first step of the sketch stage: NFKC, lower case, punctuation to spaces.

Whitespace always collapses to single spaces and the ends are trimmed, so
tokens downstream are exactly the space-separated runs. "Punctuation" means
the Unicode punctuation, symbol, separator and control categories; letters,
digits and combining marks stay, so words in scripts with vowel signs
(Devanagari, Thai...) are not split apart. Null text stays null.
"""

from __future__ import annotations

import functools
import sys
import unicodedata
from typing import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import Column

from .config import NormaliseConfig
from .hashing import SPACE, codepoints

# Categories that separate words. Private-use (Co) and unassigned code points
# are left alone: they carry meaning in some corpora and are rare.
_SEPARATOR_CATEGORIES = ("P", "S", "Z", "Cc", "Cf", "Cs")


@functools.lru_cache(maxsize=1)
def _separator_table() -> dict[int, str]:
    """str.translate table: every separating code point -> space (built once per worker)."""
    return {
        cp: " "
        for cp in range(sys.maxunicode + 1)
        if unicodedata.category(chr(cp)).startswith(_SEPARATOR_CATEGORIES)
    }


@functools.lru_cache(maxsize=2)
def _translation(punctuation: bool) -> dict[int, str]:
    """str.translate table: what becomes a space (separators, or with `punctuation`
    off only whitespace, as `str.split` sees it)."""
    if punctuation:
        return _separator_table()
    return {cp: " " for cp in range(sys.maxunicode + 1) if chr(cp).isspace()}


def preload() -> None:
    """Build both translate tables now (~0.5 s; see `worker_daemon`)."""
    for punctuation in (True, False):
        _translation(punctuation)


def fold_series(texts: pd.Series, opts: NormaliseConfig) -> pd.Series:
    """The per-character steps of normalisation (decode, NFKC, lower case): str or UTF-8
    bytes in, str out (invalid bytes become U+FFFD; null, NaN included, stays None).
    `collapse` finishes the job on code points.

    One pass in plain Python: pandas' `.str` methods (a pass each, with their null
    handling) took ~1.4x as long here."""
    nfkc, lower, normalize = opts.nfkc, opts.lowercase, unicodedata.normalize
    out = []
    for text in texts:
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8", "replace")
        elif not isinstance(text, str):
            out.append(None)
            continue
        if nfkc:
            text = normalize("NFKC", text)
        if lower:
            text = text.lower()
        out.append(text)
    return pd.Series(out, index=texts.index, dtype=object)


def spaced(texts: Sequence[str], punctuation: bool) -> list[str]:
    """Folded texts with every separator turned into a space and the ends trimmed
    (`str.translate` is C code with a fast path for ASCII)."""
    table = _translation(punctuation)
    return [t.translate(table).strip(" ") for t in texts]


def collapse(cps: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`spaced` texts as code points (see `hashing.codepoints`) -> their normalised code
    points: every run of spaces becomes one, so a text is its words joined by single
    spaces (a regex over each text cost a third of the sketch; this is a few numpy passes).
    Texts do not start with a space and end with none or one, so a run never crosses from
    one into the next. Code points or UTF-8 bytes alike (a space is 32 in both)."""
    space = cps == SPACE
    repeat = np.flatnonzero(space[1:] & space[:-1]) + 1
    if repeat.size == 0:
        return cps, offsets
    keep = np.ones(cps.size, dtype=bool)
    keep[repeat] = False
    return cps[keep], offsets - np.searchsorted(repeat, offsets)


def decode_codepoints(cps: np.ndarray) -> str:
    """Code points (uint32) back to one str (lone surrogates kept, as `codepoints` keeps them)."""
    return cps.astype("<u4", copy=False).tobytes().decode("utf-32-le", "surrogatepass")


def normalised_codepoints(folded: Sequence[str], punctuation: bool) -> tuple[np.ndarray, np.ndarray]:
    """Folded texts (see `fold_series`) -> their normalised forms as code points and offsets."""
    return collapse(*codepoints(spaced(folded, punctuation)))


def normalised_utf8(folded: Sequence[str], punctuation: bool) -> tuple[np.ndarray, np.ndarray]:
    """Folded texts -> their normalised forms as UTF-8 (uint8) with one space after each
    non-empty text, and int64 byte offsets (len n+1): text i is data[offsets[i]:offsets[i+1] - 1]
    when it is not empty. The space ends the text's last word as the others end theirs
    (see `hashing.utf8_word_units`).

    Folded texts come from UTF-8 (`fold_series` decodes invalid bytes to U+FFFD), so they
    hold no lone surrogates and encode as they are; Arrow encodes them in C."""
    ended = [t + " " if t else t for t in spaced(folded, punctuation)]
    arr = pa.array(ended, pa.large_string())
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64, count=len(ended) + 1)
    data = np.frombuffer(data_buf, dtype=np.uint8, count=int(offsets[-1])) if data_buf is not None else np.zeros(0, np.uint8)
    return collapse(data, offsets)


def normalise_series(texts: pd.Series, opts: NormaliseConfig) -> pd.Series:
    """The normalisation itself, on a pandas Series of str or UTF-8 bytes
    (invalid bytes become U+FFFD; null stays null)."""
    folded = fold_series(texts, opts)
    present = [i for i, t in enumerate(folded) if t is not None]
    out: list[str | None] = [None] * len(folded)
    cps, offsets = normalised_codepoints([folded.iat[i] for i in present], opts.punctuation)
    whole = decode_codepoints(cps)
    for j, i in enumerate(present):
        out[i] = whole[offsets[j] : offsets[j + 1]]
    return pd.Series(out, index=texts.index, dtype=object)


def normalise_text(text: str, opts: NormaliseConfig = NormaliseConfig()) -> str:
    """One string, for tests and notebooks; the Spark stage never calls this per row."""
    return normalise_series(pd.Series([text], dtype=object), opts).iloc[0]


def utf8_bytes(text: Column) -> Column:
    """The text column as its raw bytes, for a Pandas UDF to decode (boilerplate's).

    Spark strings may hold bytes that are not UTF-8 (from Parquet, casts,
    binary data); converting them to pandas strings would fail and the task
    would die. Shipped as binary, they are decoded by the UDF (invalid bytes
    become U+FFFD). The sketch's `mapInArrow` skips this cast, which costs two
    JVM copies of every text: it receives Arrow strings and validates them
    itself (`sketch._texts`).
    """
    return text.cast("binary")
