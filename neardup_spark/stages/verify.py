"""Stage 6, verify: candidate pairs -> pairs whose exact Jaccard reaches the threshold.

Each document's stored shingle set (binary, see `kernels.sketch`) travels once to
each partition that holds pairs it is in, not once per pair: the pairs are
grouped by `doc_a`, each group asks for the sets its pairs name, and an
Arrow function (`mapInArrow`) counts |A n B| with numpy over a partition's
pairs and sets. Joining both sets onto every pair instead shuffled 218 MB
at 100k documents (two sets a pair, and the whole table for the second
join); Jaccard and both containments (|A n B| / |A|: a short story inside
a long page has a small Jaccard but a containment near 1) are computed from
the sizes in the JVM.
"""

from __future__ import annotations

import math
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from neardup_spark import columns as C
from neardup_spark.config import Config
from neardup_spark.kernels import simhash
from neardup_spark.kernels.sets import pair_sizes, set_arrays
from neardup_spark.runtime.routing import route, shuffle_partitions

# Up to this many candidates are broadcast (and the sets they ask for, two
# per pair at most), so the big side (every document's shingle set) is
# scanned in place instead of shuffled for the lookup.
BROADCAST_CANDIDATES = 2_000_000
# Shingle-set bytes a verify partition asks for, at most about: more
# candidates get more partitions than spark.sql.shuffle.partitions, since
# a partition's sets are held in one Python worker.
PARTITION_SET_BYTES = 256 << 20
_GROUP, _PARTNER, _ROUTE = "_group", "_partner", "_route"
_SIZES = pa.schema([(C.DOC_A, pa.int64()), (C.DOC_B, pa.int64()), ("i", pa.int64()),
                    ("na", pa.int64()), ("nb", pa.int64())])
_BATCH_PAIRS = 1 << 18


def verify(candidates: DataFrame, cfg: Config, shingled: DataFrame, n_candidates: int | None = None,
           set_bytes: float | None = None) -> DataFrame:
    """candidates(doc_a, doc_b) + shingled(_nid, shingles[, simhash[, simhash_hi]]) ->
    (doc_a, doc_b, jaccard, containment_a, containment_b, match) with jaccard >= threshold
    (SimHash: within simhash.hamming_distance bits, and the Jaccard too if verify_jaccard).

    `n_candidates`, when known, lets small candidate sets be broadcast and sizes the
    partitions, with `set_bytes` (the mean stored set, bytes; 4 kB when unknown)."""
    small = n_candidates is not None and n_candidates <= BROADCAST_CANDIDATES
    pairs = candidates.select(C.DOC_A, C.DOC_B)
    if cfg.match.method == "simhash":  # Hamming distance first: pairs beyond it need no set intersection
        pairs = _within_hamming(pairs, shingled, cfg, small)
    parts = partitions(pairs.sparkSession, n_candidates, set_bytes)
    sized = intersected(pairs, shingled.select(C.NID, C.SHINGLES), parts, small)
    inter, size_a, size_b = F.col("i").cast("double"), F.col("na").cast("double"), F.col("nb").cast("double")
    scored = sized.select(
        C.DOC_A,
        C.DOC_B,
        (inter / (size_a + size_b - inter)).alias(C.JACCARD),
        (inter / size_a).alias(C.CONTAINMENT_A),
        (inter / size_b).alias(C.CONTAINMENT_B),
        F.lit(C.MATCH_NEAR).alias(C.MATCH),
    )
    if cfg.match.mode == "containment":
        return scored.where(F.greatest(C.CONTAINMENT_A, C.CONTAINMENT_B) >= F.lit(cfg.match.containment_threshold))
    if cfg.match.method == "simhash" and not cfg.simhash.verify_jaccard:
        return scored  # SimHash: within the Hamming distance is the test; Jaccard is reported
    return scored.where(F.col(C.JACCARD) >= F.lit(cfg.verify.threshold))


