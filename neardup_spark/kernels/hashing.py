"""Vectorised numpy kernels for shingling and MinHash. No Spark, no per-row Python.

Texts arrive already normalised (see `normalise`): tokens are separated by
single spaces. A token's hash is a polynomial over its Unicode code points
(one prefix sum over a batch's code points; the sketch hashes only a batch's
distinct words so, see `utf8_word_units`), k-shingles combine k token
hashes, and every shingle ends as a 32-bit value mixed with the seed.
Because those values are (pseudo-)random and independent of the seed-chosen
permutations, each permutation ``x -> (a*x + b) mod 2**32`` (odd ``a``) is a
bijection of random values, so the MinHash estimate is unbiased; the unit
tests check bias and spread against sqrt(J(1-J)/P).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

_U64 = np.uint64
_POLY = _U64(0x100000001B3)  # odd, so it has an inverse modulo 2**64
_POLY_INV = _U64(pow(0x100000001B3, -1, 2**64))
SHINGLE_MULT = _U64(0x9E3779B97F4A7C15)
_M1 = _U64(0xBF58476D1CE4E5B9)
_M2 = _U64(0x94D049BB133111EB)
SPACE = 32
SUB_BATCH = 512  # documents per MinHash call: its per-permutation passes stay cache-sized
# Code points per tokenising pass: its uint64 arrays stay within a 2 MB L2 cache
# (word units of 512 x 3 kB articles at once ran 1.5x slower than in 64-article chunks).
CHUNK_CHARS = 1 << 18
# Characters per tokenising pass on UTF-8 (`utf8_word_units`): its arrays are
# bytes, not uint64, and a larger pass shares its dictionary of distinct words
# (1 MB ran 1.15x faster than 256 kB here, and no worse than 32 MB).
TOKEN_CHARS = 1 << 20


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a bijective, well-avalanching 64-bit mix (new array)."""
    return mix64_inplace(x.astype(_U64, copy=True))


def mix64_inplace(x: np.ndarray) -> np.ndarray:
    """`mix64` of a uint64 array, written over it, with one scratch array for the shifts
    (a new array per shift was a third of its time)."""
    tmp = np.empty_like(x)
    for shift, mult in ((30, _M1), (27, _M2), (31, None)):
        np.right_shift(x, _U64(shift), out=tmp)
        x ^= tmp
        if mult is not None:
            x *= mult
    return x


def _powers(base: np.uint64, n: int) -> np.ndarray:
    """[1, base, base**2, ...] modulo 2**64 (uint64 products wrap)."""
    out = np.full(n, base, dtype=_U64)
    if n:
        out[0] = 1
    return np.cumprod(out, dtype=_U64)


_POWER_CACHE: dict[int, np.ndarray] = {}


def _cached_powers(base: np.uint64, n: int) -> np.ndarray:
    """The first n powers of base, from a per-process table grown by doubling
    (recomputing them per batch cost a third of the token hashing)."""
    table = _POWER_CACHE.get(int(base))
    if table is None or table.size < n:
        table = _powers(base, max(n, 2 * (table.size if table is not None else 1 << 16)))
        _POWER_CACHE[int(base)] = table
    return table[:n]


