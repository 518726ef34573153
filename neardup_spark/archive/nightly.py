"""Nightly batches: build an archive index once, then check each batch against it and append.

`build` runs the whole pipeline over the archive and writes its index (see
`index` for the layout). `append` takes today's batch and:

1. reads and checks it; a batch already applied (same ids and texts: its
   fingerprint is in the manifest) re-emits that run's stored output;
2. looks its ids up in the index: a document already archived with the same
   text is not inserted again; one with different text is an error;
3. sketches the new documents (boilerplate stripped with the build's lines);
4. exact pass within the batch and against the archive's digests;
5. LSH candidates within the batch (as a full run makes them) and against
   the archive's band rows (up to `lsh.all_pairs_bucket_limit` archived
   documents per batch document and bucket, smallest ids first: a bucket
   the archive has filled with one big story is met through its first
   members, which are linked to the rest already);
6. verifies every candidate exactly on the stored shingle sets;
7. connected components over the batch documents and the archived
   *clusters* they touch: a newcomer joins the cluster it matches (its id is
   kept), bridges merge clusters (the smallest of their ids is kept), other
   newcomers make new clusters (their smallest doc id, as in a full run);
8. keepers by the configured rules over each touched cluster (with
   `index.sticky_keeper`, an archived keeper is never replaced); with keeper
   linkage, steps 7 and 8 re-cluster each touched component whole instead
   (see `stars`);
9. writes the batch's results (its documents, and archived documents whose
   cluster, keeper or status changed) and appends a part to the index; the
   manifest switch comes last.

Work and shuffles grow with the batch: the archive is read as columns
(ids, digests, band rows, the shingle sets of the candidates), never
re-sketched, re-banded or re-clustered. The archive's band rows of an index
on a local or mounted filesystem are read by the tasks themselves (`scan`:
pyarrow and numpy, only the matched rows handed to Spark); those of an index
on a Hadoop filesystem by Spark's join.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from concurrent.futures import wait
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from neardup_spark import columns as C
from neardup_spark.archive import index as ix
from neardup_spark.archive import scan, stars
from neardup_spark.config import Config, KeeperConfig, require_io_paths, to_dict
from neardup_spark.errors import InputError, NeardupError
from neardup_spark.plan import Plan
from neardup_spark.runtime.parallel import run_all, started
from neardup_spark.runtime.session import is_local_master, master_of
from neardup_spark.runtime.publish import Publication, publishing
from neardup_spark.runtime.storage import PROBE_PREFIX, checkpoint_dir, kill_point, probe_executor_writes, verify_written
from neardup_spark.stages.components import check_backend, connected_components, driver_components
from neardup_spark.stages.exact import text_digest
from neardup_spark.stages.keepers import TEXT_LEN, keeper_columns, ranked
from neardup_spark.runtime.report import Report
from neardup_spark.runtime import sizing
from neardup_spark.runtime.runner import Runner
from neardup_spark.stages.pipeline import (
    CLUSTER_COLUMNS,
    Matches,
    checked_documents,
    deduplicate,
    lsh_report,
    match,
    sketched,
    with_doc_ids,
)
from neardup_spark.stages.read import read_input
from neardup_spark.stages.sketch import Stripping
from neardup_spark.runtime.tables import check_tables, save_tables, table_names
from neardup_spark.stages.write import (
    check_paths,
    check_table_output,
    copy_tables,
    finished_report,
    output_exists,
    output_holds_something,
    parquet_writes,
    result_tables,
    write_outputs,
    writer_mode,
)

# The tables a nightly batch writes (clusters: the batch's and the archived ones it changed).
APPEND_TABLES = ("clusters", "pairs")

_ADOC = C.ADOC  # an archived document's id
_CNODE = "_cnode"  # an archived cluster's node in the batch graph (negative)
_BATCH = "_from_batch"
IN_BATCH = "in_batch"  # append output: False for an archived document whose assignment changed
PAIR_COLUMNS = (C.DOC_A, C.DOC_B, C.JACCARD, C.CONTAINMENT_A, C.CONTAINMENT_B, C.MATCH)
BROADCAST_ROWS = ix.BROADCAST_ROWS
# The batch's band rows (_nid, bucket: 16 bytes) are broadcast into the archive's band rows up
# to this many (a ~500k-document batch at 42 bands; a few hundred MB on the driver, whatever
# the archive). A larger batch is joined by a shuffle, which moves every archived band row
# (42 a document) and so grows with the archive, not the batch.
BROADCAST_BAND_ROWS = 20_000_000


def _fingerprint_columns(plan: Plan) -> list[str]:
    return plan.matcher.simhash.columns if plan.matcher.simhash is not None else []


def _doc_columns(plan: Plan) -> list[str]:
    return [C.DOC_ID, ix.TEXT_DIGEST, C.EXACT_HASH, C.SHINGLES, *_fingerprint_columns(plan), TEXT_LEN, C.IS_EMPTY,
            *keeper_columns(plan.keeper)]


def _maybe_broadcast(df: DataFrame, rows: int) -> DataFrame:
    return F.broadcast(df) if rows <= BROADCAST_ROWS else df


@dataclass(frozen=True)
class Matched:
    """What `_match` found for a batch, and what the later phases of an append read."""

    table: DataFrame  # the new documents' sketch table (internal ids)
    found: Matches  # within the batch and against the archive (met: archived documents, negative _nid)
    already: DataFrame  # batch ids already in the index with the same text
    removal: DataFrame | None = None  # re-clustered assignments after replaced documents (see `_remove`)

    @property
    def edges(self) -> DataFrame:  # verified pairs and exact copies, within the batch and to met archived documents
        return self.found.edges

    @property
    def met(self) -> DataFrame:  # archived documents met (_adoc, their negative internal _nid)
        return self.found.met

    @property
    def banded(self) -> DataFrame:  # the new representatives' (_nid, bucket) rows, appended to the index's bands
        return self.found.banded


class _ArchiveSide:
    """The index as `match`'s extra candidate source and verification side (`pipeline.Archive`)."""

    def __init__(self, spark: SparkSession, idx: ix.Index, run: Runner, batch_rows: int, keys_per_doc: int,
                 band_probe: str = "auto"):
        self.spark, self.idx, self.run, self.batch_rows = spark, idx, run, batch_rows
        self.band_probe = band_probe
        self.archive_band_rows = idx.manifest.get("documents", 0) * keys_per_doc  # at most (copies have none)

    def exact(self, hashes: DataFrame) -> DataFrame:
        arch = self.idx.docs(self.spark).where(~F.col(C.IS_EMPTY)).select(F.col(C.DOC_ID).alias(_ADOC), C.EXACT_HASH)
        # Each batch representative with an archived copy points at the smallest archived id of that text.
        return arch.join(_maybe_broadcast(hashes, self.batch_rows), C.EXACT_HASH).groupBy(C.NID).agg(
            F.min(_ADOC).alias(_ADOC))

    def hits(self, banded: DataFrame, rows: int, limit: int) -> DataFrame:
        files = scan.range_files(self.idx) if self.band_probe != "join" else None
        groups: list = []
        if files is not None:  # a local index: its band files read by the tasks themselves
            id_type = self.idx.docs(self.spark).schema[C.DOC_ID].dataType
            found = scan.hits(self.spark, self.idx, banded, files, id_type)
            hits = self.idx.live(self.spark, found, _ADOC).drop(ix.PART)
            self.run.work["band_probe_scans"] = len(files)
        elif rows <= BROADCAST_BAND_ROWS:
            groups = ix.range_groups(self.archive_band_rows, rows)
            # One broadcast table per group of ranges, each joined with its ranges' files only.
            probes = [self._probe(banded, g if len(groups) > 1 else None) for g in groups]
            hits = functools.reduce(DataFrame.unionByName, probes)
        else:
            hits = self.idx.bands(self.spark).withColumnRenamed(C.DOC_ID, _ADOC).join(banded, C.BUCKET)
        self.run.work["band_probe_tables"] = len(groups)
        first = Window.partitionBy(C.NID, C.BUCKET).orderBy(_ADOC)
        return hits.withColumn("_r", F.row_number().over(first)).where(F.col("_r") <= limit).select(
            C.NID, _ADOC).distinct()

    def _probe(self, banded: DataFrame, ranges: tuple[int, ...] | None) -> DataFrame:
        """The archived band rows (of `ranges` only, if given) joined to the batch's broadcast."""
        batch = banded if ranges is None else banded.where(ix.bucket_range(F.col(C.BUCKET)).isin(list(ranges)))
        arch = self.idx.bands(self.spark, ranges).withColumnRenamed(C.DOC_ID, _ADOC)
        return arch.join(F.broadcast(batch), C.BUCKET)

    def sets(self, met: DataFrame, rows: int, columns: list[str]) -> DataFrame:
        # Kept: verification reads the sets twice (both ends of a pair), and an uncut plan
        # would scan every archived set (the index's largest column) twice.
        # Only the met documents' sets are read where the index keeps them in files.
        docs = self.idx.docs(self.spark)
        arch = docs.select(F.col(C.DOC_ID).alias(_ADOC), *ix.set_columns(docs), *columns)
        found = self.idx.sets_of(arch.join(_maybe_broadcast(met, rows), _ADOC), [C.NID, *columns])
        return self.run.keep(found, now=True)


