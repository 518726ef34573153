"""SimHash fingerprints and the pigeonhole block tables that find all pairs within k bits.

A document's 64-bit SimHash (Charikar) is the sign, bit by bit, of the sum
over its shingles of +1/-1 for each bit of the shingle's 64-bit hash: 8 bytes
a document, and near copies differ in few bits. It tracks cosine similarity
of the shingle sets, not Jaccard (MISSION.md: best F1 0.82 against MinHash's
0.9999 on the seven-edit corpus); its strength is near-exact copies of long
documents at tiny storage.

Finding every pair within Hamming distance k (Manku, Jain and Das Sarma,
WWW 2007): cut the 64 bits into `blocks` contiguous blocks (default k+1).
Two fingerprints that differ in at most k bits differ in at most k blocks,
so at least blocks-k blocks are identical: one table per choice of
blocks-k blocks, keyed on those blocks' bits, puts every such pair in a
shared bucket (C(blocks, blocks-k) tables; k=3: 4 tables of 16-bit keys;
6 blocks: 20 tables keyed on 3 blocks each, fewer false candidates per
table). The keys flow into the same bucket, candidate and verification
stages as MinHash band keys, and verification keeps pairs within k bits.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from .hashing import mix64

BITS = 64
_SALT = 0xD6E8FEB86659FD93
_TABLE_MULT = np.uint64(0x9E3779B97F4A7C15)


def fingerprints(values: np.ndarray, offsets: np.ndarray, seed: int) -> np.ndarray:
    """SimHash of each set of 32-bit shingle values (values[offsets[i]:offsets[i+1]]): int64 per set.

    Every shingle counts once (the sets are sets); bit j is 1 when more
    than half of the shingles' 64-bit hashes have bit j set. An empty set
    gets 0.
    """
    n = offsets.size - 1
    out = np.zeros(n, dtype=np.uint64)
    sizes = np.diff(offsets)
    if values.size == 0:
        return out.view(np.int64)
    h = mix64(values.astype(np.uint64) ^ np.uint64((seed * _SALT) & 0xFFFFFFFFFFFFFFFF))
    nonempty = np.flatnonzero(sizes > 0)
    starts, half = offsets[nonempty], sizes[nonempty]
    acc = np.zeros(nonempty.size, dtype=np.uint64)
    for j in range(BITS):  # one bit at a time: a [shingles, 64] matrix would not stay in cache
        ones = np.add.reduceat(((h >> np.uint64(j)) & np.uint64(1)).astype(np.int32), starts)
        acc |= (2 * ones > half).astype(np.uint64) << np.uint64(j)
    out[nonempty] = acc
    return out.view(np.int64)


def block_masks(blocks: int) -> list[int]:
    """64-bit masks of `blocks` contiguous blocks (widths differ by at most one bit)."""
    if not 1 <= blocks <= BITS:
        raise ValueError(f"blocks must be in [1, 64]; got {blocks}")
    edges = [round(i * BITS / blocks) for i in range(blocks + 1)]
    return [((1 << (hi - lo)) - 1) << lo for lo, hi in zip(edges, edges[1:])]


@functools.lru_cache(maxsize=32)
def table_masks(distance: int, blocks: int) -> tuple[int, ...]:
    """One mask per table: the union of each choice of blocks-distance blocks."""
    if not 0 <= distance < blocks:
        raise ValueError(f"need 0 <= hamming distance < blocks; got distance={distance}, blocks={blocks}")
    masks = block_masks(blocks)
    out = []
    for chosen in itertools.combinations(range(blocks), blocks - distance):
        m = 0
        for i in chosen:
            m |= masks[i]
        out.append(m)
    return tuple(out)


def table_keys(prints: np.ndarray, distance: int, blocks: int) -> np.ndarray:
    """[n] int64 fingerprints -> [n, tables] int64 bucket keys: each table's masked bits, mixed
    with the table's index so keys of different tables never meet."""
    masks = np.array(table_masks(distance, blocks), dtype=np.uint64)
    tag = (np.arange(masks.size, dtype=np.uint64) + np.uint64(1)) * _TABLE_MULT
    keyed = (prints.view(np.uint64)[:, None] & masks[None, :]) ^ tag[None, :]
    return mix64(keyed).view(np.int64)


def hamming(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bits that differ between int64 fingerprints, element-wise."""
    x = (a.view(np.uint64) ^ b.view(np.uint64))
    return np.unpackbits(x.view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1)
