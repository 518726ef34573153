"""Boilerplate stripping, before shingling: lines that many documents share are removed.

Navigation menus, share buttons, licence text and site footers repeat across
thousands of a site's pages. Left in, they raise the Jaccard of unrelated
pages of one site (30% shared boilerplate puts such pairs near 0.18, 45%
near 0.29) until a 0.3 threshold returns more junk than duplicates.

A text is cut into *segments*: its lines, or with unit "sentence" also
after each . ! or ?. Segments are compared in their normalised form (the
pipeline's own normalisation: NFKC, lower case, punctuation to spaces), by
a 64-bit BLAKE2b key. Blank segments (nothing left after normalising) are
never boilerplate.

1. `find`: one Pandas UDF pass gives each document's distinct segment keys;
   the JVM counts documents per key. Keys in at least
   max(min_docs, ceil(min_share * documents)) documents are boilerplate.
   They come to the driver (more than `max_lines` is an error: the rule is
   too loose) with their counts and one example line each, read from a
   sample of documents large enough to meet every such line ~30 times.
2. The sketch stage strips them (`strip_normalised`, inside the same UDF
   that shingles, so it costs no extra pass): the normalised text becomes
   the normalised forms of the kept segments. A document made *only* of
   boilerplate keeps all of its text: it still meets its copies and is
   never emptied.

The trade-off to know: a story copied verbatim into more documents than the
rule's count has its shared lines counted as boilerplate too. Whole copies
stay whole (rule above), but an edited copy keeps only its edited lines and
can drop out of its story's cluster. Keep `min_docs` above the most copies a
story can have in your archive (`neardup calibrate` lists the most frequent
lines with their counts) and read `boilerplate/` in the output, which lists
every stripped line with its document count.
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf

from neardup_spark import columns as C
from neardup_spark.config import BoilerplateConfig, NormaliseConfig
from neardup_spark.errors import NeardupError
from neardup_spark.kernels.boilerplate import (
    Boilerplate,
    _decode,
    distinct_keys,
    min_documents,
    segment_batch,
    split_segments,
    strip_normalised,
)

_EXAMPLE_HITS = 30  # each boilerplate line is expected this often in the example sample
_EXAMPLE_CHARS = 200
KEY = "line_key"
DOCS = "documents"
EXAMPLE = "example"


def line_counts(docs: DataFrame, opts: NormaliseConfig, unit: str) -> DataFrame:
    """(line_key, documents): in how many documents of docs(text) each segment occurs."""

    @pandas_udf("array<bigint>")
    def _keys(texts: pd.Series) -> pd.Series:
        return distinct_keys(texts, opts, unit)

    keys = docs.select(F.explode(_keys(utf8_bytes(F.col(C.TEXT)))).alias(KEY))
    return keys.groupBy(KEY).agg(F.count(F.lit(1)).alias(DOCS))


def find(docs: DataFrame, cfg: BoilerplateConfig, opts: NormaliseConfig, n_docs: int, seed: int = 1) -> Boilerplate:
    """The boilerplate segments of docs(text, ...), which hold n_docs documents."""
    need = min_documents(cfg, n_docs)
    frequent = line_counts(docs, opts, cfg.unit).where(F.col(DOCS) >= need)
    rows = frequent.orderBy(F.desc(DOCS), KEY).limit(cfg.max_lines + 1).collect()
    if len(rows) > cfg.max_lines:
        raise NeardupError(
            f"more than boilerplate.max_lines = {cfg.max_lines} distinct lines occur in >= {need} documents; "
            "raise boilerplate.min_docs or min_share (or max_lines, if that many really are boilerplate)"
        )
    counts = pd.DataFrame({KEY: [int(r[KEY]) for r in rows], DOCS: [int(r[DOCS]) for r in rows]})
    keys = frozenset(counts[KEY].tolist())
    if keys:
        # A sample that meets each boilerplate line ~30 times finds an example of each.
        fraction = min(1.0, _EXAMPLE_HITS / need)
        sample = docs if fraction >= 1.0 else docs.sample(fraction=fraction, seed=seed)
        counts[EXAMPLE] = counts[KEY].map(examples(sample, opts, cfg.unit, keys))
    else:
        counts[EXAMPLE] = pd.Series([], dtype=object)
    return Boilerplate(keys, need, counts)


def examples(docs: DataFrame, opts: NormaliseConfig, unit: str, keys: frozenset[int]) -> dict[int, str]:
    """{key: one of its segments as written (trimmed)} for the keys met in docs(text)."""
    if not keys:
        return {}

    @pandas_udf(f"array<struct<{KEY}:bigint,{EXAMPLE}:string>>")
    def _matches(texts: pd.Series) -> pd.Series:
        seg = segment_batch(texts, opts, unit)
        raw = [split_segments(t, unit) if t is not None else [] for t in map(_decode, texts)]
        out = []
        for i in range(len(texts)):
            if len(raw[i]) != seg.offsets[i + 1] - seg.offsets[i]:  # pragma: no cover - a safeguard
                out.append([])
                continue
            pairs = zip(seg.keys[seg.of(i)], raw[i])
            out.append([{KEY: k, EXAMPLE: s.strip()[:_EXAMPLE_CHARS]} for k, s in pairs if k in keys])
        return pd.Series(out, index=texts.index)

    found = docs.select(F.explode(_matches(utf8_bytes(F.col(C.TEXT)))).alias("m")).select("m.*")
    return {int(r[KEY]): r[EXAMPLE] for r in found.groupBy(KEY).agg(F.min(EXAMPLE).alias(EXAMPLE)).collect()}


def lines_frame(spark, found: Boilerplate) -> DataFrame:
    """The boilerplate table written to `boilerplate/`: line_key, documents, example."""
    schema = f"{KEY} long, {DOCS} long, {EXAMPLE} string"
    rows = [(int(k), int(d), e if isinstance(e, str) else None) for k, d, e in found.lines.itertuples(index=False)]
    return spark.createDataFrame(rows, schema)


def top_lines(docs: DataFrame, opts: NormaliseConfig, unit: str, n: int = 20) -> list[tuple[int, int]]:
    """The n most frequent segments as (key, documents): what calibrate shows."""
    rows = line_counts(docs, opts, unit).orderBy(F.desc(DOCS), KEY).limit(n).collect()
    return [(int(r[KEY]), int(r[DOCS])) for r in rows]


def utf8_bytes(text: Column) -> Column:
    """The text column as its raw bytes, for a Pandas UDF to decode (boilerplate's).

    Spark strings may hold bytes that are not UTF-8 (from Parquet, casts,
    binary data); converting them to pandas strings would fail and the task
    would die. Shipped as binary, they are decoded by the UDF (invalid bytes
    become U+FFFD). The sketch's `mapInArrow` skips this cast, which costs two
    JVM copies of every text: it receives Arrow strings and validates them
    itself (`kernels.sketch._texts`).
    """
    return text.cast("binary")


__all__: Sequence[str] = [
    "Boilerplate", "examples", "find", "line_counts", "lines_frame", "min_documents", "segment_batch",
    "split_segments", "strip_normalised", "top_lines",
]
