"""The archive index: what a nightly batch needs of the archive, as files, versioned.

Layout (a local or mounted directory)::

    INDEX/
      manifest.json              the current version: its parts, the parameters, the batches applied
      manifests/v00001.json ...  every version's manifest, kept for audit
      parts/<part>/docs/         one row per document added by the part:
                                 doc_id, text_digest, exact_hash, shingles, text_len, is_empty, keeper columns
      parts/<part>/bands/        (bucket, doc_id) of the part's banded documents, partitioned by
                                 bucket range (the top 4 bits; rows within a file are in no order):
                                 a lookup reads an 8-byte bucket and the id per band and document,
                                 never texts or shingle sets
      parts/<part>/assign/       doc_id, cluster_id, is_keeper, keeper_id, status: the assignment this
                                 part set (its own documents and archived ones whose cluster changed)
      parts/<part>/output/       the batch's own results (clusters/, pairs/), re-emitted on a re-run;
                                 the pairs are also the stored edges a replacement re-clusters from
      parts/<part>/boilerplate/  (build only, when stripping is on) the stripped line keys
      parts/<part>/removed/      (replacing runs) ids whose earlier rows no longer count: their text changed

A document's current assignment is its row in the newest listed part that
assigns it. Parts are written completely, under a fresh name, before any
manifest names them. The commit is one create-if-absent step: the next
version's `manifests/vNNNNN.json` is written whole to a temporary name and
hard-linked into place, which fails if that version exists. Of two runs
that commit the same version, exactly one lands; the other changes nothing
and says to run again. Readers take the newest version in `manifests/`; a
run killed at any point leaves either the old newest version (its part an
orphan nobody reads) or the new one, complete: the next run needs no
repair. `manifest.json` is a copy of the newest version for people and
older releases to read (format 2 stops releases that committed by rename).

Per document, at P=128, b=42 (threshold 0.3): ~1.3 kB of shingle set for a
~350-word article (4 bytes a distinct 5-shingle), 42 x 16 bytes of band rows,
16 + 16 bytes of digests, plus ids and assignments: ~2 kB before compression.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from . import __version__
from . import columns as C
from .config import Config, to_dict
from .errors import NeardupError
from .parallel import run_all
from .params import lsh_params
from .paths import is_local_path, local_path
from .write import parquet_writes

FORMAT = 2  # 2: committed by create-if-absent in manifests/; 1 (same tables) still opens
READABLE_FORMATS = (1, 2)
MANIFEST = "manifest.json"
VERSIONS = "manifests"
_VERSION_FILE = re.compile(r"^v(\d{5,})\.json$")
TEXT_DIGEST = "text_digest"
PART = "_part"  # the part's position in the manifest, for "newest assignment wins"
BUCKET_RANGE = "bucket_range"
SPARK_ROW_METADATA = b"org.apache.spark.sql.parquet.row.metadata"
ASSIGN_COLUMNS = (C.DOC_ID, C.CLUSTER_ID, C.IS_KEEPER, C.KEEPER_ID, C.STATUS)
# The configuration sections whose values decide pairs, clusters and keepers.
PARAM_SECTIONS = ("normalise", "boilerplate", "shingle", "minhash", "match", "simhash", "lsh", "verify", "keeper")


class IndexError_(NeardupError):
    """The index is missing, damaged, or was built with other parameters."""


def text_digest(text) -> F.Column:
    """16-byte MD5 of the raw text's UTF-8 bytes: tells a re-sent document from a changed one."""
    return F.unhex(F.md5(text.cast("binary")))


def params_of(cfg: Config) -> dict:
    """The parameters an index is bound to (with the LSH bands and rows as resolved)."""
    data = to_dict(cfg)
    out = {section: data[section] for section in PARAM_SECTIONS}
    lsh = lsh_params(cfg)
    out["lsh"] = {**out["lsh"], "bands": lsh.bands, "rows": lsh.rows}
    return out