# -- build ------------------------------------------------------------------------------------------------------


def build(spark: SparkSession, plan: Plan, output: str | None = None) -> Report:
    """Run the pipeline over the archive (cfg.input) and write its index at cfg.index.path.

    With `output`, the run's tables and report are written there too.
    """
    cfg = plan.cfg
    _supported(cfg)
    check_backend(spark, cfg)
    check_table_output(spark, cfg)
    store = ix.ensure_new(cfg.index.path, spark)
    ix.sets_folder(store, "", cfg.index.set_layout)  # "files" where it cannot be: refused now
    _probe(spark, cfg.index.path, output)
    start = time.perf_counter()
    raw = read_input(spark, cfg)
    with checkpoint_dir(spark, cfg, output or cfg.index.path):
        result = deduplicate(raw, plan, digest=True)
        return _write_build(spark, plan, store, output, result, start)


def _write_build(spark: SparkSession, plan: Plan, store, output: str | None, result, start: float) -> Report:
    cfg = plan.cfg
    try:
        with _publishing(spark, output, cfg.output.mode) as pub:
            return _write_build_part(spark, plan, store, pub, result, start)
    finally:
        result.unpersist()


@contextlib.contextmanager
def _publishing(spark: SparkSession, output: str | None, mode: str):
    """A Publication to `output`, or None without one."""
    if not output:
        yield None
        return
    with publishing(spark, output, mode, leftovers=(PROBE_PREFIX,)) as pub:
        yield pub


