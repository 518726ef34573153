"""Boilerplate segments in numpy/pandas: cutting texts into segments, keying and stripping them
(see `stages.boilerplate` for finding them with Spark)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Collection

import numpy as np
import pandas as pd

from neardup_spark.config import BoilerplateConfig, NormaliseConfig
from neardup_spark.kernels import hashing
from neardup_spark.kernels.normalise import decode_codepoints, normalised_codepoints

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_segments(text: str, unit: str) -> list[str]:
    """The text's segments as written: its lines (any line break `str.splitlines` knows), or
    its sentences within lines; one per segment of `segment_batch`, blank ones included."""
    if unit == "sentence":
        text = _SENTENCE_END.sub("\n", text)
    return text.splitlines()


def _decode(text) -> str | None:
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", "replace")
    return None if text is None or (isinstance(text, float) and text != text) else text


@dataclass(frozen=True)
class Segmented:
    """A batch of texts cut into segments: their normalised forms and keys, flat."""

    forms: list[str]  # normalised; "" for a blank segment
    keys: list[int]  # 64-bit signed key per segment (0 for a blank one)
    offsets: np.ndarray  # segments of text i: offsets[i]:offsets[i+1]
    present: np.ndarray  # bool per text: not null

    def of(self, i: int) -> slice:
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))


def segment_batch(texts: pd.Series, opts: NormaliseConfig, unit: str) -> Segmented:
    """Raw texts (str or UTF-8 bytes, nulls allowed) -> their normalised segments and keys.

    Each segment (see `split_segments`) is normalised on its own, as `normalise_series`
    normalises a text; no normalisation step creates, removes or looks across a line
    break, so joining a text's non-blank forms with spaces gives exactly its
    normalised text.
    """
    decoded = [_decode(t) for t in texts]
    present = np.fromiter((t is not None for t in decoded), dtype=bool, count=len(decoded))
    segments: list[str] = []
    sizes = np.zeros(len(decoded), dtype=np.int64)
    for i, text in enumerate(decoded):
        if text is not None:
            parts = split_segments(text, unit)
            segments.extend(parts)
            sizes[i] = len(parts)
    offsets = np.zeros(len(decoded) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    cps, bounds = normalised_codepoints(segments, opts)
    whole = decode_codepoints(cps)
    forms = [whole[lo:hi] for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist())]
    keys = hashing.string_hashes(forms).view(np.int64)
    keys[bounds[1:] == bounds[:-1]] = 0  # a blank segment
    return Segmented(forms, keys.tolist(), offsets, present)


def distinct_keys(texts: pd.Series, opts: NormaliseConfig, unit: str) -> pd.Series:
    """Per text, the distinct keys of its non-blank segments (int64 arrays)."""
    seg = segment_batch(texts, opts, unit)
    keys = np.asarray(seg.keys, dtype=np.int64)
    out = []
    for i in range(len(texts)):
        k = keys[seg.of(i)]
        out.append(np.unique(k[k != 0]))  # 0: a blank segment
    return pd.Series(out, index=texts.index)


def strip_normalised(texts: pd.Series, opts: NormaliseConfig, unit: str,
                     boilerplate: Collection[int]) -> tuple[pd.Series, np.ndarray]:
    """(normalised texts without their boilerplate segments, segments stripped per text).

    The result equals `normalise_series` of the kept segments joined by
    spaces. A text whose non-blank segments are all boilerplate is kept
    whole (0 stripped); null stays null.
    """
    seg = segment_batch(texts, opts, unit)
    out: list[str | None] = []
    stripped = np.zeros(len(texts), dtype=np.int32)
    for i in range(len(texts)):
        if not seg.present[i]:
            out.append(None)
            continue
        forms = [f for f in seg.forms[seg.of(i)] if f]
        kept = [f for f, k in zip(seg.forms[seg.of(i)], seg.keys[seg.of(i)]) if f and k not in boilerplate]
        if kept and len(kept) < len(forms):
            stripped[i] = len(forms) - len(kept)
            forms = kept
        out.append(" ".join(forms))
    return pd.Series(out, index=texts.index, dtype=object), stripped


@dataclass(frozen=True)
class Boilerplate:
    """The segments found to be boilerplate, and the count that made them so."""

    keys: frozenset[int]
    min_documents: int  # max(min_docs, ceil(min_share * documents))
    lines: pd.DataFrame  # line_key, documents, example: most frequent first

    def as_dict(self) -> dict:
        return {"lines": len(self.keys), "min_documents": self.min_documents}


def min_documents(cfg: BoilerplateConfig, n_docs: int) -> int:
    """Documents a segment must occur in to count as boilerplate."""
    return max(cfg.min_docs, math.ceil(cfg.min_share * n_docs))
