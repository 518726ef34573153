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

from neardup_spark.config import NormaliseConfig
from neardup_spark.kernels.hashing import SPACE

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
    """Build the translate and lookup tables now (~0.8 s; see `worker_daemon`)."""
    for punctuation in (True, False):
        for lowercase in (True, False):
            _ascii_table(lowercase, punctuation)
    _nfkc_inert()


def collapse(cps: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Code points or UTF-8 bytes (a space is 32 in both) of texts end to end, and their
    offsets -> every run of spaces cut to its first space, offsets moved to match (a regex
    over each text cost a third of the sketch; this is a few numpy passes)."""
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


# Per-character work in Python's str methods is fast only on ASCII: on a 2,800-character
# article holding one curly quote, str.translate took 194 us and str.lower 15 us (7 and
# 1.4 us on ASCII), five times the rest of the sketch. So lower case and separators are
# lookup tables: a 256-byte table over all the UTF-8 bytes does both for ASCII, and the
# non-ASCII characters (found by their lead bytes) are looked up per code point and
# rewritten in place.

# Python lower-cases U+03A3 by its context (final sigma) and U+0130 into two code points;
# a text holding either is lower-cased by str.lower itself, the rest by `_lower_table`.
_CONTEXT_LOWER = ("\u03a3", "\u0130")


@functools.lru_cache(maxsize=1)
def _lower_table() -> np.ndarray:
    """uint32 per code point: `chr(cp).lower()` where that is one code point, else cp itself
    (U+0130 only). Built by lower-casing all code points as one string (C speed, ~10 ms)."""
    cps = np.arange(sys.maxunicode + 1, dtype=np.uint32)
    alone = cps.copy()
    alone[0xD800:0xE000] = SPACE  # lone surrogates are their own lower case
    alone[0x130] = SPACE  # the one code point that lowers into two
    lowered = np.frombuffer(decode_codepoints(alone).lower().encode("utf-32-le"), dtype="<u4").copy()
    lowered[0xD800:0xE000] = cps[0xD800:0xE000]
    lowered[0x130] = 0x130
    lowered[0x3A3] = ord("\u03c3")  # its lower case standing alone; texts holding it use str.lower
    lowered[SPACE] = SPACE
    return lowered


@functools.lru_cache(maxsize=2)
def _separator_mask(punctuation: bool) -> np.ndarray:
    """bool per code point: normalisation turns it into a space (`_translation`'s keys)."""
    mask = np.zeros(sys.maxunicode + 1, dtype=bool)
    mask[np.fromiter(_translation(punctuation), dtype=np.int64)] = True
    return mask


@functools.lru_cache(maxsize=4)
def _ascii_table(lowercase: bool, punctuation: bool) -> bytes:
    """bytes.translate table: what normalisation does to each ASCII byte (separators to
    spaces, upper case to lower); bytes from 0x80 (inside multi-byte characters) unchanged."""
    mask, lower = _separator_mask(punctuation), _lower_table()
    return bytes(SPACE if c < 0x80 and mask[c] else int(lower[c]) if c < 0x80 and lowercase else c
                 for c in range(256))


# Hangul vowel and trailing jamo: they compose with the syllable before them by rule,
# not by decomposition mappings.
_HANGUL_V_T = ((0x1161, 0x1176), (0x11A8, 0x11C3))


@functools.lru_cache(maxsize=1)
def _nfkc_inert() -> np.ndarray:
    """bool per code point: NFKC leaves alone any text whose characters are all ASCII or
    inert. Inert means NFKC_Quick_Check=Yes and combining class 0 (UAX #15: a text of
    such characters passes the quick check, so it is already normalised): NFKC maps the
    character to itself, it is a starter, and it never composes with the character before
    it (it is not the second of a two-character canonical decomposition, nor a Hangul
    vowel or trailing jamo). Curly quotes, dashes, accented letters and CJK are inert;
    compatibility characters (ligatures, full-width forms) and combining marks are not.
    Built from this Python's unicodedata, as `unicodedata.normalize` is (~0.3 s)."""
    normalize, combining, decomposition = unicodedata.normalize, unicodedata.combining, unicodedata.decomposition
    chars = list(map(chr, range(sys.maxunicode + 1)))
    inert = np.fromiter((combining(c) == 0 and normalize("NFKC", c) == c for c in chars), dtype=bool,
                        count=len(chars))
    for c in chars:
        mapping = decomposition(c)
        if mapping and mapping[0] != "<" and mapping.count(" ") == 1:
            inert[int(mapping.split()[1], 16)] = False
    for lo, hi in _HANGUL_V_T:
        inert[lo:hi] = False
    return inert


def _utf8_lengths(cps: np.ndarray) -> np.ndarray:
    """Bytes of each code point in UTF-8."""
    return 1 + (cps >= 0x80).astype(np.int64) + (cps >= 0x800) + (cps >= 0x10000)


@functools.lru_cache(maxsize=1)
def _lower_keeps_length() -> np.ndarray:
    """bool per code point: its lower case (`_lower_table`) takes as many UTF-8 bytes."""
    cps = np.arange(sys.maxunicode + 1, dtype=np.uint32)
    return _utf8_lengths(cps) == _utf8_lengths(_lower_table())


def _wide_chars(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The multi-byte characters of UTF-8 `data` (uint8, three bytes of padding after the
    text): (byte position of each lead byte, its width in bytes, its code point)."""
    lead = np.flatnonzero(data >= 0xC0)  # every multi-byte character starts with one
    b0 = data[lead].astype(np.uint32)
    b1, b2, b3 = (data[lead + k].astype(np.uint32) & 0x3F for k in (1, 2, 3))
    width = 2 + (b0 >= 0xE0).astype(np.int64) + (b0 >= 0xF0)
    cps = np.where(width == 2, ((b0 & 0x1F) << 6) | b1,
                   np.where(width == 3, ((b0 & 0x0F) << 12) | (b1 << 6) | b2,
                            ((b0 & 0x07) << 18) | (b1 << 12) | (b2 << 6) | b3))
    return lead, width, cps


def _wide_in_place(data: np.ndarray, chars: tuple[np.ndarray, np.ndarray, np.ndarray], lowercase: bool,
                   punctuation: bool) -> bool:
    """Lower-case the non-ASCII characters of UTF-8 `data` (writable uint8; `chars` are its
    `_wide_chars`) and turn the separating ones into spaces (one per byte: the collapse
    makes them one), in place. False, with nothing written, when the lower case of one of
    them takes another number of bytes (U+023A, U+1E9E, U+212B...): then the caller works
    on code points. ASCII bytes are left to the byte table."""
    lead, width, cps = chars
    if not lead.size:
        return True
    sep = _separator_mask(punctuation)[cps]
    if lowercase:
        low = _lower_table()[cps]
        change = np.flatnonzero((low != cps) & ~sep)
        if change.size:
            if not _lower_keeps_length()[cps[change]].all():
                return False
            _write_utf8(data, lead[change], low[change], width[change])
    spaces = lead[sep]
    for k in range(4):
        data[spaces[width[sep] > k] + k] = SPACE
    return True


def _write_utf8(data: np.ndarray, at: np.ndarray, cps: np.ndarray, width: np.ndarray) -> None:
    """Write code points as UTF-8 at byte positions `at` (each `width` bytes long)."""
    for w, lead_bits in ((2, 0xC0), (3, 0xE0), (4, 0xF0)):
        pick = width == w
        if not pick.any():
            continue
        pos, cp = at[pick], cps[pick]
        shift = 6 * (w - 1)
        data[pos] = lead_bits | (cp >> shift)
        for k in range(1, w):
            shift -= 6
            data[pos + k] = 0x80 | ((cp >> shift) & 0x3F)


def _wide_utf8(texts: list[str], lowercase: bool, punctuation: bool) -> list[bytes]:
    """Non-ASCII texts (already NFKC as configured) lower-cased and with separators turned
    into spaces, per code point by table lookups, each back as UTF-8."""
    cps = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype="<u4")
    cps = _lower_table()[cps] if lowercase else cps.copy()
    cps[_separator_mask(punctuation)[cps]] = SPACE
    whole = decode_codepoints(cps)
    out, pos = [], 0
    for t in texts:
        out.append(whole[pos : pos + len(t)].encode("utf-8", "surrogatepass"))
        pos += len(t)
    return out


def normalised_utf8(texts: Sequence[str | bytes], opts: NormaliseConfig,
                    valid_utf8: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Raw texts (str, or UTF-8 bytes whose invalid bytes become U+FFFD; no nulls) -> their
    normalised forms as UTF-8 (uint8) with one space after each non-empty text, and int64
    byte offsets (len n+1): text i is data[offsets[i]:offsets[i+1] - 1] when it is not empty.
    The space ends the text's last word as the others end theirs (see
    `hashing.utf8_word_units`). `valid_utf8` says the bytes are known to be valid UTF-8
    (Arrow checked them), so they need no decoding.

    The normalisation is the plain one (NFKC, `str.lower`, separators to spaces, runs of
    spaces collapsed, ends trimmed), computed with tables on the batch's UTF-8 at once (see
    `_wide_in_place`). Only texts holding a character NFKC may change (`_nfkc_inert`) or
    whose lower case depends on context (Σ, İ) become str on the way."""
    n = len(texts)
    if n == 0:
        return np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int64)
    parts = [_utf8(text, valid_utf8) for text in texts]
    joined, bounds = _joined(parts)
    wide = [i for i, part in enumerate(parts) if not part.isascii()]
    if wide:
        chars = _wide_chars(np.frombuffer(joined, dtype=np.uint8))
        redo = _needs_str(chars[2], opts)
        if redo.any():
            for i in np.unique(np.searchsorted(bounds, chars[0][redo], side="right") - 1).tolist():
                parts[i] = _str_normalised(parts[i].decode("utf-8", "surrogatepass"), opts)
            joined, bounds = _joined(parts)
            chars = _wide_chars(np.frombuffer(joined, dtype=np.uint8))
        if not _wide_in_place(np.frombuffer(joined, dtype=np.uint8), chars, opts.lowercase, opts.punctuation):
            texts_ = [parts[i].decode("utf-8", "surrogatepass") for i in wide]
            for i, part in zip(wide, _wide_utf8(texts_, opts.lowercase, opts.punctuation)):
                parts[i] = part
            joined, bounds = _joined(parts)
    joined = joined[:-3].translate(_ascii_table(opts.lowercase, opts.punctuation))
    data, bounds = collapse(np.frombuffer(joined, dtype=np.uint8), bounds)
    return data[1:], bounds - 1


def _utf8(text: str | bytes, valid: bool) -> bytes:
    """A raw text as UTF-8 (lone surrogates of a str kept; invalid bytes made U+FFFD unless `valid`)."""
    if isinstance(text, str):
        return text.encode("ascii") if text.isascii() else text.encode("utf-8", "surrogatepass")
    text = bytes(text)
    return text if valid or text.isascii() else text.decode("utf-8", "replace").encode("utf-8")


def _joined(parts: list[bytes]) -> tuple[bytearray, np.ndarray]:
    """One space before the first text and after every text, and 3 bytes of padding: each
    text's region is its bytes and the space after them, and collapsing every run of spaces
    to its first leaves each region its words, single spaces and one trailing space (none
    for an empty text). Also the n+1 region starts."""
    joined = bytearray(b"".join((b" ", b" ".join(parts), b"    ")))
    bounds = np.ones(len(parts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter((len(p) + 1 for p in parts), dtype=np.int64, count=len(parts)), out=bounds[1:])
    bounds[1:] += 1
    return joined, bounds


def _needs_str(cps: np.ndarray, opts: NormaliseConfig) -> np.ndarray:
    """bool per non-ASCII code point: its text must be normalised as a str first (NFKC may
    change it, or its lower case depends on context)."""
    redo = ~_nfkc_inert()[cps] if opts.nfkc else np.zeros(cps.size, dtype=bool)
    if opts.lowercase:
        redo |= np.isin(cps, [ord(c) for c in _CONTEXT_LOWER])
    return redo


def _str_normalised(text: str, opts: NormaliseConfig) -> bytes:
    """NFKC and, for texts holding Σ or İ, `str.lower`, as UTF-8 (the tables do the rest;
    lower case is idempotent, so they may lower-case it again)."""
    if opts.nfkc:
        text = unicodedata.normalize("NFKC", text)
    if opts.lowercase and any(ch in text for ch in _CONTEXT_LOWER):
        text = text.lower()
    return text.encode("utf-8", "surrogatepass")


def normalised_codepoints(texts: Sequence[str | bytes], opts: NormaliseConfig) -> tuple[np.ndarray, np.ndarray]:
    """Raw texts -> their normalised forms as code points (uint32, no trailing space) and
    int64 offsets (len n+1): `normalised_utf8` decoded, for character shingles."""
    return utf8_codepoints(*normalised_utf8(texts, opts))


def utf8_codepoints(data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`normalised_utf8`'s output (each non-empty text followed by one space) as code
    points without those spaces, and int64 offsets (len n+1)."""
    ends = offsets[1:][offsets[1:] > offsets[:-1]] - 1  # each non-empty text's trailing space
    keep = np.ones(data.size, dtype=bool)
    keep[ends] = False
    chars = np.zeros(data.size + 1, dtype=np.int64)  # code points before each byte
    np.cumsum((data & 0xC0) != 0x80, out=chars[1:])
    lengths = np.diff(chars[offsets]) - (np.diff(offsets) > 0)
    out = np.zeros(len(offsets), dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    text = data[keep].tobytes().decode("utf-8", "surrogatepass")
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4"), out


def normalise_series(texts: pd.Series, opts: NormaliseConfig) -> pd.Series:
    """The normalisation itself, on a pandas Series of str or UTF-8 bytes
    (invalid bytes become U+FFFD; null stays null)."""
    present = [i for i, t in enumerate(texts) if isinstance(t, (str, bytes, bytearray))]
    out: list[str | None] = [None] * len(texts)
    cps, offsets = normalised_codepoints([texts.iat[i] for i in present], opts)
    whole = decode_codepoints(cps)
    for j, i in enumerate(present):
        out[i] = whole[offsets[j] : offsets[j + 1]]
    return pd.Series(out, index=texts.index, dtype=object)


def normalise_text(text: str, opts: NormaliseConfig = NormaliseConfig()) -> str:
    """One string, for tests and notebooks; the Spark stage never calls this per row."""
    return normalise_series(pd.Series([text], dtype=object), opts).iloc[0]


