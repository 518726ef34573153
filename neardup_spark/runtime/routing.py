"""Sending groups of rows to partitions of their own, one group a partition.

A stage that shards work into `parts` groups (verify: pairs by doc_a, each
with the sets it asks for) needs every row of a group in one partition.
Repartitioning by the group number (0..parts-1) does that, but Spark hashes
the number: `parts` groups then fall into `parts` partitions at random and
about a third of the partitions stay empty while others hold two or three
groups. `route` maps group g to a long `route_keys(parts)[g]` that Spark's
hash partitioner itself sends to partition g, so each partition gets one
group. Correctness never depends on that: rows of one group share one route
value, so they share a partition whatever the partitioner does; only the
balance would suffer if an engine hashed differently.
"""

from __future__ import annotations

from functools import lru_cache

from pyspark.sql import Column
from pyspark.sql import functions as F

_MASK = 0xFFFFFFFF
SEED = 42  # Spark's Murmur3Hash seed (functions.hash, HashPartitioning)
DEFAULT_PARTITIONS = 200  # Spark's default spark.sql.shuffle.partitions


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def _mix_k1(k1: int) -> int:
    k1 = (k1 * 0xCC9E2D51) & _MASK
    return (_rotl(k1, 15) * 0x1B873593) & _MASK


def _mix_h1(h1: int, k1: int) -> int:
    return (_rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & _MASK


def spark_hash_long(value: int, seed: int = SEED) -> int:
    """Spark's Murmur3 hash of one LongType value (`F.hash(col)`), as a signed 32-bit int."""
    value &= 0xFFFFFFFFFFFFFFFF
    h1 = _mix_h1(seed & _MASK, _mix_k1(value & _MASK))
    h1 = _mix_h1(h1, _mix_k1(value >> 32))
    h1 ^= 8
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


@lru_cache(maxsize=64)
def route_keys(parts: int) -> tuple[int, ...]:
    """For each partition g of `parts`, the smallest long that
    `repartition(parts, col)` sends there (pmod(hash(value), parts) == g)."""
    keys: dict[int, int] = {}
    value = 0
    while len(keys) < parts:
        keys.setdefault(spark_hash_long(value) % parts, value)  # Python's % is pmod
        value += 1
    return tuple(keys[g] for g in range(parts))


def shuffle_partitions(spark) -> int:
    """spark.sql.shuffle.partitions as a number of groups. A value that is not a
    positive whole number (Databricks' "auto" lets AQE choose) counts as Spark's
    default, 200."""
    value = str(spark.conf.get("spark.sql.shuffle.partitions", "200")).strip()
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_PARTITIONS


def route(group: Column, parts: int) -> Column:
    """The long to repartition by (`repartition(parts, it)`) for rows of group 0..parts-1."""
    return F.element_at(F.lit(list(route_keys(parts))).cast("array<long>"), group.cast("int") + 1)