def check_params(manifest: dict, cfg: Config) -> None:
    """An error naming every parameter that differs from the index's.

    A parameter the manifest does not record (an index written before that
    parameter existed) counts as its default: the older version behaved so.
    """
    have, defaults = params_of(cfg), params_of(Config())
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
            "could reproduce): " + "; ".join(diffs)
        )


@dataclass(frozen=True)
class Index:
    """An index directory and its current manifest."""

    path: str
    manifest: dict

    @property
    def parts(self) -> list[str]:
        return list(self.manifest["parts"])

    def part_path(self, part: str) -> str:
        return f"{self.path}/parts/{part}"

    def _union(self, spark: SparkSession, table: str) -> DataFrame | None:
        """The table's rows from every part that has it, with the part's position in PART."""
        read = [(i, read_table(spark, f"{self.part_path(p)}/{table}")) for i, p in enumerate(self.parts)]
        frames = [df.withColumn(PART, F.lit(i)) for i, df in read if df is not None]
        if not frames:
            return None
        out = frames[0]
        for df in frames[1:]:
            out = out.unionByName(df, allowMissingColumns=True)
        return out

    def _live(self, spark: SparkSession, rows: DataFrame, id_col: str = C.DOC_ID) -> DataFrame:
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
        return self._live(spark, self._required(spark, "docs")).drop(PART)

    def bands(self, spark: SparkSession) -> DataFrame:
        rows = self._union(spark, "bands")
        if rows is None:  # no part has band rows (every document empty or an exact copy)
            return self.docs(spark).select(F.lit(0).cast("long").alias(C.BUCKET), C.DOC_ID).limit(0)
        return self._live(spark, rows).select(C.BUCKET, C.DOC_ID)

    def pairs(self, spark: SparkSession) -> DataFrame | None:
        """Every stored verified pair (doc_a, doc_b, ...) whose two documents still have the text it was found on."""
        rows = self._union(spark, "output/pairs")
        if rows is None:
            return None
        return self._live(spark, self._live(spark, rows, C.DOC_A), C.DOC_B).drop(PART)

    def with_part(self, part: str) -> "Index":
        """This index as if `part` (written, not yet committed) were its newest part."""
        return Index(self.path, {**self.manifest, "parts": [*self.parts, part]})

    def assignments(self, spark: SparkSession) -> DataFrame:
        """The current assignment of every archived document (the newest part's row wins)."""
        rows = self._required(spark, "assign")
        if len(self.parts) == 1:
            return rows.select(*ASSIGN_COLUMNS)
        newest = Window.partitionBy(C.DOC_ID).orderBy(F.desc(PART))
        return rows.withColumn("_n", F.row_number().over(newest)).where(F.col("_n") == 1).select(*ASSIGN_COLUMNS)

    def assignments_of(self, spark: SparkSession, ids: DataFrame) -> DataFrame:
        """The current assignments of the documents in ids(doc_id)."""
        rows = self._required(spark, "assign").join(ids.select(C.DOC_ID).distinct(), C.DOC_ID, "left_semi")
        newest = Window.partitionBy(C.DOC_ID).orderBy(F.desc(PART))
        return rows.withColumn("_n", F.row_number().over(newest)).where(F.col("_n") == 1).select(*ASSIGN_COLUMNS)

    def members_of(self, spark: SparkSession, clusters: DataFrame) -> DataFrame:
        """The current assignments of every document now in one of clusters(cluster_id)."""
        wanted = clusters.select(C.CLUSTER_ID).distinct()
        once = self._required(spark, "assign").join(wanted, C.CLUSTER_ID, "left_semi").select(C.DOC_ID).distinct()
        return self.assignments_of(spark, once).join(wanted, C.CLUSTER_ID, "left_semi")

    def boilerplate_keys(self, spark: SparkSession) -> frozenset[int] | None:
        path = f"{self.part_path(self.parts[0])}/boilerplate"
        if not os.path.isdir(local_path(path)):
            return None
        keys = read_table(spark, path)
        return frozenset() if keys is None else frozenset(int(r[0]) for r in keys.collect())

    def batch_part(self, fingerprint: str) -> str | None:
        return self.manifest.get("batches", {}).get(fingerprint)