def partitions(spark, n_candidates: int | None, set_bytes: float | None) -> int:
    """Verify partitions: spark.sql.shuffle.partitions, or more when the sets that
    n_candidates pairs ask for (two a pair at most) exceed PARTITION_SET_BYTES each."""
    base = shuffle_partitions(spark)
    if not n_candidates:
        return base
    asked = 2 * n_candidates * (set_bytes or 4096)
    return max(base, math.ceil(asked / PARTITION_SET_BYTES))


def _within_hamming(pairs: DataFrame, shingled: DataFrame, cfg: Config, small: bool) -> DataFrame:
    """The pairs whose SimHash fingerprints differ in at most simhash.hamming_distance bits."""
    words = simhash.columns(cfg.simhash.bits)
    left = shingled.select(F.col(C.NID).alias(C.DOC_A), *[F.col(w).alias(f"fa{i}") for i, w in enumerate(words)])
    right = shingled.select(F.col(C.NID).alias(C.DOC_B), *[F.col(w).alias(f"fb{i}") for i, w in enumerate(words)])
    joined = left.join(F.broadcast(pairs) if small else pairs, C.DOC_A).join(right, C.DOC_B)
    bits = [F.bit_count(F.col(f"fa{i}").bitwiseXOR(F.col(f"fb{i}"))) for i in range(len(words))]
    return joined.where(sum(bits[1:], bits[0]) <= cfg.simhash.hamming_distance).select(C.DOC_A, C.DOC_B)


def intersected(pairs: DataFrame, sets: DataFrame, parts: int, small: bool = False) -> DataFrame:
    """pairs(doc_a, doc_b) + sets(_nid, shingles) -> (doc_a, doc_b, i, na, nb): |A n B|, |A|, |B|.

    Pairs fall into `parts` groups by doc_a, and each group asks for the sets of
    the ids its pairs name: a set travels once to every group that needs it. A
    group's pair rows and set rows share one route value (see `routing`), so they
    share a partition; a set missing from its pairs' partition raises."""
    keyed = pairs.select(C.DOC_A, C.DOC_B, F.pmod(F.xxhash64(C.DOC_A), F.lit(parts)).alias(_GROUP))
    needs = (
        keyed.select(_GROUP, F.col(C.DOC_A).alias(C.NID))
        .unionByName(keyed.select(_GROUP, F.col(C.DOC_B).alias(C.NID)))
        .distinct()
    )
    found = sets.join(F.broadcast(needs) if small else needs, C.NID)
    rows = found.select(_GROUP, C.NID, C.SHINGLES, F.lit(None).cast("long").alias(_PARTNER)).unionByName(
        keyed.select(_GROUP, F.col(C.DOC_A).alias(C.NID), F.lit(None).cast("binary").alias(C.SHINGLES),
                     F.col(C.DOC_B).alias(_PARTNER))
    )
    routed = rows.repartition(parts, route(F.col(_GROUP), parts).alias(_ROUTE))
    schema = ", ".join(f"{f.name} long" for f in _SIZES)
    return routed.drop(_GROUP).mapInArrow(_sizes_of_partition, schema)


def _sizes_of_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A partition's set rows (partner null) and pair rows -> (doc_a, doc_b, i, na, nb) batches."""
    batches = [b for b in batches if b.num_rows]
    if not batches:
        return
    table = pa.Table.from_batches(batches)
    is_pair = table.column(_PARTNER).is_valid()
    pairs = table.filter(is_pair)
    if not pairs.num_rows:
        return
    sets = table.filter(pc.invert(is_pair))
    offsets, values = set_arrays(sets.column(C.SHINGLES))
    a, b = pairs.column(C.NID).to_numpy(), pairs.column(_PARTNER).to_numpy()
    columns = (a, b, *pair_sizes(sets.column(C.NID).to_numpy(), offsets, values, a, b))
    for lo in range(0, len(a), _BATCH_PAIRS):
        yield pa.RecordBatch.from_arrays([pa.array(x[lo:lo + _BATCH_PAIRS]) for x in columns], schema=_SIZES)