def _write_build_part(spark: SparkSession, plan: Plan, store, pub: Publication | None, result, start: float) -> Report:
    cfg = plan.cfg
    table = result.sketched
    banded = table.where(~F.col(C.IS_EMPTY)).join(result.copies.select(C.NID), C.NID, "left_anti")
    bands = banded.select(F.explode(C.BANDS).alias(C.BUCKET), C.DOC_ID)
    part = ix.new_part_name(1)
    run = Runner(spark)
    with run.stage("write_index"):
        keys = None
        if result.boilerplate is not None:
            keys = result.boilerplate.select(F.col("line_key"))
        assign = result.clusters
        if result.components is not None:  # keeper linkage: each document's component too
            assign = assign.join(result.components, C.DOC_ID)
        sets = ix.sets_folder(store, part, cfg.index.set_layout)
        ix.write_part(f"{store.uri}/parts/{part}", table.select(*_doc_columns(plan)), bands, assign,
                      outputs={"pairs": result.pairs}, boilerplate=keys, sets=sets)
        tables = None
        if pub is not None or cfg.output.table:
            tables = write_outputs(spark, result, cfg, pub)
        manifest = ix.next_manifest(None, plan, part, "build", result.report["counts"]["documents"],
                                    set_files=sets is not None)
        manifest["batches"] = {}
        kill_point("before_manifest")
        ix.commit(store, manifest, expected_version=0)
    report = result.report.with_(stage_seconds=run.seconds,
                                 index={"path": cfg.index.path, "version": manifest["version"], "part": part},
                                 tables=tables, wall_seconds=round(time.perf_counter() - start, 3))
    if pub is not None:
        pub.commit(report, expect=[] if tables else list(result_tables(result)))
    return report


def export(spark: SparkSession, index_path: str, output: str = "", mode: str = "error", *, table: str = "",
           table_format: str = "") -> int:
    """The index's current assignment of every archived document -> output/clusters/, or with
    `table` to the catalog table `<table>_clusters`; returns the count."""
    if bool(output) == bool(table):
        raise NeardupError("export writes to an output directory or to a table prefix: give one of them")
    if table:
        check_tables(spark, table, table_format, ["clusters"], mode)
    idx = ix.open_index(index_path, spark)
    clusters = idx.assignments(spark).select(*CLUSTER_COLUMNS)
    if table:
        save_tables(spark, {"clusters": clusters}, table, table_format, mode, {"clusters": idx.manifest["documents"]})
        return idx.manifest["documents"]
    with publishing(spark, output, mode, leftovers=(PROBE_PREFIX,), with_report=False) as pub:
        root = pub.tables_root().rstrip("/")
        clusters.write.mode("error" if pub.store is not None else writer_mode(mode)).parquet(f"{root}/clusters")
        verify_written(spark, root, {"clusters": idx.manifest["documents"]})
        pub.commit(None, expect=["clusters"])
    return idx.manifest["documents"]


# -- append -----------------------------------------------------------------------------------------------------


def append(spark: SparkSession, plan: Plan) -> Report:
    """Check cfg.input (today's batch) against the index and itself, write cfg.output, append the batch."""
    cfg = plan.cfg
    _supported(cfg)
    require_io_paths(cfg)
    check_paths(cfg, master_of(spark), spark, may_exist=True)  # an existing output: see `_output_free`
    check_table_output(spark, cfg, APPEND_TABLES, may_exist=True)
    check_backend(spark, cfg)
    start = time.perf_counter()
    idx = ix.open_index(cfg.index.path, spark)
    ix.check_params(idx.manifest, plan)
    _check_band_probe(cfg, idx)
    idx.check_sets_readable(spark)
    ix.sets_folder(idx.store, "", cfg.index.set_layout)  # "files" where it cannot be: refused now
    _probe(spark, cfg.index.path, cfg.output.path)
    with checkpoint_dir(spark, cfg, cfg.output.path):
        return _append(spark, plan, idx, start)


def _supported(cfg) -> None:
    """What the archive index does not do yet, refused before any work."""
    if cfg.match.mode != "jaccard":
        raise ix.IndexError_("the archive index supports match.mode = 'jaccard' only")


def _check_band_probe(cfg, idx: ix.Index) -> None:
    """index.band_probe = "scan" on an index whose band files the tasks cannot read: refused."""
    if cfg.index.band_probe == "scan" and scan.range_files(idx) is None:
        raise ix.IndexError_(
            f"index.band_probe = 'scan' reads the band files with pyarrow in the tasks: {cfg.index.path} is not a "
            "local or mounted index whose band files are split by bucket range (an index at a URI, or parts of "
            "an older version). Use 'auto' (or 'join'), or compact the index")


def _probe(spark: SparkSession, index_path: str, output: str | None) -> None:
    """On a cluster: the executors' files under the index and the output reach the driver."""
    if not is_local_master(master_of(spark)):
        probe_executor_writes(spark, index_path, "index")
        if output:
            probe_executor_writes(spark, output)