def codepoints(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """All texts as one uint32 code-point array, plus int64 offsets (len n+1)."""
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    # surrogatepass: a lone surrogate is one code unit in Python and stays one here.
    raw = "".join(texts).encode("utf-32-le", errors="surrogatepass")
    return np.frombuffer(raw, dtype="<u4"), offsets


def word_units(cps: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hash every space-separated token: (uint64 token hashes, per-text offsets)."""
    n = cps.size
    if n == 0:
        return np.zeros(0, dtype=_U64), np.zeros(offsets.size, dtype=np.int64)
    is_space = cps == SPACE
    boundary = np.zeros(n + 1, dtype=bool)  # True at text starts and ends
    boundary[offsets] = True
    prev_break = np.empty(n, dtype=bool)
    prev_break[0] = True
    prev_break[1:] = is_space[:-1]
    prev_break |= boundary[:n]
    next_break = np.empty(n, dtype=bool)
    next_break[-1] = True
    next_break[:-1] = is_space[1:]
    next_break |= boundary[1:]
    starts = np.flatnonzero(~is_space & prev_break)
    ends = np.flatnonzero(~is_space & next_break) + 1
    # sum_j c[start+j] * POLY**j for each token, from one prefix sum.
    pw = _cached_powers(_POLY, n)
    prefix = np.zeros(n + 1, dtype=_U64)
    np.cumsum((cps.astype(_U64) + _U64(1)) * pw, out=prefix[1:])
    inv = _cached_powers(_POLY_INV, n)
    token = (prefix[ends] - prefix[starts]) * inv[starts]
    token = mix64(token ^ (ends - starts).astype(_U64))
    per_text = np.searchsorted(starts, offsets, side="left").astype(np.int64)
    return token, per_text


def utf8_word_units(data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`word_units` for normalised texts given as UTF-8 bytes in which every non-empty text
    ends with one space (see `normalise.normalised_utf8`): the same token hashes, as
    (uint64 token hashes, per-text token offsets).

    Every token is its bytes up to and including the space after it, so the tokens form
    an Arrow string array over `data` without a copy. Arrow's dictionary encoding (C)
    finds the distinct words, and only those are hashed by `word_units`: in news text
    they are ~1% of the tokens, and hashing every code point as a uint64 was most of
    the tokenising time.
    """
    ends = np.flatnonzero(data == SPACE) + 1
    if ends.size == 0:
        return np.zeros(0, dtype=_U64), np.zeros(offsets.size, dtype=np.int64)
    bounds = np.zeros(ends.size + 1, dtype=np.int32)  # callers keep a pass far below 2 GiB
    bounds[1:] = ends
    tokens = pa.StringArray.from_buffers(ends.size, pa.py_buffer(bounds), pa.py_buffer(data))
    words = tokens.dictionary_encode()
    # Each distinct word ends with its space, so the dictionary's bytes are one text of
    # those words in order (read from its buffers: no Python str per word).
    distinct, _ = word_units(*codepoints([_joined_utf8(words.dictionary)]))
    per_text = np.searchsorted(ends, offsets, side="right").astype(np.int64)
    return distinct[words.indices.to_numpy()], per_text


def _joined_utf8(words: pa.Array) -> str:
    """The values of an Arrow string array end to end, as one str."""
    _, offsets, data = words.buffers()
    if data is None or len(words) == 0:
        return ""
    bounds = np.frombuffer(offsets, dtype=np.int32, count=len(words) + 1, offset=4 * words.offset)
    return memoryview(data)[int(bounds[0]) : int(bounds[-1])].tobytes().decode("utf-8")


def string_hashes(texts: Sequence[str]) -> np.ndarray:
    """A 64-bit hash of each whole string (uint64), from one prefix sum over all of them.

    Polynomial over code points modulo 2**64, then mixed: fine for natural
    text (not built to resist crafted collisions).
    """
    cps, offsets = codepoints(texts)
    n = cps.size
    prefix = np.zeros(n + 1, dtype=_U64)
    np.cumsum((cps.astype(_U64) + _U64(1)) * _cached_powers(_POLY, n), out=prefix[1:])
    inv = _cached_powers(_POLY_INV, n + 1)
    starts, ends = offsets[:-1], offsets[1:]
    return mix64(((prefix[ends] - prefix[starts]) * inv[starts]) ^ (ends - starts).astype(_U64))


# Scripts written without spaces between words (first and last code point of each block):
# in `script_units` each of their characters is a unit of its own.
UNSPACED_BLOCKS = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x19E0, 0x19FF),  # Khmer symbols
    (0x2E80, 0x2FDF),  # CJK and Kangxi radicals
    (0x3040, 0x312F),  # Hiragana, Katakana, Bopomofo
    (0x31A0, 0x31FF),  # Bopomofo extended, CJK strokes, Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x20000, 0x3FFFF),  # CJK extensions B and later
)
# (Tibetan is written with a syllable mark that normalisation makes a space: its words are found.)
_UNSPACED_EDGES = np.array([edge for lo, hi in UNSPACED_BLOCKS for edge in (lo, hi + 1)], dtype=np.int64)


def _utf8_prefix(cp: int) -> tuple[int, int]:
    """The first two bytes of code point cp (U+0800 and above) in UTF-8."""
    head = chr(cp).encode("utf-8")
    return head[0], head[1]


