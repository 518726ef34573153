"""Containment maths: size classes, their (b, r) and the query/index keys (see `stages.containment`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from neardup_spark.config import MAX_NUM_PERM
from neardup_spark.kernels.hashing import mix64
from neardup_spark.kernels.lsh import TARGET_CATCH, candidate_probability, catching

MIN_CATCH = 0.95
_CLASS_MULT = 0xA24BAED4963EE407
_LEVEL_MULT = np.uint64(0x9FB21C651E98DF25)


@dataclass(frozen=True)
class SizeClass:
    k: int  # size ratio up to 2**k (class 0: like sizes)
    jaccard_floor: float  # the smallest Jaccard of a pair in this class at containment t
    bands: int
    rows: int
    offsets: tuple[int, int]  # query levels relative to the document's own

    def as_dict(self) -> dict:
        return {"class": self.k, "max_size_ratio": 2**self.k, "jaccard_floor": round(self.jaccard_floor, 4),
                "bands": self.bands, "rows": self.rows,
                "p_candidate_at_floor": round(candidate_probability(self.jaccard_floor, self.bands, self.rows), 4)}


def size_classes(threshold: float, num_perm: int, max_ratio: float) -> list[SizeClass]:
    """The classes, their Jaccard floors and (b, r), for containment `threshold`."""
    top = max(0, math.ceil(math.log2(max_ratio)))
    out = []
    for k in range(top + 1):
        floor = threshold / (1 + 2**k - threshold)
        b, r = catching(floor, num_perm, MIN_CATCH)
        out.append(SizeClass(k, floor, b, r, (-1, 0) if k == 0 else (k - 1, k)))
    return out


def advice(classes: list[SizeClass], threshold: float, num_perm: int = 128, pinned: bool = False) -> list[str]:
    """Human warnings about the size classes: those whose pairs at the containment threshold
    become candidates with probability under TARGET_CATCH (num_perm too small for their
    Jaccard floor), and pinned lsh.bands x rows, which this mode does not use. The
    Jaccard-mode advice does not apply: its bands are not used here."""
    notes = []
    for c in classes:
        p = candidate_probability(c.jaccard_floor, c.bands, c.rows)
        if p < TARGET_CATCH:
            fixes = [f"raise minhash.num_perm (now {num_perm})"] if num_perm < MAX_NUM_PERM else []
            if c.k:
                fixes.append("lower match.max_size_ratio")
            notes.append(
                f"containment size class {c.k} ({_sizes(c.k)}): pairs at containment {threshold:g} have Jaccard "
                f"down to {c.jaccard_floor:.3g} and become candidates with probability {p:.3f} "
                f"(< {TARGET_CATCH:.0%}) with {c.bands} x {c.rows}"
                + (f"; {' or '.join(fixes)}" if fixes else ""))
    if pinned:
        notes.append("lsh.bands and lsh.rows are set but unused: containment mode bands each size class for its "
                     "own Jaccard floor")
    return notes


def _sizes(k: int) -> str:
    return "sets of like size" if k == 0 else f"larger set up to {2**k}x the smaller"


def format_report(classes: list[SizeClass], threshold: float, num_perm: int, notes: list[str]) -> str:
    """The text `neardup params` prints in containment mode: each size class's bands and
    catch, then `notes` (the run's advice)."""
    lines = [
        "mode             containment",
        f"containment      {threshold:g} (|A n B| / |A|, A the smaller set)",
        f"num_perm         {num_perm}",
        "",
        "class  larger set up to  Jaccard floor  bands x rows  P(candidate) at floor",
    ]
    for c in classes:
        p = candidate_probability(c.jaccard_floor, c.bands, c.rows)
        lines.append(f"{c.k:5d}  {2**c.k:>15}x  {c.jaccard_floor:13.4f}  {f'{c.bands} x {c.rows}':>12}  {p:21.4f}")
    lines += [f"warning: {note}" for note in notes]
    return "\n".join(lines)


def levels(sizes: np.ndarray) -> np.ndarray:
    """floor(log2(size)) per set (0 for empty or singleton sets)."""
    return np.floor(np.log2(np.maximum(sizes, 1))).astype(np.int64)


def _key(band: np.ndarray, k: int, level: np.ndarray) -> np.ndarray:
    tagged = band.view(np.uint64) ^ np.uint64(((k + 1) * _CLASS_MULT) & 0xFFFFFFFFFFFFFFFF)
    return mix64(tagged ^ (level.astype(np.uint64)[:, None] * _LEVEL_MULT)).view(np.int64)


def keys(signatures: np.ndarray, sizes: np.ndarray, classes: list[SizeClass], band_keys) -> tuple[np.ndarray,
                                                                                                 np.ndarray]:
    """([n, index keys], [n, query keys]) for signatures [n, P] of sets of `sizes`."""
    lv = levels(sizes)
    index, query = [], []
    for c in classes:
        band = band_keys(signatures, c.bands, c.rows)
        index.append(_key(band, c.k, lv))
        query += [_key(band, c.k, lv + off) for off in c.offsets]
    return np.concatenate(index, axis=1), np.concatenate(query, axis=1)