def _append(spark: SparkSession, plan: Plan, idx: ix.Index, start: float) -> Report:
    cfg = plan.cfg
    # The batch's frames are small, and each is read several times by plans that would
    # otherwise nest every earlier one: boundaries cut their lineage.
    run = Runner(spark, cut=True)
    counts = run.counts
    raw = read_input(spark, cfg)
    docs = run.keep(checked_documents(raw, cfg, run).withColumn(ix.TEXT_DIGEST, text_digest(F.col(C.TEXT))))
    try:
        with run.stage("lookup"):
            # Two small independent jobs, run at once: each waits on scheduling more than it works.
            known: dict[str, int] = {}
            checking = started(lambda: _check_ids(spark, cfg, idx, docs, counts["documents"], known, run), spark)
            fingerprint = ix.batch_fingerprint(docs)
            stored = idx.batch_part(fingerprint)
            _output_free(spark, cfg, fingerprint if stored is not None else None)
            if stored is not None:
                wait([checking])  # its verdict and figures do not matter for a batch applied before
                return _replay(spark, cfg, idx, stored, fingerprint, run, start)
            archived, changed = checking.result()
            counts.update(known)
        removal = None
        if changed is not None:
            with run.stage("replace"):
                idx, removal = _remove(spark, plan, idx, changed, run)
        kill_point("after_lookup")
        result = _match(spark, plan, idx, docs, archived, run)
        result = dataclasses.replace(result, removal=removal)
        kill_point("after_match")
        return _write(spark, plan, idx, fingerprint, result, run, start)
    finally:
        run.release()


def _output_free(spark, cfg: Config, replaying: str | None) -> None:
    """An existing output is refused (unless overwrite), except when this batch has landed
    (`replaying` is its fingerprint) and the output is what a killed run of it left: no
    report.json yet, or the report of this very batch. Its re-run then repairs it."""
    if cfg.output.mode == "overwrite":
        return
    if replaying is not None:
        report = finished_report(spark, cfg.output.path)
        if report is None or (report.get("index") or {}).get("batch") == replaying:
            return
    if output_holds_something(spark, cfg.output.path):
        raise output_exists(cfg.output.path)
    check_table_output(spark, cfg, APPEND_TABLES)  # tables already there are refused too


def _copy_output(spark, idx: ix.Index, part: str, cfg: Config, pub: Publication) -> dict[str, str] | None:
    """A batch's results, as stored in its index part, staged by `pub` (clusters/, pairs/): the
    files copied, or (Spark Connect) the tables read and written again; with output.table,
    saved as catalog tables (returns their names)."""
    names = list(APPEND_TABLES)
    stored = {name: ix.read_table(spark, idx.store, f"parts/{part}/output/{name}") for name in names}
    if cfg.output.table:
        pub.withdraw(tables=list(table_names(cfg.output.table, names).values()))
        expected = {name: frame.count() for name, frame in stored.items()}
        return save_tables(spark, stored, cfg.output.table, cfg.output.table_format, pub.mode, expected)
    root = pub.tables_root().rstrip("/")
    if pub.store is None or not copy_tables(spark, f"{idx.part_path(part)}/output", root, names, "error"):
        # Spark writes a file (with the schema) even for an empty unpartitioned table.
        run_all(parquet_writes(stored, root, "error" if pub.store is not None else pub.mode), session=spark)
    return None


def _replay(spark, cfg: Config, idx: ix.Index, part: str, fingerprint: str, run: Runner, start: float) -> Report:
    """This batch was applied before: write the output that run wrote, change nothing.
    Existing tables are replaced whatever the output mode says (`_output_free` allowed it)."""
    with publishing(spark, cfg.output.path, "overwrite", leftovers=(PROBE_PREFIX,)) as pub:
        tables = _copy_output(spark, idx, part, cfg, pub)
        report = run.report(
            mode="append",
            replayed=True,
            index={"path": cfg.index.path, "version": idx.manifest["version"], "part": part, "batch": fingerprint},
            wall_seconds=round(time.perf_counter() - start, 3),
            output=cfg.output.path,
            tables=tables,
        )
        pub.commit(report, expect=[] if tables else list(APPEND_TABLES))
    return report


def _check_ids(spark, cfg: Config, idx: ix.Index, docs: DataFrame, documents: int, counts: dict, run: Runner):
    """(the batch's documents already archived with the same text, those archived with other
    text or None): doc_id frames. Other text is an error unless index.replace."""
    arch = idx.docs(spark).select(C.DOC_ID, F.col(ix.TEXT_DIGEST).alias("_old"))
    have, want = dict(arch.dtypes)[C.DOC_ID], dict(docs.dtypes)[C.DOC_ID]
    if have != want:
        raise InputError(f"the batch's ids are {want} but the index's are {have}; use the same id column type")
    ids = docs.select(C.DOC_ID, ix.TEXT_DIGEST)
    known = arch.join(_maybe_broadcast(ids, documents), C.DOC_ID)
    known = run.keep(known)
    row = known.agg(
        F.count(F.lit(1)).alias("n"), F.sum((F.col("_old") != F.col(ix.TEXT_DIGEST)).cast("long")).alias("changed")
    ).first()
    differs = F.col("_old") != F.col(ix.TEXT_DIGEST)
    counts["replaced"] = int(row["changed"] or 0)
    if counts["replaced"] and not cfg.index.replace:
        example = known.where(differs).select(C.DOC_ID).limit(3).collect()
        shown = ", ".join(repr(r[0]) for r in example)
        raise InputError(
            f"{row['changed']} batch document(s) reuse an archived id with different text (e.g. {shown}); "
            "give the new text a new id, or pass --replace (index.replace) to replace the archived text"
        )
    counts["already_indexed"] = int(row["n"]) - counts["replaced"]
    changed = known.where(differs).select(C.DOC_ID) if counts["replaced"] else None
    return known.where(~differs).select(C.DOC_ID), changed


