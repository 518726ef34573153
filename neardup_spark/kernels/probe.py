"""Key probe: which rows of a long column of bucket keys hold one of a set of keys, in numpy.

The set (a night's band keys of one bucket range, ~500k) is held twice: as a
sorted array, and as a table of seen low bits (a byte per slot, ~32 slots per
key). A row costs one masked gather into that table; only the few percent of
rows whose slot is set are confirmed by binary search.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Slots per key: about 1 row in 32 whose key is absent passes the table (and is then searched).
_SLOTS_PER_KEY = 32
_MIN_BITS, _MAX_BITS = 12, 26  # 4 KB .. 64 MB of table


@dataclass(frozen=True)
class KeySet:
    keys: np.ndarray  # int64, sorted
    values: np.ndarray  # int64, the value of each key row (keys may repeat: one row per value)
    seen: np.ndarray  # bool, 2**bits slots: whether some key has these low bits
    mask: int


def key_set(keys: np.ndarray, values: np.ndarray) -> KeySet:
    """The probe structure of (keys[i], values[i]) rows (int64 arrays of equal length)."""
    order = np.argsort(keys, kind="stable")
    keys, values = np.ascontiguousarray(keys[order], np.int64), np.ascontiguousarray(values[order], np.int64)
    bits = int(np.clip(np.ceil(np.log2(max(keys.size, 1) * _SLOTS_PER_KEY)), _MIN_BITS, _MAX_BITS))
    mask = (1 << bits) - 1
    seen = np.zeros(1 << bits, dtype=bool)
    seen[keys & mask] = True
    return KeySet(keys, values, seen, mask)


def matches(ks: KeySet, column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, at) for an int64 column: every (row of column, key row of ks) with equal keys;
    rows ascending, so a row matching several key rows appears once per key row."""
    rows = np.flatnonzero(ks.seen[column & ks.mask])
    if rows.size == 0 or ks.keys.size == 0:
        return rows[:0], rows[:0]
    found = column[rows]
    lo = np.searchsorted(ks.keys, found, "left")
    n = np.searchsorted(ks.keys, found, "right") - lo
    hit = n > 0
    rows, lo, n = rows[hit], lo[hit], n[hit]
    if rows.size == 0 or int(n.max()) == 1:
        return rows, lo
    first = np.repeat(np.cumsum(n) - n, n)
    at = np.repeat(lo, n) + (np.arange(int(n.sum())) - first)
    return np.repeat(rows, n), at
