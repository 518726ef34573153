"""The archive index: what a nightly batch needs of the archive, as files, versioned.

Layout (a local or mounted directory)::

    INDEX/
      manifest.json              the current version: its parts, the parameters, the batches applied
      manifests/v00001.json ...  every version's manifest, kept for audit
      parts/<part>/docs/         one row per document added by the part:
                                 doc_id, text_digest, exact_hash, shingles, text_len, is_empty, keeper columns;
                                 on a local or mounted filesystem, (sets_file, sets_offset, sets_length)
                                 in place of shingles, which are in:
      parts/<part>/sets/         the part's shingle sets as flat files, read by position (see `setfiles`)
      parts/<part>/bands/        (bucket, doc_id) of the part's banded documents, partitioned by
                                 bucket range (the top 4 bits; rows within a file are in no order):
                                 a lookup reads an 8-byte bucket and the id per band and document,
                                 never texts or shingle sets
      parts/<part>/assign/       doc_id, cluster_id, is_keeper, keeper_id, status: the assignment this
                                 part set (its own documents and archived ones whose cluster changed);
                                 with keeper linkage also component_id, the document's connected
                                 component of verified pairs (a batch re-clusters whole components)
      parts/<part>/output/       the batch's own results (clusters/, pairs/), re-emitted on a re-run;
                                 the pairs are also the stored edges a replacement re-clusters from
      parts/<part>/boilerplate/  (build only, when stripping is on) the stripped line keys
      parts/<part>/removed/      (replacing runs) ids whose earlier rows no longer count: their text changed;
                                 such a part's output/pairs/ holds the pairs their exact copies took over

A document's current assignment is its row in the newest listed part that
assigns it. Parts are written completely, under a fresh name, before any
manifest names them. The commit (`archive.versions`) is one create-if-absent
step: the next version's `manifests/vNNNNN.json` is written whole to a
temporary name and hard-linked into place, which fails if that version
exists. Of two runs that commit the same version, exactly one lands; the
other changes nothing and says to run again. Readers take the newest version
in `manifests/`; a run killed at any point leaves either the old newest
version (its part an orphan nobody reads) or the new one, complete: the next
run needs no repair. `manifest.json` is a copy of the newest version for
people and older releases to read (format 2 stops releases that committed by
rename).

Per document, at P=128, b=42 (threshold 0.3): ~1.3 kB of shingle set for a
~350-word article (4 bytes a distinct 5-shingle), 42 x 16 bytes of band rows,
16 + 16 bytes of digests, plus ids and assignments: ~2 kB before compression.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from neardup_spark import columns as C
from neardup_spark.archive import setfiles
from neardup_spark.archive.versions import MANIFEST, VERSIONS, newest
from neardup_spark.config import Config, to_dict
from neardup_spark.errors import IndexError_
from neardup_spark.plan import Plan, resolve
from neardup_spark.runtime.filestore import LocalStore, Store, store_for
from neardup_spark.runtime.parallel import run_all
from neardup_spark.stages.write import parquet_writes
from neardup_spark.version import __version__

# 3: a part's docs may keep the shingle sets in flat files (`setfiles`); 2: committed by
# create-if-absent in manifests/; 1 (same tables, committed by rename) still opens. A
# manifest says 3 only once a part may have set files (`manifest_format`): an index whose
# sets are all in Parquet (at a URI, or set_layout = "parquet") stays open to releases
# that read 2.
FORMAT = 3
READABLE_FORMATS = (1, 2, 3)
TEXT_DIGEST = C.TEXT_DIGEST
PART = "_part"  # the part's position in the manifest, for "newest assignment wins"
BUCKET_RANGE = "bucket_range"
ASSIGN_COLUMNS = (C.DOC_ID, C.CLUSTER_ID, C.IS_KEEPER, C.KEEPER_ID, C.STATUS)
# The configuration sections whose values decide pairs, clusters and keepers
# (of `cluster`, only the linkage: the backend and its limits give the same clusters).
PARAM_SECTIONS = ("normalise", "boilerplate", "shingle", "minhash", "match", "simhash", "lsh", "verify", "keeper",
                  "cluster")
_CLUSTER_PARAMS = ("linkage",)
# What a release before a parameter was recorded did, where today's default differs: an
# index with no cluster.linkage was clustered by connected components.
_UNRECORDED = {"cluster": {"linkage": "components"}}
# Below this many rows a frame is broadcast into its join with an archive table.
BROADCAST_ROWS = 5_000_000
# Band rows are stored by the bucket key's top RANGE_BITS bits (one directory per range).
RANGE_BITS = 4
RANGES = 1 << RANGE_BITS
# When Spark's join probes the band rows (an index on a Hadoop filesystem; `archive.scan` reads
# a local one's files), an archive of at least this many band rows (about 2.4M documents at
# 42 bands) is probed one group of ranges at a time, each group against a table of at most
# PROBE_TABLE_ROWS batch band rows: every archived row probes a smaller table instead of one
# of all the batch's keys (hundreds of MB: a memory miss a row). Below it, the extra
# broadcasts cost more than the probes save. Probing 40M rows here (a table's build included)
# cost 290-380 ns a row against 7.4M keys, 125-145 against 930k, 90-100 against 465k (its hash
# table, ~16 MB, fits this machine's 32 MB L3), 55-70 against 232k: a 200k night's 7.4M band
# rows go in 16 tables of ~465k, the most the 16 ranges allow.
RANGED_BAND_ROWS = 100_000_000
PROBE_TABLE_ROWS = 500_000


def bucket_range(bucket: F.Column) -> F.Column:
    """The range (top RANGE_BITS bits) of a bucket key: the directory its band rows are in."""
    return F.shiftrightunsigned(bucket, 64 - RANGE_BITS).cast("int")


def range_groups(archive_rows: int, batch_rows: int) -> list[tuple[int, ...]]:
    """The groups of ranges a batch's `batch_rows` band rows are probed in, one table each, into
    an archive of about `archive_rows` band rows: one group (every range) unless the archive
    is large enough for cache-sized tables to pay (see RANGED_BAND_ROWS)."""
    groups = 1
    if archive_rows >= RANGED_BAND_ROWS:
        while groups < RANGES and batch_rows > groups * PROBE_TABLE_ROWS:
            groups *= 2
    size = RANGES // groups
    return [tuple(range(g * size, (g + 1) * size)) for g in range(groups)]


def params_of(plan: Plan) -> dict:
    """The parameters an index is bound to (with the LSH bands and rows as resolved)."""
    data = to_dict(plan.cfg)
    out = {section: data[section] for section in PARAM_SECTIONS}
    out["cluster"] = {key: data["cluster"][key] for key in _CLUSTER_PARAMS}
    out["lsh"] = {**out["lsh"], "bands": plan.lsh.bands, "rows": plan.lsh.rows}
    return out


def check_params(manifest: dict, plan: Plan) -> None:
    """An error naming every parameter that differs from the index's.

    A parameter the manifest does not record (an index written before that
    parameter existed) counts as what the older version did: its default then
    (`_UNRECORDED`, where today's default differs).
    """
    have, defaults = params_of(plan), params_of(resolve(Config()))
    for section, values in _UNRECORDED.items():
        defaults[section] = {**defaults[section], **values}
    want = {s: {**defaults[s], **manifest["params"].get(s, {})} for s in PARAM_SECTIONS}
    diffs = [
        f"{section}.{key}: index {want[section].get(key)!r}, now {have[section].get(key)!r}"
        for section in PARAM_SECTIONS
        for key in sorted(set(want[section]) | set(have[section]))
        if want[section].get(key) != have[section].get(key)
    ]
    if diffs:
        raise IndexError_(
            "parameters differ from those the index was built with (a silent mix would give clusters no run "
            "could reproduce): " + "; ".join(diffs) + ". Set them to the index's values (in a --config file "
            "or by flag), or build a new index"
        )


@dataclass(frozen=True)
class Index:
    """An index directory (its Store) and its current manifest."""

    store: Store = field(compare=False, repr=False)
    manifest: dict

    @property
    def path(self) -> str:
        return self.store.uri

    @property
    def parts(self) -> list[str]:
        return list(self.manifest["parts"])

    def part_path(self, part: str) -> str:
        return f"{self.path}/parts/{part}"

    def _union(self, spark: SparkSession, table: str, where=None) -> DataFrame | None:
        """The table's rows from every part that has it, with the part's position in PART
        (only those `where(part's rows)` keeps, when given)."""
        read = [(i, read_table(spark, self.store, f"parts/{p}/{table}")) for i, p in enumerate(self.parts)]
        self._check_there([p for (_, df), p in zip(read, self.parts) if df is None])
        if table == "docs":
            read = [(i, self._located(p, df)) for (i, df), p in zip(read, self.parts)]
        if where is not None:
            read = [(i, df if df is None else where(df)) for i, df in read]
        frames = [df.withColumn(PART, F.lit(i)) for i, df in read if df is not None]
        if not frames:
            return None
        out = frames[0]
        for df in frames[1:]:
            out = out.unionByName(df, allowMissingColumns=True)
        return out

    def _check_there(self, parts: list[str]) -> None:
        """Each of `parts` (listed, and without a table asked for) has its folder, or IndexError_."""
        missing = [p for p in parts if not self.store.exists(f"parts/{p}")]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise IndexError_(
                f"the index at {self.path} is damaged: its version {self.manifest.get('version')} lists "
                f"parts/{missing[0]}/, which is not there{more}. Nothing was changed. A run of ours never removes a "
                "part the newest version lists: something else did (a cleanup, a partial copy); restore the folder "
                "from a backup")

    def _located(self, part: str, docs: DataFrame | None) -> DataFrame | None:
        """A part's docs rows with sets_file (if it has the column) made an absolute path."""
        if docs is None or not setfiles.has_locator(docs.columns) or not isinstance(self.store, LocalStore):
            return docs
        folder = os.path.abspath(os.path.join(self.store.root, "parts", part, setfiles.SETS))
        return docs.withColumn(setfiles.SETS_FILE, F.concat(F.lit(folder + os.sep), F.col(setfiles.SETS_FILE)))

    def live(self, spark: SparkSession, rows: DataFrame, id_col: str = C.DOC_ID) -> DataFrame:
        """rows(PART, id_col) without those of documents replaced in a later part."""
        removed = self._union(spark, "removed")
        if removed is None:
            return rows
        last = removed.groupBy(C.DOC_ID).agg(F.max(PART).alias("_removed_in"))
        last = F.broadcast(last.withColumnRenamed(C.DOC_ID, "_rid"))
        joined = rows.join(last, F.col(id_col) == F.col("_rid"), "left")
        return joined.where(F.col("_removed_in").isNull() | (F.col("_removed_in") <= F.col(PART))).drop(
            "_rid", "_removed_in"
        )

    def _required(self, spark: SparkSession, table: str) -> DataFrame:
        """`_union` of a table every index holds files of (an empty build writes one too)."""
        rows = self._union(spark, table)
        if rows is None:
            raise IndexError_(
                f"the index at {self.path!r} has no {table} files: it was written where the driver does not read "
                "(a path that is not shared storage on a cluster?) or damaged; rebuild it on shared storage"
            )
        return rows

    def docs(self, spark: SparkSession) -> DataFrame:
        """Every live document's row. Its shingle set is the `shingles` column, or in a set
        file (`setfiles.LOCATOR` columns, sets_file an absolute path): read it with `sets_of`."""
        return self.live(spark, self._required(spark, "docs")).drop(PART)

    def sets_of(self, rows: DataFrame, keep: list[str]) -> DataFrame:
        """rows (docs rows, joined or filtered as a caller likes) -> (keep..., shingles), the
        sets in files read by position: only those of the rows given."""
        if not setfiles.has_locator(rows.columns):
            return rows.select(*keep, C.SHINGLES)
        if not isinstance(self.store, LocalStore):
            raise self._sets_unreadable()
        return setfiles.filled(rows, keep)

    def check_sets_readable(self, spark: SparkSession) -> None:
        """Before any work of a run that reads shingle sets: an index whose sets are in files
        (`setfiles`), opened at a URI, is refused (only the parts' docs schemas are read)."""
        if isinstance(self.store, LocalStore):
            return
        docs = self._union(spark, "docs")
        if docs is not None and setfiles.has_locator(docs.columns):
            raise self._sets_unreadable()

    def _sets_unreadable(self) -> "IndexError_":
        return IndexError_(f"the index at {self.path!r} keeps its shingle sets in files read by position, "
                           "which needs a local or mounted path: open it at such a path (the same mount on "
                           "every node)")

    def bands(self, spark: SparkSession, ranges: tuple[int, ...] | None = None) -> DataFrame:
        """(bucket, doc_id) of every live archived band row; with `ranges`, only the rows of
        those bucket ranges (`bucket_range`): the files of the others are not read."""
        rows = self._union(spark, "bands", None if ranges is None else lambda df: _in_ranges(df, ranges))
        if rows is None:  # no part has band rows (every document empty or an exact copy)
            return self.docs(spark).select(F.lit(0).cast("long").alias(C.BUCKET), C.DOC_ID).limit(0)
        return self.live(spark, rows).select(C.BUCKET, C.DOC_ID)

    def pairs(self, spark: SparkSession) -> DataFrame | None:
        """Every stored verified pair (doc_a, doc_b, ...) whose two documents still have the text it was found on."""
        rows = self._union(spark, "output/pairs")
        if rows is None:
            return None
        return self.live(spark, self.live(spark, rows, C.DOC_A), C.DOC_B).drop(PART)

    def with_part(self, part: str) -> "Index":
        """This index as if `part` (written, not yet committed) were its newest part."""
        return Index(self.store, {**self.manifest, "parts": [*self.parts, part]})

    def assignments(self, spark: SparkSession) -> DataFrame:
        """The current assignment of every archived document (the newest part's row wins)."""
        rows = self._required(spark, "assign")
        if len(self.parts) == 1:
            return rows.select(*assign_columns(rows))
        newest = Window.partitionBy(C.DOC_ID).orderBy(F.desc(PART))
        return rows.withColumn("_n", F.row_number().over(newest)).where(F.col("_n") == 1).select(
            *assign_columns(rows))

    def assignments_of(self, spark: SparkSession, ids: DataFrame) -> DataFrame:
        """The current assignments of the documents in ids(doc_id)."""
        rows = self._required(spark, "assign").join(ids.select(C.DOC_ID).distinct(), C.DOC_ID, "left_semi")
        newest = Window.partitionBy(C.DOC_ID).orderBy(F.desc(PART))
        return rows.withColumn("_n", F.row_number().over(newest)).where(F.col("_n") == 1).select(
            *assign_columns(rows))

    def members_of(self, spark: SparkSession, groups: DataFrame, by: str = C.CLUSTER_ID) -> DataFrame:
        """The current assignments of every document now in one of groups(`by`): clusters,
        or (by component_id) components."""
        wanted = groups.select(by).distinct()
        rows = self._required(spark, "assign")
        found = rows.join(wanted, by, "left_semi")  # rows in a group, current or since replaced
        if len(self.parts) == 1:
            return found.select(*assign_columns(rows))
        # A row is current unless its document has one in a later part, and those are all
        # after the first part (the build: the bulk of the rows, read once).
        last = rows.where(F.col(PART) > 0).groupBy(C.DOC_ID).agg(F.max(PART).alias("_last"))
        current = found.join(last, C.DOC_ID, "left").where(F.col("_last").isNull() | (F.col("_last") <= F.col(PART)))
        return current.select(*assign_columns(rows))

    def boilerplate_keys(self, spark: SparkSession) -> frozenset[int] | None:
        rel = f"parts/{self.parts[0]}/boilerplate"
        if not self.store.exists(rel):
            return None
        keys = read_table(spark, self.store, rel)
        return frozenset() if keys is None else frozenset(int(r[0]) for r in keys.collect())

    def batch_part(self, fingerprint: str) -> str | None:
        return self.manifest.get("batches", {}).get(fingerprint)


def _in_ranges(bands: DataFrame, ranges: tuple[int, ...]) -> DataFrame:
    # A filter on the directory column prunes the other ranges' files.
    col = F.col(BUCKET_RANGE) if BUCKET_RANGE in bands.columns else bucket_range(F.col(C.BUCKET))
    return bands.where(col.isin(list(ranges)))


def assign_columns(rows: DataFrame) -> list[str]:
    """The assign table's columns that rows holds: component_id only in a keeper-linkage index."""
    return [*ASSIGN_COLUMNS, *([C.COMPONENT_ID] if C.COMPONENT_ID in rows.columns else [])]


def read_table(spark: SparkSession, store: Store, rel: str) -> DataFrame | None:
    """The Parquet table Spark wrote at store/rel, or None when it has no data files (an
    empty partitioned write leaves only _SUCCESS: it holds no rows).

    The schema comes from the Spark schema that every file Spark writes carries in its
    footer, read here on the driver: `spark.read.parquet` would run a Spark job per table
    and part to infer it, the largest share of a nightly batch's small jobs."""
    row = store.spark_schema(rel)
    if row is None:
        return None
    path = f"{store.uri}/{rel}"
    if not row:  # not written by Spark: let Spark infer the schema
        return spark.read.parquet(path)
    from pyspark.sql.types import StructType

    return spark.read.schema(StructType.fromJson(json.loads(row))).parquet(path)


def open_index(path: str, spark: SparkSession | None = None) -> Index:
    """The index at `path` (any filesystem the session reaches; local without one) as its
    newest committed version describes it."""
    return open_index_store(store_for(spark, path), path)


def open_index_store(store: Store, path: str | None = None) -> Index:
    """`open_index` of a Store."""
    path = path or store.uri
    manifest = newest(store)
    if manifest is None:
        raise IndexError_(f"no index at {path!r} (no {VERSIONS}/ or {MANIFEST}); build one with `neardup index build`")
    if manifest.get("format") not in READABLE_FORMATS:
        raise IndexError_(f"index {path!r} has format {manifest.get('format')!r}; this version reads "
                          f"{', '.join(map(str, READABLE_FORMATS))}")
    return Index(store, manifest)


def new_part_name(version: int) -> str:
    """A fresh part directory name: never one a killed run may have left behind."""
    return f"part-{version:05d}-{uuid.uuid4().hex[:8]}"


def set_columns(docs: DataFrame) -> list[str]:
    """The columns of docs rows that hold or locate a shingle set (what `Index.sets_of` reads)."""
    return [c for c in (C.SHINGLES, *setfiles.LOCATOR) if c in docs.columns]


def sets_folder(store: Store, part: str, layout: str = "auto") -> str | None:
    """Where a new part's shingle sets go as files (`setfiles`; an absolute path), or None to
    keep them a Parquet column: `layout` "auto" puts them in files on a local or mounted
    filesystem, "files" there too (and refuses a Hadoop one), "parquet" never."""
    local = isinstance(store, LocalStore)
    if layout == "files" and not local:
        raise IndexError_(f"index.set_layout = 'files' needs a local or mounted index path, not {store.uri!r}")
    if layout == "parquet" or not local:
        return None
    return os.path.abspath(os.path.join(store.root, "parts", part, setfiles.SETS))


def write_part(part_dir: str, docs: DataFrame | None, bands: DataFrame | None, assign: DataFrame,
               outputs: dict[str, DataFrame] | None = None, boilerplate: DataFrame | None = None,
               removed: DataFrame | None = None, parallel: bool = False, sets: str | None = None) -> None:
    """One complete part directory (written before any manifest names it). A removal part
    (replaced documents) has `removed` and `assign` only. With `parallel` (a nightly
    batch's small tables), the tables are written by concurrent jobs. With `sets` (see
    `sets_folder`), the docs' shingle sets are written there as files."""
    tables: dict[str, DataFrame] = {}
    if docs is not None:
        tables["docs"] = setfiles.split(docs, sets) if sets and C.SHINGLES in docs.columns else docs
    if removed is not None:
        tables["removed"] = removed.select(C.DOC_ID)
    tables["assign"] = assign.select(*assign_columns(assign))
    tables.update({f"output/{name}": frame for name, frame in (outputs or {}).items()})
    if boilerplate is not None:
        tables["boilerplate"] = boilerplate.coalesce(1)
    writes = parquet_writes(tables, part_dir, "error")
    if bands is not None:
        ranged = bands.withColumn(BUCKET_RANGE, bucket_range(F.col(C.BUCKET)))
        # No sort by bucket: the writer sorts each task's rows by range, which undid it.
        ranged = ranged.repartition(BUCKET_RANGE)
        writes.append(lambda: ranged.write.mode("error").partitionBy(BUCKET_RANGE).parquet(f"{part_dir}/bands"))
    run_all(writes, parallel, assign.sparkSession)


def manifest_format(set_files: bool, previous: dict | None = None) -> int:
    """The format of a manifest whose new part keeps its sets in files (`set_files`) or not,
    listing the parts of `previous` too (one of which may have set files if it says 3)."""
    return FORMAT if set_files or (previous or {}).get("format") == FORMAT else 2


def next_manifest(previous: dict | None, plan: Plan, part: str, fingerprint: str, documents: int,
                  set_files: bool) -> dict:
    """The manifest after adding `part` (a build when previous is None), whose sets are in
    files if `set_files`; `previous` may already list uncommitted parts of this run (see
    `Index.with_part`)."""
    version = (previous or {}).get("version", 0) + 1
    return {
        "format": manifest_format(set_files, previous),
        "version": version,
        "neardup_spark_version": __version__,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "params": previous["params"] if previous else params_of(plan),
        "parts": [*(previous or {}).get("parts", []), part],
        "batches": {**(previous or {}).get("batches", {}), fingerprint: part},
        "documents": (previous or {}).get("documents", 0) + documents,
    }


def batch_fingerprint(docs: DataFrame) -> str:
    """Order-free fingerprint of a batch's (id, text): same documents, same string."""
    h = F.xxhash64(F.col(C.DOC_ID).cast("string"), F.col(TEXT_DIGEST))
    row = docs.agg(F.count(F.lit(1)).alias("n"), F.sum(h.cast("decimal(38,0)")).alias("s"),
                   F.sum(F.xxhash64(h).cast("decimal(38,0)")).alias("t")).first()
    return f"{row['n']}:{row['s']}:{row['t']}"


def ensure_new(path: str, spark: SparkSession | None = None) -> Store:
    """The Store of an index about to be built; refuse to build over one."""
    store = store_for(spark, path)
    if newest(store) is not None:
        raise IndexError_(f"an index already exists at {path!r}; append batches with `neardup run --index ... "
                          "--append`, or remove it to rebuild")
    store.mkdirs("parts")
    return store
