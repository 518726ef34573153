"""Stages 2-6 in one pass: text -> exact digest, shingle set and LSH band keys.

One Pandas UDF reads each Arrow batch of raw text once and runs, in numpy,
what used to be four Spark stages: normalise (see `normalise`), hash the
normalised text for the exact pass, shingle it, MinHash the shingles and
hash each band of the signature into a 64-bit bucket key. Only the results
travel back to the JVM: a 16-byte digest, the distinct 32-bit shingles
as one binary value (sorted little-endian uint32, kept for exact
verification; a Spark array of ~370 ints costs several times more to
convert and to shuffle) and `bands` bucket keys. The normalised text
and the 128-value signature never leave the Python worker, so nothing large
is shuffled by the exact pass and no per-band hashing runs in the JVM.

Each band's key mixes the band's index with its `rows` signature values, so
keys of different bands never meet: the key alone identifies the bucket.
Same seed, same keys, on any partitioning.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf

from . import columns as C
from . import containment, hashing, simhash
from .boilerplate import strip_normalised
from .config import Config, NormaliseConfig
from .normalise import normalise_series, utf8_bytes
from .params import LshParams, lsh_params

SKETCH_TYPE = f"struct<{C.EXACT_HASH}:binary,{C.SHINGLES}:binary,{C.BANDS}:array<bigint>,{C.STRIPPED}:int>"
CONTAINMENT_TYPE = SKETCH_TYPE[:-1] + f",{C.QUERIES}:array<bigint>>"
_DIGEST_BYTES = 16


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

    def spark_type(self) -> str:
        return SKETCH_TYPE[:-1] + "".join(f",{c}:bigint" for c in self.columns) + ">"

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


def containment_classes(cfg: Config) -> list | None:
    """The size classes of containment mode (None in Jaccard mode)."""
    if cfg.match.mode != "containment":
        return None
    return containment.size_classes(cfg.match.containment_threshold, cfg.minhash.num_perm, cfg.match.max_size_ratio)


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
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=_DIGEST_BYTES).digest()


def sketch_frame(
    texts: pd.Series, opts: NormaliseConfig, unit: str, k: int, seed: int, a: np.ndarray, b: np.ndarray, lsh: LshParams,
    strip: Stripping | None = None, sim: SimHashLayout | None = None, classes: list | None = None,
) -> pd.DataFrame:
    """Raw texts -> DataFrame(exact_hash, shingles, bands, stripped); empty texts get a null
    hash and no shingles or bands. With `strip`, boilerplate segments go before anything else."""
    if strip is None:
        norm, stripped = normalise_series(texts, opts), np.zeros(len(texts), dtype=np.int32)
    else:
        norm, stripped = strip_normalised(texts, opts, strip.unit, strip.keys)
    n = len(norm)
    hashes: list[bytes | None] = [None] * n
    shingles: list[bytes] = [b""] * n
    keys: list[np.ndarray] = [np.zeros(0, np.int64)] * n
    prints = np.zeros((n, sim.bits // 64 if sim else 1), dtype=np.int64)
    queries: list[np.ndarray] = [np.zeros(0, np.int64)] * n
    present = [i for i, t in enumerate(norm) if isinstance(t, str) and t]
    for lo in range(0, len(present), hashing.SUB_BATCH):
        rows_ = present[lo : lo + hashing.SUB_BATCH]
        chunk = [norm.iat[i] for i in rows_]
        tf = sim is not None and sim.weighting == "tf"
        values, offsets, *counts = hashing.shingle_texts(chunk, unit, k, seed, with_counts=tf)
        if classes:
            sig = hashing.minhash(values, offsets, a, b)
            band, query = containment.keys(sig, np.diff(offsets), classes, band_keys)
            for j, i in enumerate(rows_):
                queries[i] = query[j]
        elif sim is None:
            band = band_keys(hashing.minhash(values, offsets, a, b), lsh.bands, lsh.rows)
        else:
            fp = simhash.fingerprints(values, offsets, seed, sim.bits, counts[0] if tf else None)
            prints[rows_] = fp
            band = simhash.table_keys(fp, sim.distance, sim.blocks)
        packed = values.astype("<u4", copy=False).tobytes()
        for j, i in enumerate(rows_):
            hashes[i] = digest(chunk[j])
            shingles[i] = packed[4 * offsets[j] : 4 * offsets[j + 1]]
            keys[i] = band[j]
    out = {C.EXACT_HASH: hashes, C.SHINGLES: shingles, C.BANDS: keys, C.STRIPPED: stripped}
    if sim is not None:
        for w, col in enumerate(sim.columns):
            out[col] = prints[:, w]
    if classes:
        out[C.QUERIES] = queries
    return pd.DataFrame(out, index=texts.index)



def sketch_column(text: Column, cfg: Config, lsh: LshParams | None = None, strip: Stripping | None = None) -> Column:
    """A struct column (exact_hash, shingles, bands, stripped) computed from raw `text`."""
    lsh = lsh or lsh_params(cfg)
    opts, unit, k, seed = cfg.normalise, cfg.shingle.unit, cfg.shingle.k, cfg.minhash.seed
    a, b = hashing.permutations(cfg.minhash.num_perm, seed)
    sim = SimHashLayout.of(cfg)
    classes = containment_classes(cfg)
    kind = CONTAINMENT_TYPE if classes else (SKETCH_TYPE if sim is None else sim.spark_type())

    @pandas_udf(kind)
    def _sketch(texts: pd.Series) -> pd.DataFrame:
        return sketch_frame(texts, opts, unit, k, seed, a, b, lsh, strip, sim, classes)

    return _sketch(utf8_bytes(text))


def sketch(docs: DataFrame, cfg: Config, lsh: LshParams | None = None, strip: Stripping | None = None) -> DataFrame:
    """docs(text, ...) -> docs without text + exact_hash, shingles, bands, is_empty, and
    (with `strip`) the number of boilerplate segments removed."""
    s = "_sketch"
    out = docs.withColumn(s, sketch_column(F.col(C.TEXT), cfg, lsh, strip)).drop(C.TEXT)
    extra = [F.col(f"{s}.{C.STRIPPED}").alias(C.STRIPPED)] if strip is not None else []
    sim = SimHashLayout.of(cfg)
    if sim is not None:
        extra += [F.col(f"{s}.{col}").alias(col) for col in sim.columns]
    if cfg.match.mode == "containment":
        extra.append(F.col(f"{s}.{C.QUERIES}").alias(C.QUERIES))
    return out.select(
        *[c for c in out.columns if c != s],
        F.col(f"{s}.{C.EXACT_HASH}").alias(C.EXACT_HASH),
        F.col(f"{s}.{C.SHINGLES}").alias(C.SHINGLES),
        F.col(f"{s}.{C.BANDS}").alias(C.BANDS),
        F.col(f"{s}.{C.EXACT_HASH}").isNull().alias(C.IS_EMPTY),
        *extra,
    )