# The first two bytes of every character of UNSPACED_BLOCKS, as a lookup over
# (lead << 8 | next): a group of texts with none of them needs no code points.
_UNSPACED_PREFIXES = np.zeros(1 << 16, dtype=bool)
for _lo, _hi in UNSPACED_BLOCKS:
    for _cp in range(_lo, _hi + 1, 64 if _hi - _lo > 4096 else 1):
        _UNSPACED_PREFIXES[int.from_bytes(bytes(_utf8_prefix(_cp)), "big")] = True
    _UNSPACED_PREFIXES[int.from_bytes(bytes(_utf8_prefix(_hi)), "big")] = True


def maybe_unspaced(data: np.ndarray) -> bool:
    """Whether UTF-8 bytes may hold a character of UNSPACED_BLOCKS (by its first two bytes:
    Hangul, Devanagari or Vietnamese text does not take the code-point path)."""
    leads = np.flatnonzero(data[:-1] >= 0xE0)
    if not leads.size:
        return False
    pairs = (data[leads].astype(np.int64) << 8) | data[leads + 1]
    return bool(_UNSPACED_PREFIXES[pairs].any())


def unspaced(cps: np.ndarray) -> np.ndarray:
    """True for each code point of a script written without spaces (UNSPACED_BLOCKS)."""
    return np.searchsorted(_UNSPACED_EDGES, cps.astype(np.int64), side="right") % 2 == 1


