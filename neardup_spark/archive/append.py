"""A nightly batch appended to the archive index.

`append` takes today's batch and:

1. reads and checks it; a batch already applied (same ids and texts: its
   fingerprint is in the manifest) re-emits that run's stored output;
2. looks its ids up in the index: a document already archived with the same
   text is not inserted again; one with different text is an error, or with
   `index.replace` the old text is taken out first (`replace`);
3. sketches the new documents (boilerplate stripped with the build's lines);
4. exact pass within the batch and against the archive's digests;
5. LSH candidates within the batch (as a full run makes them) and against
   the archive's band rows (up to `lsh.all_pairs_bucket_limit` archived
   documents per batch document and bucket, smallest ids first: a bucket
   the archive has filled with one big story is met through its first
   members, which are linked to the rest already);
6. verifies every candidate exactly on the stored shingle sets;
7. assigns clusters and keepers (`assign`; with keeper linkage `stars`);
8. writes the batch's results (its documents, and archived documents whose
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

import dataclasses
import functools
import time
from concurrent.futures import wait

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from neardup_spark import columns as C
from neardup_spark.archive import index as ix
from neardup_spark.archive import scan, stars, versions
from neardup_spark.archive.assign import assign
from neardup_spark.archive.night import (
    ADOC,
    APPEND_TABLES,
    BROADCAST_BAND_ROWS,
    IN_BATCH,
    PAIR_COLUMNS,
    Matched,
    Night,
    doc_columns,
    maybe_broadcast,
    probe_writes,
    supported,
)
from neardup_spark.archive.replace import remove
from neardup_spark.config import Config, require_io_paths, to_dict
from neardup_spark.errors import InputError
from neardup_spark.plan import Plan
from neardup_spark.runtime import sizing
from neardup_spark.runtime.parallel import run_all, started
from neardup_spark.runtime.publish import Publication, publishing_if
from neardup_spark.runtime.report import Report
from neardup_spark.runtime.runner import Runner
from neardup_spark.runtime.masters import master_of
from neardup_spark.runtime.storage import PROBE_PREFIX, checkpoint_dir, kill_point
from neardup_spark.runtime.tables import save_tables, table_names
from neardup_spark.stages.components import check_backend
from neardup_spark.stages.exact import text_digest
from neardup_spark.stages.pipeline import (CLUSTER_COLUMNS, checked_documents, lsh_report, match, sketched,
                                           with_doc_ids)
from neardup_spark.stages.read import read_input
from neardup_spark.stages.sketch import Stripping
from neardup_spark.stages.write import (
    check_paths,
    check_table_output,
    copy_tables,
    finished_report,
    output_exists,
    output_holds_something,
    parquet_writes,
)


def append(spark: SparkSession, plan: Plan, raw: DataFrame | None = None) -> Report:
    """Check cfg.input (today's batch; or the DataFrame `raw`) against the index and itself, write
    cfg.output, append the batch. With `raw`, cfg.output.path may be empty: the night's tables
    are then only in the index part (`Archive.append` reads them there)."""
    cfg = plan.cfg
    supported(cfg)
    if raw is None:
        require_io_paths(cfg)
    elif cfg.output.table and not cfg.output.path:
        raise InputError("output.table needs output.path (the report and the commit's staging go there)")
    check_paths(cfg, master_of(spark), spark, may_exist=True)  # an existing output: see `_output_free`
    check_table_output(spark, cfg, APPEND_TABLES, may_exist=True)
    check_backend(spark, cfg)
    start = time.perf_counter()
    idx = ix.open_index(cfg.index.path, spark)
    ix.check_params(idx.manifest, plan)
    _check_band_probe(cfg, idx)
    idx.check_sets_readable(spark)
    ix.sets_folder(idx.store, "", cfg.index.set_layout)  # "files" where it cannot be: refused now
    probe_writes(spark, cfg.index.path, cfg.output.path)
    with checkpoint_dir(spark, cfg, cfg.output.path or cfg.index.path):
        return _append(spark, plan, idx, start, raw)


def _check_band_probe(cfg, idx: ix.Index) -> None:
    """index.band_probe = "scan" on an index whose band files the tasks cannot read: refused."""
    if cfg.index.band_probe == "scan" and scan.range_files(idx) is None:
        raise ix.IndexError_(
            f"index.band_probe = 'scan' reads the band files with pyarrow in the tasks: {cfg.index.path} is not a "
            "local or mounted index whose band files are split by bucket range (an index at a URI, or parts of "
            "an older version). Use 'auto' (or 'join'), or compact the index")


def _append(spark: SparkSession, plan: Plan, idx: ix.Index, start: float, raw: DataFrame | None) -> Report:
    cfg = plan.cfg
    # The batch's frames are small, and each is read several times by plans that would
    # otherwise nest every earlier one: boundaries cut their lineage.
    run = Runner(spark, cut=True, scratch=cfg.cluster.scratch)
    night = Night(spark, plan, idx, run)
    counts = run.counts
    raw = read_input(spark, cfg) if raw is None else raw
    try:
        docs = run.keep(checked_documents(raw, cfg, run).withColumn(ix.TEXT_DIGEST, text_digest(F.col(C.TEXT))))
        with run.stage("lookup"):
            # Two small independent jobs, run at once: each waits on scheduling more than it works.
            known: dict[str, int] = {}
            checking = started(lambda: _check_ids(night, docs, counts["documents"], known), spark)
            fingerprint = ix.batch_fingerprint(docs)
            stored = idx.batch_part(fingerprint)
            _output_free(spark, cfg, fingerprint if stored is not None else None)
            if stored is not None:
                wait([checking])  # its verdict and figures do not matter for a batch applied before
                return _replay(night, stored, fingerprint, start)
            archived, changed = checking.result()
            counts.update(known)
        removal = None
        if changed is not None:
            with run.stage("replace"):
                night, removal = remove(night, changed)
        kill_point("after_lookup")
        result = _match(night, docs, archived)
        result = dataclasses.replace(result, removal=removal)
        kill_point("after_match")
        return _write(night, fingerprint, result, start)
    finally:
        run.release()


def _output_free(spark, cfg: Config, replaying: str | None) -> None:
    """An existing output is refused (unless overwrite), except when this batch has landed
    (`replaying` is its fingerprint) and the output is what a killed run of it left: no
    report.json yet, or the report of this very batch. Its re-run then repairs it."""
    if cfg.output.mode == "overwrite" or not cfg.output.path:
        return
    if replaying is not None:
        report = finished_report(spark, cfg.output.path)
        if report is None or (report.get("index") or {}).get("batch") == replaying:
            return
    if output_holds_something(spark, cfg.output.path):
        raise output_exists(cfg.output.path)
    check_table_output(spark, cfg, APPEND_TABLES)  # tables already there are refused too


def _copy_output(night: Night, part: str, pub: Publication) -> dict[str, str] | None:
    """A batch's results, as stored in its index part, staged by `pub` (clusters/, pairs/): the
    files copied, or (Spark Connect) the tables read and written again; with output.table,
    saved as catalog tables (returns their names)."""
    spark, idx, cfg = night.spark, night.idx, night.cfg
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


def _replay(night: Night, part: str, fingerprint: str, start: float) -> Report:
    """This batch was applied before: write the output that run wrote, change nothing.
    Existing tables are replaced whatever the output mode says (`_output_free` allowed it)."""
    spark, cfg, idx, run = night.spark, night.cfg, night.idx, night.run
    with publishing_if(spark, cfg.output.path, "overwrite", (PROBE_PREFIX,)) as pub:
        tables = _copy_output(night, part, pub) if pub is not None else None
        report = run.report(
            mode="append",
            replayed=True,
            index={"path": cfg.index.path, "version": idx.manifest["version"], "part": part, "batch": fingerprint},
            wall_seconds=round(time.perf_counter() - start, 3),
            output=cfg.output.path or None,
            tables=tables,
        )
        if pub is not None:
            pub.commit(report, expect=[] if tables else list(APPEND_TABLES))
    return report


def _check_ids(night: Night, docs: DataFrame, documents: int, counts: dict):
    """(the batch's documents already archived with the same text, those archived with other
    text or None): doc_id frames. Other text is an error unless index.replace. The figures go
    to `counts` (this runs beside another job: not the runner's own counts)."""
    spark, cfg, idx, run = night.spark, night.cfg, night.idx, night.run
    arch = idx.docs(spark).select(C.DOC_ID, F.col(ix.TEXT_DIGEST).alias("_old"))
    have, want = dict(arch.dtypes)[C.DOC_ID], dict(docs.dtypes)[C.DOC_ID]
    if have != want:
        raise InputError(f"the batch's ids are {want} but the index's are {have}; use the same id column type")
    ids = docs.select(C.DOC_ID, ix.TEXT_DIGEST)
    known = arch.join(maybe_broadcast(ids, documents), C.DOC_ID)
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


def _match(night: Night, docs: DataFrame, archived: DataFrame) -> Matched:
    """Sketch the new documents, find and verify their pairs within the batch and against the archive:
    the chain of a full run (`pipeline.match`), with the archive as an extra side."""
    spark, plan, idx, run = night.spark, night.plan, night.idx, night.run
    cfg, counts = plan.cfg, run.counts
    new = docs.join(F.broadcast(archived), C.DOC_ID, "left_anti") if counts["already_indexed"] else docs
    counts["new_documents"] = counts["documents"] - counts["already_indexed"]
    keys = idx.boilerplate_keys(spark) if cfg.boilerplate.enabled else None
    strip = Stripping(keys, cfg.boilerplate.unit) if keys is not None else None
    table, _ = sketched(new, plan, run, strip, digest=True, expected=counts["new_documents"])
    side = ArchiveSide(spark, idx, run, counts["new_documents"], plan.matcher.keys_per_doc,
                        cfg.index.band_probe)
    found = match(table, plan, run, archive=side)
    return Matched(table, found, archived)


class ArchiveSide:
    """The index as `match`'s extra candidate source and verification side (`pipeline.Archive`)."""

    def __init__(self, spark: SparkSession, idx: ix.Index, run: Runner, batch_rows: int, keys_per_doc: int,
                 band_probe: str = "auto"):
        self.spark, self.idx, self.run, self.batch_rows = spark, idx, run, batch_rows
        self.band_probe = band_probe
        self.archive_band_rows = idx.manifest.get("documents", 0) * keys_per_doc  # at most (copies have none)

    def exact(self, hashes: DataFrame) -> DataFrame:
        arch = self.idx.docs(self.spark).where(~F.col(C.IS_EMPTY)).select(F.col(C.DOC_ID).alias(ADOC), C.EXACT_HASH)
        # Each batch representative with an archived copy points at the smallest archived id of that text.
        return arch.join(maybe_broadcast(hashes, self.batch_rows), C.EXACT_HASH).groupBy(C.NID).agg(
            F.min(ADOC).alias(ADOC))

    def hits(self, banded: DataFrame, rows: int, limit: int) -> DataFrame:
        files = scan.range_files(self.idx) if self.band_probe != "join" else None
        groups: list = []
        if files is not None:  # a local index: its band files read by the tasks themselves
            id_type = self.idx.docs(self.spark).schema[C.DOC_ID].dataType
            found = scan.hits(self.spark, self.idx, banded, files, id_type)
            hits = self.idx.live(self.spark, found, ADOC).drop(ix.PART)
            self.run.work["band_probe_scans"] = len(files)
        elif rows <= BROADCAST_BAND_ROWS:
            groups = ix.range_groups(self.archive_band_rows, rows)
            # One broadcast table per group of ranges, each joined with its ranges' files only.
            probes = [self._probe(banded, g if len(groups) > 1 else None) for g in groups]
            hits = functools.reduce(DataFrame.unionByName, probes)
        else:
            hits = self.idx.bands(self.spark).withColumnRenamed(C.DOC_ID, ADOC).join(banded, C.BUCKET)
        self.run.work["band_probe_tables"] = len(groups)
        first = Window.partitionBy(C.NID, C.BUCKET).orderBy(ADOC)
        return hits.withColumn("_r", F.row_number().over(first)).where(F.col("_r") <= limit).select(
            C.NID, ADOC).distinct()

    def _probe(self, banded: DataFrame, ranges: tuple[int, ...] | None) -> DataFrame:
        """The archived band rows (of `ranges` only, if given) joined to the batch's broadcast."""
        batch = banded if ranges is None else banded.where(ix.bucket_range(F.col(C.BUCKET)).isin(list(ranges)))
        arch = self.idx.bands(self.spark, ranges).withColumnRenamed(C.DOC_ID, ADOC)
        return arch.join(F.broadcast(batch), C.BUCKET)

    def sets(self, met: DataFrame, rows: int, columns: list[str]) -> DataFrame:
        # Kept: verification reads the sets twice (both ends of a pair), and an uncut plan
        # would scan every archived set (the index's largest column) twice.
        # Only the met documents' sets are read where the index keeps them in files.
        docs = self.idx.docs(self.spark)
        arch = docs.select(F.col(C.DOC_ID).alias(ADOC), *ix.set_columns(docs), *columns)
        found = self.idx.sets_of(arch.join(maybe_broadcast(met, rows), ADOC), [C.NID, *columns])
        return self.run.keep(found, now=True)


def _batch_clusters(night: Night, assigned: DataFrame, found: Matched, any_already: bool) -> DataFrame:
    """The batch's clusters/ output: every batch document once, with its assignment after this
    batch, and archived documents whose assignment changed (in_batch false).

    A batch document already archived (same text) is not assigned again; it is listed with
    its row of this batch when this batch changed it (it met a newcomer), else with its
    current archived row."""
    spark, idx = night.spark, night.idx
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


def _write(night: Night, fingerprint: str, found: Matched, start: float) -> Report:
    spark, plan, idx, run = night.spark, night.plan, night.idx, night.run
    cfg, counts = plan.cfg, run.counts
    if cfg.cluster.linkage == "keeper":
        assigned = stars.assign(spark, plan, idx, found.table, found.edges, found.met, run)
    else:
        assigned = assign(night, found)
    assigned = run.keep(assigned, now=True)
    row = assigned.agg(
        F.sum((~F.col("_archived")).cast("long")).alias("batch"),
        F.sum((F.col("_archived") & F.col(stars.MOVED)).cast("long")).alias("arch"),
    ).first()
    counts["archived_documents_changed"] = int(row["arch"] or 0)
    if int(row["batch"] or 0) != counts["new_documents"]:  # pragma: no cover - an invariant
        raise AssertionError(f"{row['batch']} assignments for {counts['new_documents']} new documents")
    table = found.table
    ids = table.select(C.NID, C.DOC_ID).unionByName(found.met.select(C.NID, F.col(ADOC).alias(C.DOC_ID)))
    pairs = with_doc_ids(found.edges, ids).select(*PAIR_COLUMNS)
    clusters = _batch_clusters(night, assigned, found, counts["already_indexed"] > 0)

    version = idx.manifest["version"]
    part = ix.new_part_name(version + 1)
    part_dir = idx.part_path(part)
    with publishing_if(spark, cfg.output.path, cfg.output.mode, (PROBE_PREFIX,)) as pub:
        with run.stage("write"):
            # The ids broadcast: a join planned from the kept frames' unknown sizes shuffled and
            # sorted every band row by _nid.
            ids = maybe_broadcast(table.select(C.NID, C.DOC_ID), counts["new_documents"])
            new_bands = found.banded.join(ids, C.NID).select(C.BUCKET, C.DOC_ID)
            sets = ix.sets_folder(idx.store, part, cfg.index.set_layout)
            with versions.part_or_nothing(idx.store, part):
                ix.write_part(part_dir, table.select(*doc_columns(plan)), new_bands, assigned,
                              outputs={"clusters": clusters, "pairs": pairs}, parallel=True, sets=sets)
                kill_point("before_manifest")
                manifest = ix.next_manifest(idx.manifest, plan, part, fingerprint,
                                            counts["new_documents"] - counts["replaced"], set_files=sets is not None)
                versions.commit(idx.store, manifest, expected_version=version)
            kill_point("after_manifest")
            tables = _copy_output(night, part, pub) if pub is not None else None
        report = run.report(
            mode="append",
            replayed=False,
            lsh=lsh_report(plan),
            sizing=sizing.describe(spark).as_dict(),
            config=to_dict(cfg),
            index={"path": cfg.index.path, "version": manifest["version"], "part": part, "batch": fingerprint,
                   "documents": manifest["documents"]},
            wall_seconds=round(time.perf_counter() - start, 3),
            output=cfg.output.path or None,
            tables=tables,
        )
        if pub is not None:
            pub.commit(report, expect=[] if tables else list(APPEND_TABLES))
    return report


__all__ = ["append", "ArchiveSide"]