def _remove(spark, plan: Plan, idx: ix.Index, changed: DataFrame, run: Runner):
    """Take the old versions of replaced documents out of the archive, uncommitted.

    Writes a removal part: their ids (earlier rows of them stop counting) and
    the new assignment of every other member of their clusters (keeper
    linkage: components), re-clustered from the stored pairs without them (a
    cluster held together by a replaced document splits). Returns the index
    with that part as its newest, and the changed assignments (with _moved)."""
    keeper = plan.cfg.cluster.linkage == "keeper"
    group = C.COMPONENT_ID if keeper else C.CLUSTER_ID  # what a replaced document can split
    with_old = idx.assignments_of(spark, changed)
    clusters = run.keep(with_old.select(group).distinct(), now=True)
    rest = run.keep(idx.members_of(spark, clusters, by=group).join(changed, C.DOC_ID, "left_anti")
                    .withColumn(C.NID, F.monotonically_increasing_id()), now=True)
    stored = idx.pairs(spark)
    if stored is None:  # pragma: no cover - every part of this format stores its pairs
        raise ix.IndexError_("this index stores no pairs to re-cluster from; rebuild it to replace documents")
    copies, heirs = _copies_and_heirs(spark, idx, rest, changed, run)
    heirs = run.keep(heirs, now=True)
    inherited = _inherited_pairs(stored, heirs, rest)
    stored = _inherit(_inherit(stored, heirs, C.DOC_A), heirs, C.DOC_B)
    ida = rest.select(F.col(C.DOC_ID).alias(C.DOC_A), F.col(C.NID).alias("_na"))
    idb = rest.select(F.col(C.DOC_ID).alias(C.DOC_B), F.col(C.NID).alias("_nb"))
    edges = stored.join(ida, C.DOC_A).join(idb, C.DOC_B).select(F.col("_na").alias(C.DOC_A), F.col("_nb").alias(C.DOC_B))
    edges = edges.where(F.col(C.DOC_A) != F.col(C.DOC_B)).unionByName(copies)
    if keeper:
        docs = rest.join(idx.docs(spark), C.DOC_ID)
        decided = stars.restar(plan, stars.view(docs, plan, False), edges, run).select(*stars.ROWS)
        changes = run.keep(stars.changed_rows(decided, rest.select(*stars.ROWS)), now=True)
    else:
        changes = run.keep(_recluster(spark, plan, idx, rest, edges), now=True)
    run.counts["replaced_clusters_recomputed"] = clusters.count()
    part = ix.new_part_name(idx.manifest["version"] + 1)
    ix.write_part(f"{idx.path}/parts/{part}", None, None, changes, outputs={"pairs": inherited}, removed=changed)
    return idx.with_part(part), changes


def _inherited_pairs(stored: DataFrame, heirs: DataFrame, rest: DataFrame) -> DataFrame:
    """The stored pairs of replaced documents passed on to their heirs (pairs rows, doc_a <
    doc_b, both ends remaining). The removal part stores them: the stored pairs of a replaced
    document stop counting, and a later re-clustering (a replacement, or a keeper-linkage
    batch) reads the pairs, not this night's re-clustering."""
    gone = F.broadcast(heirs.select("_gone"))
    touched = stored.join(gone.withColumnRenamed("_gone", C.DOC_A), C.DOC_A, "left_semi").unionByName(
        stored.join(gone.withColumnRenamed("_gone", C.DOC_B), C.DOC_B, "left_semi"))
    moved = _inherit(_inherit(touched.select(*PAIR_COLUMNS), heirs, C.DOC_A), heirs, C.DOC_B)
    ids = rest.select(C.DOC_ID)
    moved = moved.where(F.col(C.DOC_A) != F.col(C.DOC_B)).join(
        ids.withColumnRenamed(C.DOC_ID, C.DOC_A), C.DOC_A, "left_semi").join(
        ids.withColumnRenamed(C.DOC_ID, C.DOC_B), C.DOC_B, "left_semi")
    swap = F.col(C.DOC_A) > F.col(C.DOC_B)

    def either(col: str, other: str) -> F.Column:
        return F.when(swap, F.col(other)).otherwise(F.col(col)).alias(col)

    return moved.select(either(C.DOC_A, C.DOC_B), either(C.DOC_B, C.DOC_A), C.JACCARD,
                        either(C.CONTAINMENT_A, C.CONTAINMENT_B), either(C.CONTAINMENT_B, C.CONTAINMENT_A),
                        C.MATCH).distinct()


def _recluster(spark, plan: Plan, idx: ix.Index, rest: DataFrame, edges: DataFrame) -> DataFrame:
    """Connected components of the remaining members rest(assign columns, _nid) over edges,
    their keepers, and the rows that changed (with _moved)."""
    comps = connected_components(edges, plan.cfg)
    comps = comps.select(F.col(C.DOC_ID).alias(C.NID), F.col(C.CLUSTER_ID).alias("_comp"))
    grouped = rest.join(comps, C.NID, "left").withColumn("_comp", F.coalesce("_comp", C.NID))
    view = grouped.select(C.DOC_ID, "_comp", F.col(C.CLUSTER_ID).alias("_old_cluster"),
                          F.col(C.KEEPER_ID).alias("_old_keeper")).join(idx.docs(spark), C.DOC_ID)
    sticky = [F.col(C.DOC_ID) != F.col("_old_keeper")] if plan.cfg.index.sticky_keeper else []
    # A part keeps its cluster's id while the document that names it is in the part.
    decided = ranked(view, plan.keeper, "_comp", lambda comp: stars.named(comp, "_old_cluster"), sticky)
    return _changed_only(decided, rest).withColumn(stars.MOVED, F.lit(True))