def read_table(spark: SparkSession, path: str) -> DataFrame | None:
    """The Parquet table Spark wrote at `path` (a local directory), or None when it has no
    data files (an empty partitioned write leaves only _SUCCESS: it holds no rows).

    The schema comes from the Spark schema that every file Spark writes carries in its
    footer, read here on the driver: `spark.read.parquet` would run a Spark job per table
    and part to infer it, the largest share of a nightly batch's small jobs."""
    first = _first_data_file(path)
    if first is None:
        return None
    import pyarrow.parquet as pq
    from pyspark.sql.types import StructType

    meta = pq.read_schema(first).metadata or {}
    row = meta.get(SPARK_ROW_METADATA)
    if row is None:  # not written by Spark: let Spark infer the schema
        return spark.read.parquet(path)
    return spark.read.schema(StructType.fromJson(json.loads(row))).parquet(path)


def _first_data_file(path: str) -> str | None:
    """A Parquet data file under path, partition directories included (names starting
    with _ or . are Spark's and Hadoop's bookkeeping)."""
    root = local_path(path)
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        for name in sorted(files):
            if not name.startswith(("_", ".")) and name.endswith(".parquet"):
                return os.path.join(top, name)
    return None


def _require_local(path: str) -> str:
    if not is_local_path(path):
        raise IndexError_(
            f"the index must be a local or mounted directory (its manifest is switched by an atomic rename); "
            f"got {path!r}"
        )
    return local_path(path).rstrip("/")


def open_index(path: str) -> Index:
    """The index at `path` as its newest committed version describes it."""
    root = _require_local(path)
    manifest = _newest(root)
    if manifest is None:
        raise IndexError_(f"no index at {path!r} (no {VERSIONS}/ or {MANIFEST}); build one with `neardup index build`")
    if manifest.get("format") not in READABLE_FORMATS:
        raise IndexError_(f"index {path!r} has format {manifest.get('format')!r}; this version reads "
                          f"{', '.join(map(str, READABLE_FORMATS))}")
    return Index(root, manifest)


