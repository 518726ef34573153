"""The sketch kernel: a batch of raw texts -> exact digests, shingle sets and bucket keys.

Runs inside a Python worker on Arrow arrays (see `stages.sketch` for the
Spark side): normalise, hash the normalised text for the exact pass, shingle
it, then MinHash and band (or SimHash and block-table, or containment size
classes). Returns Arrow columns built over numpy buffers.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from neardup_spark import columns as C
from neardup_spark.config import Config, NormaliseConfig
from neardup_spark.kernels import containment
from neardup_spark.kernels import hashing
from neardup_spark.kernels import simhash
from neardup_spark.kernels.boilerplate import strip_normalised
from neardup_spark.kernels.lsh import LshParams
from neardup_spark.kernels.normalise import normalised_utf8, utf8_codepoints


_DIGEST_BYTES = 16
# Bytes Spark's UTF8String.numChars steps over for each lead byte: continuation bytes and
# bytes UTF-8 never allows (C0, C1, F5-FF) count as characters of one byte.
_SPARK_CHAR_BYTES = bytes([1] * 0xC2 + [2] * (0xE0 - 0xC2) + [3] * 16 + [4] * 5 + [1] * 11)


@dataclass(frozen=True)
class SimHashLayout:
    """SimHash instead of MinHash: block-table keys become the bucket keys (see `simhash`)."""

    distance: int
    blocks: int
    bits: int = 64
    weighting: str = "none"

    @classmethod
    def of(cls, cfg: Config) -> "SimHashLayout | None":
        if cfg.match.method != "simhash":
            return None
        sh = cfg.simhash
        return cls(sh.hamming_distance, sh.blocks or sh.hamming_distance + 1, sh.bits, sh.weighting)

    @property
    def columns(self) -> list[str]:
        return simhash.columns(self.bits)

    def as_dict(self) -> dict:
        masks = simhash.table_masks(self.distance, self.blocks, self.bits)
        return {
            "method": "simhash",
            "key_bits": min(bin(m).count("1") for m in masks),
            "bits": self.bits,
            "weighting": self.weighting,
            "hamming_distance": self.distance,
            "blocks": self.blocks,
            "tables": len(masks),
            "fingerprint_bytes": self.bits // 8,
        }


@dataclass(frozen=True)
class Stripping:
    """Boilerplate segment keys to remove (see `boilerplate`), and how texts are cut."""

    keys: frozenset[int]
    unit: str = "line"


def band_keys(signatures: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """[n, num_perm] uint32 signatures -> [n, bands] int64 bucket keys.

    Key of band i = mix64 of (i, its rows values) folded polynomially; a
    64-bit collision only adds a candidate that verification rejects.
    """
    n = signatures.shape[0]
    acc = np.broadcast_to(hashing.mix64(np.arange(bands, dtype=np.uint64) + np.uint64(1)), (n, bands)).copy()
    cut = signatures[:, : bands * rows].reshape(n, bands, rows).astype(np.uint64)
    for j in range(rows):
        acc *= hashing.SHINGLE_MULT
        acc += cut[:, :, j]
    return hashing.mix64(acc).view(np.int64)


def digest(text: str) -> bytes:
    """128-bit BLAKE2b of a normalised text: the exact-pass key (collisions ~2**-64 at 10**10 docs)."""
    return _blake(text.encode("utf-8", "surrogatepass"))


def _blake(data) -> bytes:
    return hashlib.blake2b(data, digest_size=_DIGEST_BYTES).digest()


def _texts(arr: pa.Array) -> tuple[list[bytes | None], bool]:
    """Arrow text (string or binary) -> each text's bytes (None for null), and whether
    they are all valid UTF-8 (if not, `normalised_utf8` decodes them, invalid bytes
    becoming U+FFFD).

    Spark strings need not be UTF-8 (Parquet, casts and binary data can put any bytes in
    them), and Arrow trusts a string column it is given, so the text is read as binary
    and validated here, in C, in one pass. It stays bytes: decoding every text to str
    and encoding it back cost ~2 us a document for ASCII, ~6 for other text."""
    if pa.types.is_string(arr.type):
        arr = arr.view(pa.binary())
    try:
        arr.cast(pa.string())
        valid = True
    except pa.ArrowInvalid:
        valid = False
    return arr.to_pylist(), valid


def spark_length(data: bytes) -> int:
    """What Spark's length() returns for a string holding these bytes, UTF-8 or not."""
    try:
        return len(data.decode("utf-8"))
    except UnicodeDecodeError:
        pos = chars = 0
        while pos < len(data):
            pos += _SPARK_CHAR_BYTES[data[pos]]
            chars += 1
        return chars