def _copies_and_heirs(spark, idx: ix.Index, rest: DataFrame, changed: DataFrame, run: Runner):
    """(exact edges among the remaining members, heirs(_gone, _heir)).

    The stored pairs name each text by one representative: its exact copies hang off it by
    exact pairs only. When a replaced document was that representative, its copies keep
    each other (a star to the smallest remaining id of the text) and its verified pairs
    pass to that copy, which has the same text and so the same Jaccard: as a full run
    over the final texts would find them."""
    docs = idx.docs(spark).where(~F.col(C.IS_EMPTY)).select(C.DOC_ID, C.EXACT_HASH)
    hashed = run.keep(rest.select(C.DOC_ID, C.NID).join(docs, C.DOC_ID), now=True)
    first = hashed.groupBy(C.EXACT_HASH).agg(F.min(F.struct(C.DOC_ID, C.NID)).alias("_first"))
    copies = hashed.join(first, C.EXACT_HASH).where(F.col(C.DOC_ID) != F.col(f"_first.{C.DOC_ID}")).select(
        F.col(f"_first.{C.NID}").alias(C.DOC_A), F.col(C.NID).alias(C.DOC_B))
    heirs = changed.select(C.DOC_ID).join(docs, C.DOC_ID).join(first, C.EXACT_HASH).select(
        F.col(C.DOC_ID).alias("_gone"), F.col(f"_first.{C.DOC_ID}").alias("_heir"))
    return copies, heirs


def _inherit(pairs: DataFrame, heirs: DataFrame, end: str) -> DataFrame:
    """pairs with `end` renamed to its heir where that end is a replaced document with one."""
    joined = pairs.join(F.broadcast(heirs), F.col(end) == F.col("_gone"), "left")
    return joined.withColumn(end, F.coalesce(F.col("_heir"), F.col(end))).drop("_gone", "_heir")


def _changed_only(decided: DataFrame, before: DataFrame) -> DataFrame:
    """The rows of decided(cluster columns) that differ from before(cluster columns)."""
    was = before.select(C.DOC_ID, *[F.col(c).alias(f"_was_{c}") for c in CLUSTER_COLUMNS[1:]])
    same = F.lit(True)
    for c in CLUSTER_COLUMNS[1:]:
        same = same & F.col(f"_was_{c}").eqNullSafe(F.col(c))
    return decided.join(was, C.DOC_ID, "left").where(~same).select(*CLUSTER_COLUMNS)


def _match(spark, plan: Plan, idx: ix.Index, docs: DataFrame, archived: DataFrame, run: Runner) -> Matched:
    """Sketch the new documents, find and verify their pairs within the batch and against the archive:
    the chain of a full run (`pipeline.match`), with the archive as an extra side."""
    cfg, counts = plan.cfg, run.counts
    new = docs.join(F.broadcast(archived), C.DOC_ID, "left_anti") if counts["already_indexed"] else docs
    counts["new_documents"] = counts["documents"] - counts["already_indexed"]
    keys = idx.boilerplate_keys(spark) if cfg.boilerplate.enabled else None
    strip = Stripping(keys, cfg.boilerplate.unit) if keys is not None else None
    table, _ = sketched(new, plan, run, strip, digest=True, expected=counts["new_documents"])
    side = _ArchiveSide(spark, idx, run, counts["new_documents"], plan.matcher.keys_per_doc,
                        cfg.index.band_probe)
    found = match(table, plan, run, archive=side)
    return Matched(table, found, archived)


def _archived_members(spark, idx: ix.Index, met: DataFrame, run: Runner):
    """(current assignment of the met archived docs, every current member of their clusters)."""
    current = idx.assignments_of(spark, met.select(F.col(_ADOC).alias(C.DOC_ID)))
    met_assign = run.keep(met.join(current.withColumnRenamed(C.DOC_ID, _ADOC), _ADOC), now=True)
    touched, _ = run.counted(met_assign.select(C.CLUSTER_ID).distinct(), "archived_clusters_touched")
    members = run.keep(idx.members_of(spark, touched), now=True)
    return met_assign, touched, members


def _assign(spark, plan: Plan, idx: ix.Index, found: Matched, run: Runner) -> DataFrame:
    """New assignments: the batch's new documents and every member of a touched archived cluster."""
    table, counts = found.table, run.counts
    with run.stage("components"):
        # Every edge is a verified pair or an exact copy (of a batch or an archived text).
        most = counts["verified_pairs"] + counts["exact_duplicates"] + counts["exact_archive_matches"]
        limit = plan.cfg.cluster.driver_max_edges
        if limit and most <= limit:
            comps, arch_comp, members = _components_on_driver(spark, idx, found, run)
        else:
            comps, arch_comp, members = _components_in_spark(spark, plan.cfg, idx, found, run)

    with run.stage("keepers"):
        # Every document whose assignment may change: batch documents (in a component or alone)
        # and the members of touched archived clusters; `_comp` names its component.
        batch = table.join(comps, C.NID, "left").select(
            *_keeper_view(plan.keeper, F.lit(True)),
            F.coalesce(F.col("_comp"), F.col(C.NID)).alias("_comp"),
            F.lit(None).cast(dict(table.dtypes)[C.DOC_ID]).alias("_old_cluster"),
        )
        arch_docs = idx.docs(spark)
        archived = members.join(arch_comp, C.CLUSTER_ID).join(arch_docs, C.DOC_ID).select(
            *_keeper_view(plan.keeper, F.lit(False)), "_comp", F.col(C.CLUSTER_ID).alias("_old_cluster")
        )
        everyone = batch.unionByName(archived)
        return _decide(everyone, plan, members)


