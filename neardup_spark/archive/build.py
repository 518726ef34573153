"""Build an archive index from a whole archive, and export its current clusters.

`build` runs the pipeline over the archive (cfg.input) and writes the index's
first part (see `index` for the layout); `export` writes every archived
document's current assignment as a run's clusters/ table.
"""

from __future__ import annotations

import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from neardup_spark import columns as C
from neardup_spark.archive import index as ix
from neardup_spark.archive import versions
from neardup_spark.archive.night import doc_columns, probe_writes, supported
from neardup_spark.errors import NeardupError
from neardup_spark.plan import Plan
from neardup_spark.runtime.publish import Publication, publishing, publishing_if
from neardup_spark.runtime.report import Report
from neardup_spark.runtime.runner import Runner
from neardup_spark.runtime.storage import PROBE_PREFIX, checkpoint_dir, kill_point, verify_written
from neardup_spark.runtime.tables import check_tables, save_tables
from neardup_spark.stages.components import check_backend
from neardup_spark.stages.pipeline import CLUSTER_COLUMNS, deduplicate
from neardup_spark.stages.read import read_input
from neardup_spark.stages.write import check_table_output, result_tables, write_outputs, writer_mode


def build(spark: SparkSession, plan: Plan, output: str | None = None, raw: DataFrame | None = None) -> Report:
    """Run the pipeline over the archive (cfg.input, or the DataFrame `raw`) and write its index
    at cfg.index.path.

    With `output`, the run's tables and report are written there too.
    """
    cfg = plan.cfg
    supported(cfg)
    check_backend(spark, cfg)
    check_table_output(spark, cfg)
    store = ix.ensure_new(cfg.index.path, spark)
    ix.sets_folder(store, "", cfg.index.set_layout)  # "files" where it cannot be: refused now
    probe_writes(spark, cfg.index.path, output)
    start = time.perf_counter()
    raw = read_input(spark, cfg) if raw is None else raw
    with checkpoint_dir(spark, cfg, output or cfg.index.path):
        result = deduplicate(raw, plan, digest=True)
        return _write_build(spark, plan, store, output, result, start)


def _write_build(spark: SparkSession, plan: Plan, store, output: str | None, result, start: float) -> Report:
    cfg = plan.cfg
    try:
        with publishing_if(spark, output, cfg.output.mode, (PROBE_PREFIX,)) as pub:
            return _write_build_part(spark, plan, store, pub, result, start)
    finally:
        result.unpersist()


def _write_build_part(spark: SparkSession, plan: Plan, store, pub: Publication | None, result, start: float) -> Report:
    cfg = plan.cfg
    table = result.sketched
    banded = table.where(~F.col(C.IS_EMPTY)).join(result.copies.select(C.NID), C.NID, "left_anti")
    bands = banded.select(F.explode(C.BANDS).alias(C.BUCKET), C.DOC_ID)
    part = ix.new_part_name(1)
    run = Runner(spark, scratch=cfg.cluster.scratch)
    with run.stage("write_index"):
        keys = None
        if result.boilerplate is not None:
            keys = result.boilerplate.select(F.col("line_key"))
        assign = result.clusters
        if result.components is not None:  # keeper linkage: each document's component too
            assign = assign.join(result.components, C.DOC_ID)
        sets = ix.sets_folder(store, part, cfg.index.set_layout)
        ix.write_part(f"{store.uri}/parts/{part}", table.select(*doc_columns(plan)), bands, assign,
                      outputs={"pairs": result.pairs}, boilerplate=keys, sets=sets)
        tables = None
        if pub is not None or cfg.output.table:
            tables = write_outputs(spark, result, cfg, pub)
        manifest = ix.next_manifest(None, plan, part, "build", result.report["counts"]["documents"],
                                    set_files=sets is not None)
        manifest["batches"] = {}
        kill_point("before_manifest")
        versions.commit(store, manifest, expected_version=0)
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