def text_lengths(raw: Sequence[str | bytes | None]) -> pa.Array:
    """Characters of each raw text (str, or bytes, UTF-8 or not), as Spark's length()
    counts them (the code points, for valid UTF-8); null for null."""
    return pa.array([None if t is None else len(t) if isinstance(t, str) or t.isascii() else spark_length(bytes(t))
                     for t in raw], pa.int32())


def _binary(lengths: np.ndarray, data: np.ndarray) -> pa.Array:
    """len(lengths) binary values cut in order from the bytes of `data`, without copying them."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] >= 2**31:  # pragma: no cover - callers cut batches well below this
        raise ValueError("shingle sets of one Arrow batch exceed 2 GiB")
    return pa.Array.from_buffers(pa.binary(), len(lengths), [None, pa.py_buffer(offsets.astype(np.int32)),
                                                            pa.py_buffer(data)])


def _lists(lengths: np.ndarray, parts: list[np.ndarray]) -> pa.Array:
    """len(lengths) lists of int64 cut in order from the rows of `parts` ([m, width] arrays)."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = np.concatenate([p.ravel() for p in parts]) if parts else np.zeros(0, np.int64)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values.astype(np.int64, copy=False)))


def sketch_arrays(
    texts: pa.Array, opts: NormaliseConfig, unit: str, k: int, seed: int, a: np.ndarray, b: np.ndarray, lsh: LshParams,
    strip: Stripping | None = None, sim: SimHashLayout | None = None, classes: list | None = None,
) -> dict[str, pa.Array]:
    """Raw texts (Arrow string or binary) -> Arrow columns exact_hash, shingles, bands, stripped
    [, simhash words][, queries]. Empty texts get a null hash, no shingles and no bands.
    With `strip`, boilerplate segments go before anything else."""
    raw, valid = _texts(texts)
    if strip is None:
        todo, stripped = raw, np.zeros(len(raw), dtype=np.int32)
    else:
        norm, stripped = strip_normalised(pd.Series(raw, dtype=object), opts, strip.unit, strip.keys)
        todo = norm.tolist()  # already normalised: only its spaces are looked at again
        opts = dataclasses.replace(opts, nfkc=False, lowercase=False)
    n = len(todo)
    hashes: list[bytes | None] = [None] * n
    sizes, n_keys, n_queries = (np.zeros(n, dtype=np.int64) for _ in range(3))
    packs, keys, queries = [], [], []
    prints = np.zeros((n, sim.bits // 64 if sim else 1), dtype=np.int64)
    tf = sim is not None and sim.weighting == "tf"
    present = [i for i, t in enumerate(todo) if t]  # not null, not empty (normalising may still empty it)
    for lo in range(0, len(present), hashing.SUB_BATCH):
        rows_ = present[lo : lo + hashing.SUB_BATCH]
        (values, offsets, *counts), digests = _shingled([todo[i] for i in rows_], opts, unit, k, seed, tf, valid)
        kept = np.fromiter((d is not None for d in digests), dtype=bool, count=len(rows_))
        if not kept.all():  # texts that normalise to nothing (no shingles either) are empty
            rows_ = [i for i, keep in zip(rows_, kept) if keep]
            offsets = np.append(offsets[:-1][kept], offsets[-1])
            if not rows_:
                continue
        if classes:
            band, query = containment.keys(hashing.minhash(values, offsets, a, b), np.diff(offsets), classes, band_keys)
            queries.append(query)
            n_queries[rows_] = query.shape[1]
        elif sim is None:
            band = band_keys(hashing.minhash(values, offsets, a, b), lsh.bands, lsh.rows)
        else:
            fp = simhash.fingerprints(values, offsets, seed, sim.bits, counts[0] if tf else None)
            prints[rows_] = fp
            band = simhash.table_keys(fp, sim.distance, sim.blocks)
        packs.append(values.astype("<u4", copy=False))
        keys.append(band)
        sizes[rows_] = np.diff(offsets)
        n_keys[rows_] = band.shape[1]
        for i, d in zip(rows_, (d for d in digests if d is not None)):
            hashes[i] = d
    shingles = np.concatenate(packs) if packs else np.zeros(0, dtype="<u4")
    out = {
        C.EXACT_HASH: pa.array(hashes, pa.binary()),
        C.SHINGLES: _binary(4 * sizes, shingles),
        C.BANDS: _lists(n_keys, keys),
        C.STRIPPED: pa.array(stripped, pa.int32()),
        C.TEXT_LEN: text_lengths(raw),
    }
    if sim is not None:
        for w, col in enumerate(sim.columns):
            out[col] = pa.array(prints[:, w])
    if classes:
        out[C.QUERIES] = _lists(n_queries, queries)
    return out


def _utf8_digests(data: np.ndarray, offsets: np.ndarray) -> list[bytes | None]:
    """`digest` of each normalised text given as UTF-8 with its one trailing space
    (see `normalised_utf8`; None for an empty one)."""
    whole, bounds = memoryview(data), offsets.tolist()
    return [_blake(whole[s : e - 1]) if e > s else None for s, e in zip(bounds[:-1], bounds[1:])]


def _normalised_units(texts: list[str | bytes], opts: NormaliseConfig, unit: str,
                      valid_utf8: bool = False) -> tuple[list[bytes | None], np.ndarray, np.ndarray]:
    """Raw texts -> (exact-pass digests, shingle units, per-text unit offsets). Words
    are found in UTF-8 (also by "auto" when no text of the group has a character of a
    script written without spaces); other units need code points."""
    data, offsets = normalised_utf8(texts, opts, valid_utf8)
    digests = _utf8_digests(data, offsets)
    if unit == "word" or (unit == "auto" and not hashing.maybe_unspaced(data)):
        return (digests, *hashing.utf8_word_units(data, offsets))
    return (digests, *hashing.UNITS[unit](*utf8_codepoints(data, offsets)))


def _shingled(texts: list[str | bytes], opts: NormaliseConfig, unit: str, k: int, seed: int,
              with_counts: bool, valid_utf8: bool = False) -> tuple[tuple[np.ndarray, ...], list[bytes | None]]:
    """Raw texts -> their shingle sets (values, offsets[, counts]) and exact-pass digests
    (None for a text that normalises to nothing), about TOKEN_CHARS (words) or CHUNK_CHARS
    (characters, as uint64 code points) at a time, counted in characters for str and in
    bytes for bytes (the grouping bounds memory, it does not change the result)."""
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    parts, digests = [], []
    chunk = hashing.CHUNK_CHARS if unit == "char" else hashing.TOKEN_CHARS
    for lo, hi in hashing.ranges_under(lengths, chunk):
        found, units, unit_offsets = _normalised_units(texts[lo:hi], opts, unit, valid_utf8)
        digests += found
        parts.append(hashing.shingle_hashes(units, unit_offsets, k, seed, with_counts))
    return hashing.join_sets(parts), digests


def shingle_sets(texts: Sequence[str | None], opts: NormaliseConfig, unit: str, k: int,
                 seed: int) -> list[np.ndarray]:
    """Each raw text's distinct shingle values (uint32, sorted), as the sketch stage makes them
    (without boilerplate stripping); an empty array for a text that normalises to nothing."""
    raw = [t if t is not None else "" for t in texts]
    if not raw:
        return []
    (values, offsets, *_), _ = _shingled(raw, opts, unit, k, seed, False)
    return [values[offsets[i]:offsets[i + 1]] for i in range(len(raw))]


def sketch_frame(texts: pd.Series, *args, **kwargs) -> pd.DataFrame:
    """`sketch_arrays` on a pandas Series of str (or UTF-8 bytes), as a DataFrame: for tests,
    benchmarks and notebooks."""
    raw = [t.encode("utf-8", "surrogatepass") if isinstance(t, str) else (bytes(t) if t is not None else None)
           for t in texts]
    cols = sketch_arrays(pa.array(raw, pa.binary()), *args, **kwargs)
    return pa.table(cols).to_pandas().set_axis(texts.index)


# Text bytes per Arrow batch a worker sketches at once: the batch's shingle
# sets (~2x its text at most) stay far below Arrow's 2 GiB binary limit.
_SLICE_TEXT_BYTES = 128 << 20


def text_slices(text: pa.Array):
    """[lo, hi) row ranges of a batch, each of at most _SLICE_TEXT_BYTES of text (one row at least)."""
    return hashing.ranges_under(pc.fill_null(pc.binary_length(text), 0).to_numpy().astype(np.int64), _SLICE_TEXT_BYTES)