def _components_in_spark(spark, cfg: Config, idx: ix.Index, found: Matched, run: Runner):
    """(comps(_nid, _comp) of batch documents, arch_comp(cluster_id, _comp), members): the
    batch graph, with each touched archived cluster as one node, solved by the backend."""
    edges, met = found.edges, found.met
    met_assign, touched, members = _archived_members(spark, idx, met, run)
    nodes = run.keep(touched.withColumn(_CNODE, -1 - F.monotonically_increasing_id()), now=True)
    node_of = met_assign.join(nodes, C.CLUSTER_ID).select(C.NID, _CNODE)
    a = edges.join(node_of.withColumnRenamed(C.NID, C.DOC_A), C.DOC_A, "left")
    a = a.select(F.coalesce(_CNODE, C.DOC_A).alias(C.DOC_A), C.DOC_B)
    b = a.join(node_of.withColumnRenamed(C.NID, C.DOC_B), C.DOC_B, "left")
    graph = b.select(C.DOC_A, F.coalesce(_CNODE, C.DOC_B).alias(C.DOC_B))
    comps = run.keep(connected_components(graph, cfg, run.work), now=True)
    labels = comps.select(F.col(C.DOC_ID).alias(_CNODE), F.col(C.CLUSTER_ID).alias("_comp"))
    arch_comp = nodes.join(labels, _CNODE).select(C.CLUSTER_ID, "_comp")
    return comps.select(F.col(C.DOC_ID).alias(C.NID), F.col(C.CLUSTER_ID).alias("_comp")), arch_comp, members


def _components_on_driver(spark, idx: ix.Index, found: Matched, run: Runner):
    """`_components_in_spark` for a batch graph small enough for the driver (at most
    cluster.driver_max_edges edges): the edges and the met documents' clusters are
    collected, relabelled and solved in numpy (`driver_components`) in two jobs
    instead of the ~30 small ones of the distributed path; the same components."""
    edges, met = found.edges, found.met
    current = idx.assignments_of(spark, met.select(F.col(_ADOC).alias(C.DOC_ID)))
    met_assign = met.join(current.withColumnRenamed(C.DOC_ID, _ADOC), _ADOC).select(C.NID, C.CLUSTER_ID)
    met_pd = met_assign.toPandas()
    pairs = edges.select(C.DOC_A, C.DOC_B).toPandas()
    touched, cluster_of_met = np.unique(met_pd[C.CLUSTER_ID].to_numpy(), return_inverse=True)
    run.counts["archived_clusters_touched"] = int(touched.size)
    src, dst = pairs[C.DOC_A].to_numpy(np.int64), pairs[C.DOC_B].to_numpy(np.int64)
    met_nids = met_pd[C.NID].to_numpy(np.int64)
    # Cluster nodes below every id in the graph: no collision with a batch or met id.
    base = min(0, int(src.min(initial=0)), int(dst.min(initial=0)), int(met_nids.min(initial=0))) - 1
    cluster_node = base - np.arange(touched.size, dtype=np.int64)
    node_of_met = cluster_node[cluster_of_met]
    a, b = _relabel(src, met_nids, node_of_met), _relabel(dst, met_nids, node_of_met)
    keep = a != b
    nodes, labels = driver_components(a[keep], b[keep])
    run.work["components_rounds"], run.work["components_on_driver"] = 0, 1
    batch = nodes >= 0
    comps = pd.DataFrame({C.NID: nodes[batch], "_comp": labels[batch]})
    linked = np.isin(cluster_node, nodes)  # clusters reached by a verified edge
    at = np.searchsorted(nodes, cluster_node[linked])
    arch = pd.DataFrame({C.CLUSTER_ID: touched[linked], "_comp": labels[at]})
    kind = current.schema[C.CLUSTER_ID].dataType
    comps_df = spark.createDataFrame(comps, StructType([StructField(C.NID, LongType(), False),
                                                        StructField("_comp", LongType(), False)]))
    arch_df = spark.createDataFrame(arch, StructType([StructField(C.CLUSTER_ID, kind, False),
                                                      StructField("_comp", LongType(), False)]))
    members = run.keep(idx.members_of(spark, F.broadcast(arch_df.select(C.CLUSTER_ID))), now=True)
    return comps_df, arch_df, members


