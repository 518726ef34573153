"""Stages 2-6 in one pass: text -> exact digest, shingle set and LSH band keys.

One Arrow pass (`mapInArrow`) reads each batch of raw text once and runs, in numpy,
what used to be four Spark stages: normalise (see `kernels.normalise`), hash the
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


import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StructField,
    StructType,
)

from neardup_spark import columns as C
from neardup_spark.config import Config
from neardup_spark.kernels import hashing
from neardup_spark.kernels.sketch import Stripping, text_slices, sketch_arrays
from neardup_spark.plan import Matcher


def sketch(docs: DataFrame, cfg: Config, matcher: Matcher, strip: Stripping | None = None) -> DataFrame:
    """docs(text, ...) -> docs without text + exact_hash, shingles, bands, is_empty, text_len and
    (with `strip`) the number of boilerplate segments removed, (SimHash) the fingerprint
    words, (containment) the query keys.

    One Arrow pass (`mapInArrow`): the other columns pass through untouched and
    the results are built as Arrow arrays over numpy buffers, with no pandas
    conversion and no Python object per shingle set or key list."""
    opts, unit, k, seed = cfg.normalise, cfg.shingle.unit, cfg.shingle.k, cfg.minhash.seed
    a, b = hashing.permutations(cfg.minhash.num_perm, seed)
    lsh, sim = matcher.lsh, matcher.simhash
    classes = list(matcher.classes) if matcher.classes else None
    kept = [f for f in docs.schema.fields if f.name != C.TEXT]
    added = [(C.EXACT_HASH, BinaryType()), (C.SHINGLES, BinaryType()), (C.BANDS, ArrayType(LongType())),
             (C.IS_EMPTY, BooleanType()), (C.TEXT_LEN, IntegerType())]
    if strip is not None:
        added.append((C.STRIPPED, IntegerType()))
    if sim is not None:
        added += [(col, LongType()) for col in sim.columns]
    if classes:
        added.append((C.QUERIES, ArrayType(LongType())))
    schema = StructType(kept + [StructField(name, kind, True) for name, kind in added])
    names = [f.name for f in schema.fields]
    passed = [f.name for f in kept]

    def run(batches):
        for batch in batches:
            text = batch.column(C.TEXT)
            for lo, hi in text_slices(text):
                part = batch.slice(lo, hi - lo)
                cols = sketch_arrays(part.column(C.TEXT), opts, unit, k, seed, a, b, lsh, strip, sim, classes)
                cols[C.IS_EMPTY] = pc.is_null(cols[C.EXACT_HASH])
                arrays = [part.column(name) for name in passed] + [cols[name] for name in names[len(passed):]]
                yield pa.RecordBatch.from_arrays(arrays, schema=_arrow_schema(part.schema, passed, names, cols))

    # The text goes to Python as a string: a cast to binary here cost two copies of every
    # text in the JVM (the cast, then getBinary per row); `kernels.sketch._texts` validates it instead.
    return docs.mapInArrow(run, schema)


def _arrow_schema(source: pa.Schema, passed: list[str], names: list[str], cols: dict) -> pa.Schema:
    fields = [source.field(name) for name in passed]
    fields += [pa.field(name, cols[name].type) for name in names[len(passed):]]
    return pa.schema(fields)
