"""Stage 1, read: input files or a table -> documents (doc_id, text, metadata...).

`read_input` opens what `[input]` names; `documents` renames the user's id and
text columns to the pipeline's own and checks the schema; `check_documents`
is the one cheap action that runs before any heavy work, so null or
duplicate ids and malformed JSON lines stop the run with a one-line error;
it also picks the salt of the internal ids (`internal_id`).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark import columns as C
from neardup_spark.config import Config
from neardup_spark.errors import InputError, NeardupError, one_line
from neardup_spark.stages.keepers import keeper_columns

CORRUPT = C.CORRUPT
_INT_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def read_input(spark: SparkSession, cfg: Config) -> DataFrame:
    """The raw input DataFrame named by cfg.input (nothing is computed yet)."""
    src = cfg.input
    if not src.path:
        raise InputError("no input given: set input.path (--input)")
    try:
        if src.format == "table":
            return spark.table(src.path)
        reader = spark.read
        if src.format in ("jsonl", "json"):
            # PERMISSIVE keeps malformed lines as rows with a corrupt-record
            # column, which check_documents turns into an error, not a loss.
            raw = reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT).json(src.path)
            return _reparse_corrupt_lines(raw)
        if src.format == "delta":
            return reader.format("delta").load(src.path)
        return reader.parquet(src.path)
    except Exception as exc:  # Spark raises several types for a bad path or format
        if "UNABLE_TO_INFER_SCHEMA" in str(exc):
            raise InputError(f"cannot read {src.format} input {src.path!r}: it holds no {src.format} data files "
                             "(an empty directory, or only files whose names start with _ or .)") from None
        raise InputError(f"cannot read {src.format} input {src.path!r}: {one_line(exc)}") from None


def _reparse_corrupt_lines(raw: DataFrame) -> DataFrame:
    """Give lines Spark's JSON reader rejected a second chance.

    The reader rejects a whole line for bytes that are not UTF-8, but its
    corrupt-record copy of the line is already decoded (bad bytes become
    U+FFFD), so parsing that copy recovers the document. Lines that are still
    not JSON keep their corrupt-record value and fail `check_documents`.
    """
    if CORRUPT not in raw.columns:
        return raw
    fields = [f for f in raw.schema.fields if f.name != CORRUPT]
    schema = T.StructType([*fields, T.StructField(CORRUPT, T.StringType())])
    again = F.from_json(F.col(CORRUPT), schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT})
    bad = F.col(CORRUPT).isNotNull()
    cols = [F.when(bad, again[f.name]).otherwise(F.col(f.name)).alias(f.name) for f in fields]
    return raw.select(*cols, F.when(bad, again[CORRUPT]).alias(CORRUPT))


def documents(raw: DataFrame, cfg: Config) -> DataFrame:
    """Select doc_id, text and metadata columns; check names and types.

    Integer ids become long; string ids stay strings; other id types and
    non-string text are errors. Metadata columns keep their names and values.
    """
    src = cfg.input
    fields = {f.name: f.dataType for f in raw.schema.fields}
    needed = [src.id_col, src.text_col, *src.metadata_cols]
    needed += [c for c in keeper_columns(cfg.keeper) if c not in needed]
    missing = [c for c in needed if c not in fields]
    if missing and not set(fields) - {CORRUPT}:
        raise InputError(_no_columns(CORRUPT in fields, src.path))
    if missing:
        have = ", ".join(c for c in fields if c != CORRUPT)
        raise InputError(f"input has no column(s) {', '.join(missing)}; it has: {have}")
    clash = [c for c in needed[2:] if c in C.INTERNAL]
    if clash:
        raise InputError(f"metadata column name(s) {', '.join(clash)} clash with pipeline columns; rename them")
    id_type = fields[src.id_col]
    if isinstance(id_type, _INT_TYPES):
        doc_id = F.col(src.id_col).cast("long")
    elif isinstance(id_type, T.StringType):
        doc_id = F.col(src.id_col)
    else:
        raise InputError(f"id column {src.id_col!r} must be an integer or string; it is {id_type.simpleString()}")
    text_type = fields[src.text_col]
    if not isinstance(text_type, T.StringType):
        raise InputError(
            f"text column {src.text_col!r} must be a string; it is {text_type.simpleString()} "
            "(cast or decode it first)"
        )
    meta = [F.col(c) for c in needed[2:]]
    cols = [doc_id.alias(C.DOC_ID), F.col(src.text_col).alias(C.TEXT), *meta]
    if CORRUPT in fields:
        cols.append(F.col(CORRUPT))
    return raw.select(*cols)


def _no_columns(corrupt_only: bool, path: str) -> str:
    """The error for an input without a single column: an empty input, or JSON with no
    line that is an object (JSON Lines expected)."""
    if not corrupt_only:
        return f"input {path!r} has no columns: it is empty (no rows to read a schema from)"
    return (f"no line of input {path!r} is a JSON object: jsonl/json input is JSON Lines, one object "
            "a line (a JSON array or pretty-printed JSON is not read)")


# Internal ids are 63-bit hashes of the document ids (non-negative: the nightly batch graph
# gives archived documents negative ids). A salt is tried after another while two ids of
# the input hash alike (at 10M ids, n^2/2^64: about one input in 200,000 needs a second).
_SALTS = 16
_HASH = "_id_hash"


def internal_id(doc_id: Column, salt: int) -> Column:
    """A document's internal id (`_nid`): a function of its id alone, so every order
    derived from it (the smallest member of a big LSH bucket, its star's centre) is the
    same on every run and every partitioning. The salt comes first: it seeds the id's hash."""
    return F.xxhash64(F.lit(salt), doc_id).bitwiseAND(F.lit(0x7FFFFFFFFFFFFFFF))


def check_documents(docs: DataFrame) -> tuple[int, int]:
    """Fail fast on malformed rows, null ids or duplicate ids; return (the row count, the
    salt under which `internal_id` differs for every id).

    One job in the normal case: the rows are grouped once by internal id and every
    figure comes from the groups (a second, independently seeded hash of the id tells
    repeats of one id from two ids that clash); examples are fetched only to explain
    a failure.
    """
    has_corrupt = CORRUPT in docs.columns
    for salt in range(_SALTS):
        row = _id_totals(docs, salt, has_corrupt)
        _refuse_bad_rows(docs, row, has_corrupt)
        if not row["clashes"]:
            return int(row["n"] or 0), salt
    raise NeardupError(f"internal ids still clash after {_SALTS} salts")  # pragma: no cover - ~never


def _id_totals(docs: DataFrame, salt: int, has_corrupt: bool):
    """Rows, null ids, duplicate ids, ids whose internal id another id has[, malformed rows]."""
    keyed = F.col(C.DOC_ID).isNotNull()
    check = F.xxhash64(F.lit(salt), F.lit(-1), F.col(C.DOC_ID))
    aggs = [F.count(F.lit(1)).alias("n"), F.min(check).alias("lo"), F.max(check).alias("hi")]
    if has_corrupt:
        aggs.append(F.sum(F.col(CORRUPT).isNotNull().cast("long")).alias("bad"))
    groups = docs.groupBy(F.when(keyed, internal_id(F.col(C.DOC_ID), salt)).alias(_HASH)).agg(*aggs)
    key, n, one_id = F.col(_HASH).isNotNull(), F.col("n"), F.col("lo") == F.col("hi")
    totals = [
        F.sum(n).alias("n"),
        F.sum(F.when(~key, n).otherwise(0)).alias("null_ids"),
        F.sum(F.when(key & (n > 1) & one_id, 1).otherwise(0)).alias("dup_ids"),
        F.sum(F.when(key & ~one_id, 1).otherwise(0)).alias("clashes"),
    ]
    if has_corrupt:
        totals.append(F.sum("bad").alias("corrupt"))
    return groups.agg(*totals).first()


def _refuse_bad_rows(docs: DataFrame, row, has_corrupt: bool) -> None:
    if has_corrupt and row["corrupt"]:
        # The id is selected too: Spark refuses a query of raw JSON that reads only the
        # corrupt-record column (UNSUPPORTED_FEATURE.QUERY_ONLY_CORRUPT_RECORD_COLUMN).
        example = (docs.where(F.col(CORRUPT).isNotNull())
                   .select(F.substring(CORRUPT, 1, 80).alias("line"), C.DOC_ID, F.input_file_name().alias("file"))
                   .first())
        where = f" in {example['file']}" if example["file"] else ""
        raise InputError(f"{row['corrupt']} malformed JSON line(s) in the input, e.g. {example['line']!r}{where}")
    if row["null_ids"]:
        raise InputError(f"{row['null_ids']} document(s) have a null id; every document needs an id")
    if row["dup_ids"]:
        dups = docs.groupBy(C.DOC_ID).count().where(F.col("count") > 1).limit(3).collect()
        shown = ", ".join(f"{r[C.DOC_ID]!r} (x{r['count']})" for r in dups)
        mixed = ""
        if isinstance(docs.schema[C.DOC_ID].dataType, T.StringType):
            mixed = ("; JSON ids that are numbers on some lines and strings on others are all read as strings, "
                     'so 683 and "683" are one id')
        raise InputError(f"duplicate document ids, e.g. {shown}; ids must be unique{mixed}")


def spread(docs: DataFrame, cfg: Config) -> DataFrame:
    """docs, repartitioned round robin when they come in fewer partitions than
    cfg.input.min_partitions (0: Spark's default parallelism), so the
    sketch stage keeps every core busy. On Spark Connect, which exposes no
    partition counts, only an explicit min_partitions repartitions."""
    want = cfg.input.min_partitions
    try:
        have = docs.rdd.getNumPartitions()
        want = want or docs.sparkSession.sparkContext.defaultParallelism
    except Exception:  # Spark Connect: no RDD API
        return docs.repartition(want) if want else docs
    return docs.repartition(want) if have < want else docs


def drop_bookkeeping(docs: DataFrame) -> DataFrame:
    """Documents without the corrupt-record column once they are checked."""
    return docs.drop(CORRUPT) if CORRUPT in docs.columns else docs