def _newest(root: str) -> dict | None:
    """The newest committed manifest: the highest version in manifests/ (every entry there is
    whole: it was linked into place complete), else a lone manifest.json."""
    try:
        names = os.listdir(os.path.join(root, VERSIONS))
    except FileNotFoundError:
        names = []
    versions = sorted((int(m.group(1)), n) for n in names if (m := _VERSION_FILE.match(n)))
    if versions:
        entry = os.path.join(root, VERSIONS, versions[-1][1])
        try:
            with open(entry, encoding="utf-8") as fh:
                return json.load(fh)
        except json.JSONDecodeError:
            raise IndexError_(
                f"{entry!r} is torn (a release before format 2 was killed while writing it): remove that file; "
                "the version before it is intact"
            ) from None
    try:
        with open(os.path.join(root, MANIFEST), encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None


def current_version(root: str) -> int:
    manifest = _newest(root)
    return 0 if manifest is None else int(manifest["version"])


def new_part_name(version: int) -> str:
    """A fresh part directory name: never one a killed run may have left behind."""
    return f"part-{version:05d}-{uuid.uuid4().hex[:8]}"


def write_part(part_dir: str, docs: DataFrame | None, bands: DataFrame | None, assign: DataFrame,
               outputs: dict[str, DataFrame] | None = None, boilerplate: DataFrame | None = None,
               removed: DataFrame | None = None, parallel: bool = False) -> None:
    """One complete part directory (written before any manifest names it). A removal part
    (replaced documents) has `removed` and `assign` only. With `parallel` (a nightly
    batch's small tables), the tables are written by concurrent jobs."""
    tables: dict[str, DataFrame] = {}
    if docs is not None:
        tables["docs"] = docs
    if removed is not None:
        tables["removed"] = removed.select(C.DOC_ID)
    tables["assign"] = assign.select(*ASSIGN_COLUMNS)
    tables.update({f"output/{name}": frame for name, frame in (outputs or {}).items()})
    if boilerplate is not None:
        tables["boilerplate"] = boilerplate.coalesce(1)
    writes = parquet_writes(tables, part_dir, "errorifexists")
    if bands is not None:
        ranged = bands.withColumn(BUCKET_RANGE, F.shiftrightunsigned(F.col(C.BUCKET), 60).cast("int"))
        # No sort by bucket: the writer sorts each task's rows by range, which undid it.
        ranged = ranged.repartition(BUCKET_RANGE)
        writes.append(lambda: ranged.write.mode("errorifexists").partitionBy(BUCKET_RANGE).parquet(f"{part_dir}/bands"))
    run_all(writes, parallel)


class ConcurrentCommitError(IndexError_):
    """Another run committed the version this one meant to; this run changed nothing."""


def commit(root: str, manifest: dict, expected_version: int) -> None:
    """Make `manifest` (version expected_version + 1) the newest version, or raise
    ConcurrentCommitError and change nothing when another run got there first.

    The version file is written whole under a temporary name and hard-linked to its
    final name: link(2) fails when the name exists, atomically, so of any number of
    concurrent committers of one version exactly one succeeds, and no reader ever sees
    a partial file. manifest.json is refreshed afterwards as a copy."""
    version = int(manifest["version"])
    current = current_version(root)
    if current != expected_version or version != expected_version + 1:
        raise _moved(expected_version, current)
    folder = os.path.join(root, VERSIONS)
    os.makedirs(folder, exist_ok=True)
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    tmp = _write_synced(folder, text)
    try:
        os.link(tmp, os.path.join(folder, f"v{version:05d}.json"))
    except FileExistsError:
        raise _moved(expected_version, current_version(root)) from None
    finally:
        os.unlink(tmp)
    _fsync_dir(folder)
    _refresh_copy(root, text, version)


def _moved(expected: int, current: int) -> ConcurrentCommitError:
    return ConcurrentCommitError(
        f"the index moved from version {expected} to {current} during this run (a concurrent append?); "
        "nothing was changed: run again"
    )


def _write_synced(folder: str, text: str) -> str:
    tmp = os.path.join(folder, f".tmp-{uuid.uuid4().hex}")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    return tmp


def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some mounts refuse it; the link itself is done
        pass
    finally:
        os.close(fd)


def _refresh_copy(root: str, text: str, version: int) -> None:
    """manifest.json := the newest version, unless a later commit refreshed it already."""
    try:
        with open(os.path.join(root, MANIFEST), encoding="utf-8") as fh:
            if int(json.load(fh).get("version", 0)) >= version:
                return
    except (FileNotFoundError, ValueError):
        pass
    tmp = _write_synced(root, text)
    os.replace(tmp, os.path.join(root, MANIFEST))


def next_manifest(previous: dict | None, cfg: Config, part: str, fingerprint: str, documents: int) -> dict:
    """The manifest after adding `part` (a build when previous is None); `previous` may
    already list uncommitted parts of this run (see `Index.with_part`)."""
    version = (previous or {}).get("version", 0) + 1
    return {
        "format": FORMAT,
        "version": version,
        "neardup_spark_version": __version__,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "params": previous["params"] if previous else params_of(cfg),
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


def ensure_new(path: str) -> str:
    """The local root of an index about to be built; refuse to build over one."""
    root = _require_local(path)
    if _newest(root) is not None:
        raise IndexError_(f"an index already exists at {path!r}; append batches with `neardup run --index ... "
                          "--append`, or remove it to rebuild")
    Path(root, "parts").mkdir(parents=True, exist_ok=True)
    return root