def _relabel(ids: np.ndarray, keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """ids, each one found in keys replaced by the value at the same position."""
    if keys.size == 0:
        return ids
    order = np.argsort(keys)
    keys, values = keys[order], values[order]
    at = np.minimum(np.searchsorted(keys, ids), keys.size - 1)
    return np.where(keys[at] == ids, values[at], ids)


def _keeper_view(keeper: KeeperConfig, from_batch: F.Column) -> list:
    return [C.DOC_ID, C.IS_EMPTY, C.EXACT_HASH, TEXT_LEN, *keeper_columns(keeper), from_batch.alias(_BATCH)]


def _decide(everyone: DataFrame, plan: Plan, members: DataFrame) -> DataFrame:
    """Per component: the cluster id (an archived one if any: the smallest), the keeper, statuses."""
    # Sticky keepers: archived members first, so newcomers win only in new clusters.
    sticky = [F.col(_BATCH)] if plan.cfg.index.sticky_keeper else []

    def archived_first(comp: Window) -> F.Column:
        return F.coalesce(F.min("_old_cluster").over(comp), F.min(C.DOC_ID).over(comp))

    # Empty texts never join a component (they have no edges), so each is a component alone.
    decided = ranked(everyone, plan.keeper, "_comp", archived_first, sticky, keep=["_old_cluster"])
    decided = decided.withColumn("_archived", F.col("_old_cluster").isNotNull()).drop("_old_cluster")
    # Archived documents only where something changed.
    batch = decided.where(~F.col("_archived")).select(*CLUSTER_COLUMNS, F.lit(False).alias("_archived"))
    changed = _changed_only(decided.where(F.col("_archived")), members)
    return batch.unionByName(changed.withColumn("_archived", F.lit(True))).withColumn(stars.MOVED, F.lit(True))


def _batch_clusters(spark, idx: ix.Index, assigned: DataFrame, found: Matched, any_already: bool) -> DataFrame:
    """The batch's clusters/ output: every batch document once, with its assignment after this
    batch, and archived documents whose assignment changed (in_batch false).

    A batch document already archived (same text) is not assigned again; it is listed with
    its row of this batch when this batch changed it (it met a newcomer), else with its
    current archived row."""
    # Rows whose component id alone changed (keeper linkage) are the index's business only.
    rows = assigned.where(F.col(stars.MOVED)).select(*CLUSTER_COLUMNS, (~F.col("_archived")).alias(IN_BATCH))
    if found.removal is not None:  # archived members re-clustered without a replaced document
        # A document this night moved again is listed with its row of this night only.
        later = found.removal.where(F.col(stars.MOVED)).join(
            assigned.where(F.col(stars.MOVED)).select(C.DOC_ID), C.DOC_ID, "left_anti")
        rows = rows.unionByName(later.select(*CLUSTER_COLUMNS, F.lit(False).alias(IN_BATCH)))
    if not any_already:
        return rows
    already = found.already.select(C.DOC_ID, F.lit(True).alias("_again"))
    rows = rows.join(already, C.DOC_ID, "left").select(
        *CLUSTER_COLUMNS, (F.col(IN_BATCH) | F.col("_again").isNotNull()).alias(IN_BATCH))
    unchanged = found.already.join(rows.select(C.DOC_ID), C.DOC_ID, "left_anti")
    again = idx.assignments_of(spark, unchanged).select(*CLUSTER_COLUMNS, F.lit(True).alias(IN_BATCH))
    return rows.unionByName(again)


def _write(spark, plan: Plan, idx: ix.Index, fingerprint: str, found: Matched, run: Runner, start: float) -> Report:
    cfg, counts = plan.cfg, run.counts
    if cfg.cluster.linkage == "keeper":
        assigned = stars.assign(spark, plan, idx, found.table, found.edges, found.met, run)
    else:
        assigned = _assign(spark, plan, idx, found, run)
    assigned = run.keep(assigned, now=True)
    row = assigned.agg(
        F.sum((~F.col("_archived")).cast("long")).alias("batch"),
        F.sum((F.col("_archived") & F.col(stars.MOVED)).cast("long")).alias("arch"),
    ).first()
    counts["archived_documents_changed"] = int(row["arch"] or 0)
    if int(row["batch"] or 0) != counts["new_documents"]:  # pragma: no cover - an invariant
        raise AssertionError(f"{row['batch']} assignments for {counts['new_documents']} new documents")
    table = found.table
    ids = table.select(C.NID, C.DOC_ID).unionByName(found.met.select(C.NID, F.col(_ADOC).alias(C.DOC_ID)))
    pairs = with_doc_ids(found.edges, ids).select(*PAIR_COLUMNS)
    clusters = _batch_clusters(spark, idx, assigned, found, counts["already_indexed"] > 0)

    version = idx.manifest["version"]
    part = ix.new_part_name(version + 1)
    part_dir = idx.part_path(part)
    with publishing(spark, cfg.output.path, cfg.output.mode, leftovers=(PROBE_PREFIX,)) as pub:
        with run.stage("write"):
            # The ids broadcast: a join planned from the kept frames' unknown sizes shuffled and
            # sorted every band row by _nid.
            ids = _maybe_broadcast(table.select(C.NID, C.DOC_ID), counts["new_documents"])
            new_bands = found.banded.join(ids, C.NID).select(C.BUCKET, C.DOC_ID)
            sets = ix.sets_folder(idx.store, part, cfg.index.set_layout)
            with ix.part_or_nothing(idx.store, part):
                ix.write_part(part_dir, table.select(*_doc_columns(plan)), new_bands, assigned,
                              outputs={"clusters": clusters, "pairs": pairs}, parallel=True, sets=sets)
                kill_point("before_manifest")
                manifest = ix.next_manifest(idx.manifest, plan, part, fingerprint,
                                            counts["new_documents"] - counts["replaced"], set_files=sets is not None)
                ix.commit(idx.store, manifest, expected_version=version)
            kill_point("after_manifest")
            tables = _copy_output(spark, idx, part, cfg, pub)
        report = run.report(
            mode="append",
            replayed=False,
            lsh=lsh_report(plan),
            sizing=sizing.describe(spark).as_dict(),
            config=to_dict(cfg),
            index={"path": cfg.index.path, "version": manifest["version"], "part": part, "batch": fingerprint,
                   "documents": manifest["documents"]},
            wall_seconds=round(time.perf_counter() - start, 3),
            output=cfg.output.path,
            tables=tables,
        )
        pub.commit(report, expect=[] if tables else list(APPEND_TABLES))
    return report


__all__ = ["append", "build", "export"]