def script_units(cps: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`word_units` where every character of a script written without spaces (Han, kana,
    Thai, Lao, Khmer, Myanmar, Tibetan) is a word of its own: space-written text gives
    exactly its `word_units`, and a clause of Chinese is as many units as characters
    rather than one. Mixed text mixes both, per character."""
    mask = unspaced(cps)
    if not mask.any():
        return word_units(cps, offsets)
    before = np.zeros(cps.size + 1, dtype=np.int64)  # such characters before each position
    np.cumsum(mask, out=before[1:])
    spaced = np.full(cps.size + 2 * int(before[-1]), SPACE, dtype=cps.dtype)
    spaced[np.arange(cps.size) + 2 * before[:-1] + mask] = cps  # a space either side of each
    return word_units(spaced, offsets + 2 * before[offsets])


def char_units(cps: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Code points as the units of character n-grams."""
    return cps.astype(_U64), offsets


def shingle_hashes(units: np.ndarray, unit_offsets: np.ndarray, k: int, seed: int,
                   with_counts: bool = False) -> tuple[np.ndarray, ...]:
    """Distinct 32-bit k-shingle values per text, sorted within each text.

    A text with fewer than k units (but at least one) gets one shingle made of
    all its units; a text with no units gets none. Returns (uint32 values,
    int64 offsets of length n_texts+1), and with `with_counts` a third array:
    how often each value occurs in its text (int32, aligned with values).

    Units are the texts' units end to end (unit_offsets[0] == 0). Every text's
    shingles are known in number before any is hashed, so each lands in place:
    no per-unit text index, no sort by text and no count by text (this ran
    twice as fast as finding them after the fact).
    """
    n_units = np.diff(unit_offsets)
    per_text = np.where(n_units >= k, n_units - (k - 1), np.minimum(n_units, 1))
    bounds = np.zeros(n_units.size + 1, dtype=np.int64)
    np.cumsum(per_text, out=bounds[1:])
    if bounds[-1] == 0:
        empty = (np.zeros(0, dtype=np.uint32), bounds)
        return (*empty, np.zeros(0, dtype=np.int32)) if with_counts else empty
    salt = _U64(seed & 0xFFFFFFFFFFFFFFFF) ^ _U64(0x5851F42D4C957F2D)
    values = _windows(units, unit_offsets, k, salt)
    short = np.flatnonzero((n_units > 0) & (n_units < k))
    if short.size:  # a short text has no window: its one shingle takes its one slot
        slot = np.zeros(int(bounds[-1]), dtype=bool)
        slot[bounds[short]] = True
        joined = np.empty(slot.size, dtype=np.uint32)
        joined[slot] = _whole_sequences(units, unit_offsets[short], n_units[short], k, salt)
        joined[~slot] = values
        values = joined
    return _distinct(values, bounds, per_text, with_counts)


def _windows(units: np.ndarray, unit_offsets: np.ndarray, k: int, salt: np.uint64) -> np.ndarray:
    """The uint32 value of every window of k consecutive units that ends inside the text
    it starts in, in order."""
    n_windows = units.size - k + 1
    if n_windows <= 0:
        return np.zeros(0, dtype=np.uint32)
    # By slices (no gathers), then mixed in place.
    acc = np.full(n_windows, salt, dtype=_U64)
    for j in range(k):
        acc *= SHINGLE_MULT
        acc += units[j : j + n_windows]
    acc ^= _U64(k)
    acc = mix64_inplace(acc)
    acc >>= _U64(32)
    values = acc.astype(np.uint32)
    if k == 1:
        return values
    # The window at p runs past its text's end e when p > e - k: the last k - 1
    # starts of each text (every start of a text shorter than k).
    past = unit_offsets[1:, None] - np.arange(1, k, dtype=np.int64)[None, :]
    past = past[(past >= unit_offsets[:-1, None]) & (past < n_windows)]
    if not past.size:
        return values
    keep = np.ones(n_windows, dtype=bool)
    keep[past] = False
    return values[keep]


def _whole_sequences(units: np.ndarray, first: np.ndarray, width: np.ndarray, k: int,
                     salt: np.uint64) -> np.ndarray:
    """One uint32 shingle value per short text (fewer than k units, at least one),
    made of all its units."""
    acc = np.full(first.size, salt, dtype=_U64)
    for j in range(k - 1):
        inside = j < width
        idx = np.where(inside, first + j, first)
        acc = np.where(inside, acc * SHINGLE_MULT + units[idx], acc)
    return (mix64(acc ^ width.astype(_U64)) >> _U64(32)).astype(np.uint32)


def _distinct(values: np.ndarray, bounds: np.ndarray, per_text: np.ndarray,
              with_counts: bool) -> tuple[np.ndarray, ...]:
    """Sets, not bags: each text's slice values[bounds[i]:bounds[i+1]] sorted on its own
    (in place), repeats dropped: (values, offsets[, counts])."""
    # Many small uint32 sorts ran ~15x faster here than one sort of 64-bit
    # (text, value) keys over the batch, which was the kernel's largest cost.
    several = per_text > 1
    for lo, hi in zip(bounds[:-1][several].tolist(), bounds[1:][several].tolist()):
        values[lo:hi].sort()
    fresh = np.empty(values.size, dtype=bool)
    fresh[0] = True
    np.not_equal(values[1:], values[:-1], out=fresh[1:])
    fresh[bounds[:-1][per_text > 0]] = True  # a text's first value is new whatever precedes it
    running = np.zeros(values.size + 1, dtype=np.int64)
    np.cumsum(fresh, out=running[1:])
    out = values[fresh], running[bounds]
    if not with_counts:
        return out
    kept = np.flatnonzero(fresh)
    return (*out, np.diff(np.append(kept, values.size)).astype(np.int32))


def shingle_codepoints(cps: np.ndarray, offsets: np.ndarray, unit: str, k: int, seed: int,
                       with_counts: bool = False) -> tuple[np.ndarray, ...]:
    """Normalised texts as code points -> (uint32 distinct shingle values, offsets[, counts])."""
    units, unit_offsets = UNITS[unit](cps, offsets)
    return shingle_hashes(units, unit_offsets, k, seed, with_counts)


# What a shingle is made of, by [shingle] unit.
UNITS = {"word": word_units, "auto": script_units, "char": char_units}


def join_sets(parts: Sequence[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    """The (values, offsets[, counts]) of consecutive runs of texts as those of all of them."""
    shift = np.cumsum([0] + [p[0].size for p in parts[:-1]])
    offsets = np.concatenate([parts[0][1][:1]] + [p[1][1:] + s for p, s in zip(parts, shift)])
    return (np.concatenate([p[0] for p in parts]), offsets, *(np.concatenate(c) for c in zip(*(p[2:] for p in parts))))


def shingle_texts(texts: Sequence[str], unit: str, k: int, seed: int,
                  with_counts: bool = False) -> tuple[np.ndarray, ...]:
    """Normalised texts -> (uint32 distinct shingle values, offsets[, counts]) (see `shingle_hashes`),
    tokenised CHUNK_CHARS code points at a time."""
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    parts = [shingle_codepoints(*codepoints(texts[lo:hi]), unit, k, seed, with_counts)
             for lo, hi in ranges_under(lengths, CHUNK_CHARS)]
    if not parts:
        return shingle_codepoints(*codepoints([]), unit, k, seed, with_counts)
    return join_sets(parts)


def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """MinHash coefficients (a odd, b) as uint32 arrays, from the seed alone."""
    rng = np.random.Generator(np.random.PCG64(seed))
    a = rng.integers(0, 2**32, size=num_perm, dtype=np.uint64).astype(np.uint32) | np.uint32(1)
    b = rng.integers(0, 2**32, size=num_perm, dtype=np.uint64).astype(np.uint32)
    return a, b


EMPTY_SLOT = np.uint32(0xFFFFFFFF)


def minhash(values: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Signatures [n_texts, num_perm] (uint32) of the sets values[offsets[i]:offsets[i+1]].

    One permutation at a time over the whole (cache-sized) batch: multiply and
    add wrap modulo 2**32 in place, then a segmented minimum. Texts with no
    values get EMPTY_SLOT everywhere (callers keep empty texts out).
    """
    n_texts = offsets.size - 1
    sig = np.full((a.size, n_texts), EMPTY_SLOT, dtype=np.uint32)
    sizes = np.diff(offsets)
    nonempty = sizes > 0
    if not nonempty.any():
        return sig.T.copy()
    starts = offsets[:-1][nonempty]
    x = np.ascontiguousarray(values, dtype=np.uint32)
    buf = np.empty_like(x)
    every = bool(nonempty.all())  # the sketch's case: each minimum goes straight into its row
    for i in range(a.size):
        np.multiply(x, a[i], out=buf)
        np.add(buf, b[i], out=buf)
        if every:
            np.minimum.reduceat(buf, starts, out=sig[i])
        else:
            sig[i, nonempty] = np.minimum.reduceat(buf, starts)
    return sig.T.copy()


def unpack_set(blob: bytes) -> np.ndarray:
    """A stored shingle set (sorted little-endian uint32 bytes) as a uint32 array."""
    return np.frombuffer(blob, dtype="<u4")


def intersection_sizes(left: Sequence[bytes], right: Sequence[bytes]) -> np.ndarray:
    """|A n B| for each pair of stored shingle sets given as bytes (int64)."""
    blobs = [*left, *right]
    lengths = np.fromiter((len(x) // 4 for x in blobs), np.int64, len(blobs))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    values = np.frombuffer(b"".join(blobs), dtype="<u4")
    n = len(left)
    return slice_intersections(values, starts[:n], ends[:n], starts[n:], ends[n:])


def slice_intersections(values: np.ndarray, a_lo: np.ndarray, a_hi: np.ndarray,
                        b_lo: np.ndarray, b_hi: np.ndarray) -> np.ndarray:
    """|A n B| for each pair (int64), A = values[a_lo:a_hi] and B = values[b_lo:b_hi]:
    sorted distinct uint32 sets held once in `values`, however many pairs share them.

    Each set is distinct, so the size of the intersection is the number of
    equal neighbours in the sorted concatenation of the two. Sorting the ~740
    uint32 of a pair (a vectorised small sort) measured 3.4 us a pair here at
    ~350 shingles, against 6.9 us for searching one set in the other and
    9.5 us for `np.intersect1d` (their bookkeeping calls cost more than the
    work); one batch-wide 64-bit sort of (pair, value) keys, or a batch-wide
    searchsorted, took 26-39 us a pair.
    """
    out = np.empty(len(a_lo), dtype=np.int64)
    for i, (a0, a1, b0, b1) in enumerate(zip(a_lo.tolist(), a_hi.tolist(), b_lo.tolist(), b_hi.tolist())):
        joined = np.concatenate((values[a0:a1], values[b0:b1]))
        joined.sort()
        out[i] = np.count_nonzero(joined[1:] == joined[:-1])
    return out


def ranges_under(weights: np.ndarray, cap: int):
    """[lo, hi) ranges of consecutive items whose weights add up to at most `cap`
    (one item at least, however heavy): how batches are cut to a bounded size."""
    total = np.cumsum(weights)
    lo = 0
    while lo < len(weights):
        before = int(total[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(total, before + cap, side="right")))
        yield lo, hi
        lo = hi
