"""The stages chained: documents in, verified clusters and keepers out.

`deduplicate(raw, plan)` chains the stages over a DataFrame with a resolved
plan (see `neardup_spark.plan`); `neardup_spark.api` calls it for the library,
the CLI and the spark-submit job. The nightly append (`archive.append`) runs
the same chain (`prepared` pieces, then `match`) with its archive index as an
extra candidate source and verification side (`Archive`).

A `Runner` (`runtime.runner`) names, times, materialises and counts the stage
boundaries: each is materialised once because later stages read it more than
once, and that one count is also the report's figure.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Protocol

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf

from neardup_spark import columns as C
from neardup_spark.columns import TEXT_DIGEST
from neardup_spark.config import Config, to_dict
from neardup_spark.kernels import lsh as lsh_kernel
from neardup_spark.plan import Plan
from neardup_spark.runtime.parallel import in_background
from neardup_spark.runtime.report import Report
from neardup_spark.runtime import sizing
from neardup_spark.runtime.runner import KEEP, LOCAL, Runner
from neardup_spark.stages import boilerplate
from neardup_spark.stages import containment
from neardup_spark.stages.banding import representatives
from neardup_spark.stages.candidates import representative_pairs
from neardup_spark.stages.linkage import keeper_stars
from neardup_spark.stages.components import connected_components
from neardup_spark.stages.exact import exact_copies, exact_edges, text_digest
from neardup_spark.stages.keepers import TEXT_LEN, choose_keepers, keeper_columns, keeper_inputs, keeper_rows
from neardup_spark.stages.read import check_documents, documents, drop_bookkeeping, internal_id, spread
from neardup_spark.stages.sketch import Stripping, sketch
from neardup_spark.stages.verify import verify
from neardup_spark.version import __version__

CLUSTER_COLUMNS = (C.DOC_ID, C.CLUSTER_ID, C.IS_KEEPER, C.KEEPER_ID, C.STATUS)
_SIZE = "_size"
_ADOC = C.ADOC


@dataclass
class DedupResult:
    """What a run produced. DataFrames are kept (persisted, or scratch tables with
    cluster.scratch); call `unpersist()` when done."""

    clusters: DataFrame  # doc_id, cluster_id, is_keeper, keeper_id, status
    pairs: DataFrame  # doc_a, doc_b, jaccard, containment_a, containment_b
    deduplicated: DataFrame  # the keepers' original rows
    report: Report
    boilerplate: DataFrame | None = None  # line_key, documents, example: the stripped lines (when enabled)
    sketched: DataFrame | None = field(default=None, repr=False)  # per-document sketch table (internal ids)
    copies: DataFrame | None = field(default=None, repr=False)  # _nid, exact_rep of exact copies
    # keeper linkage: doc_id, component_id (the smallest doc_id of its component of verified pairs)
    components: DataFrame | None = field(default=None, repr=False)
    _runner: Runner | None = field(default=None, repr=False)  # holds what the frames read

    def unpersist(self) -> None:
        """Release what the frames read (cached blocks, checkpoints, scratch tables): they are
        not to be read afterwards."""
        if self._runner is not None:
            self._runner.release()


@dataclass
class Prepared:
    """Documents read, checked, stripped of boilerplate (when enabled) and sketched."""

    docs: DataFrame  # _nid, doc_id, text, metadata: checked, as read (before stripping)
    table: DataFrame  # per document: _nid, doc_id, exact_hash, shingles, bands, is_empty, keeper inputs
    boilerplate: dict  # the report's "boilerplate" section
    lines: boilerplate.Boilerplate | None  # the stripped lines (when enabled)
    run: Runner
    set_bytes: float | None = None  # mean stored shingle set, bytes (sizes verify's partitions)

    @property
    def counts(self) -> dict[str, int]:
        return self.run.counts

    def release(self) -> None:
        """Unpersist every frame the run kept."""
        self.run.release()


class Archive(Protocol):
    """An extra candidate source and verification side for `match`: the archive index of a
    nightly append (`archive.append`). Archived documents are named by their doc id (`_adoc`)."""

    def exact(self, hashes: DataFrame) -> DataFrame:
        """hashes(_nid, exact_hash) of representatives -> (_nid, _adoc): the smallest archived
        id with the same text, for those that have one."""

    def hits(self, banded: DataFrame, rows: int, limit: int) -> DataFrame:
        """banded(_nid, bucket) (`rows` rows) -> distinct (_nid, _adoc): up to `limit` archived
        documents per row's bucket, smallest ids first."""

    def sets(self, met: DataFrame, rows: int, columns: list[str]) -> DataFrame:
        """met(_adoc, _nid) (`rows` rows) -> (_nid, shingles, *columns) of those archived documents."""


@dataclass(frozen=True)
class Matches:
    """What `match` found: exact copies and verified pairs (internal ids), and with an archive,
    the archived documents met (negative internal ids in this run's graph)."""

    copies: DataFrame  # _nid, exact_rep: exact copies within the input and their representative
    near: DataFrame  # verified pairs: doc_a, doc_b, jaccard, containment_a, containment_b, match
    met: DataFrame | None = None  # archive: _adoc, _nid (negative) of the archived documents met
    links: DataFrame | None = None  # archive: exact_rep (a met _nid), _nid: copies of archived texts
    banded: DataFrame | None = None  # archive: _nid, bucket rows of the representatives looked up

    @property
    def edges(self) -> DataFrame:
        """Every edge of the graph: verified pairs and exact copies (of input or archived texts)."""
        edges = self.near.unionByName(exact_edges(self.copies))
        return edges if self.links is None else edges.unionByName(exact_edges(self.links))


@dataclass
class Verified:
    """Everything up to verified pairs: what `deduplicate` clusters and `calibrate` samples."""

    prep: Prepared
    found: Matches

    @property
    def copies(self) -> DataFrame:
        return self.found.copies

    @property
    def edges(self) -> DataFrame:
        return self.found.edges


def prepared(raw: DataFrame, plan: Plan, run: Runner | None = None, digest: bool = False,
             sample_docs: int | None = None, seed: int = 1) -> Prepared:
    """Read and check, strip boilerplate (when enabled), sketch.

    Raises InputError before heavy work for missing columns, wrong types,
    malformed JSON, null or duplicate ids. `digest` adds each raw text's
    MD5 (`text_digest`), which the archive index keeps. With `sample_docs`,
    only a random sample of about that many documents is sketched (after
    boilerplate is found on all of them); counts["sampled_documents"] says how many.
    """
    cfg = plan.cfg
    run = run or Runner(raw.sparkSession, scratch=cfg.cluster.scratch)
    docs = checked_documents(raw, cfg, run)
    n_docs = run.counts["documents"]
    found = None
    if cfg.boilerplate.enabled:
        with run.stage("boilerplate"):
            found = boilerplate.find(docs, cfg.boilerplate, cfg.normalise, n_docs, cfg.minhash.seed)
    strip = Stripping(found.keys, cfg.boilerplate.unit) if found is not None else None
    if sample_docs is None:
        table, row = sketched(docs, plan, run, strip, digest)
    else:
        fraction = min(1.0, 1.2 * sample_docs / max(n_docs, 1) + 1e-6)
        table, row = sketched(docs.sample(fraction=fraction, seed=seed), plan, run, strip, digest, sampled=True)
    set_bytes = float(row["set_bytes"] or 0) / max(int(row["n"]) - run.counts["empty"], 1)
    return Prepared(docs, table, _boilerplate_report(cfg, found, row), found, run, set_bytes)


def checked_documents(raw: DataFrame, cfg: Config, run: Runner) -> DataFrame:
    """documents(raw), checked (counts["documents"]), with their internal ids (`_nid`),
    spread over the cores."""
    with run.stage("read"):
        docs = documents(raw, cfg)
        warming = warm_python_workers(raw.sparkSession)  # not waited for: the next Pandas UDF waits if it must
        try:
            run.counts["documents"], salt = check_documents(docs)
        except Exception:
            # Bad input ends the run here; stopping the session under the warm-up job
            # would print its killed task's stack traces after the one-line error.
            warming.join(timeout=60)
            raise
        spread_docs = spread(drop_bookkeeping(docs), cfg)
        return spread_docs.withColumn(C.NID, internal_id(F.col(C.DOC_ID), salt))


def sketched(docs: DataFrame, plan: Plan, run: Runner, strip: Stripping | None = None,
             digest: bool = False, expected: int | None = None, sampled: bool = False):
    """(the kept sketch table, its summary row) for checked documents (with their
    `_nid`, see `checked_documents`); counts["empty"].

    With `digest`, an existing text_digest column is kept, else computed."""
    counts = run.counts
    with run.stage("sketch"):
        # Internal ids (from checked_documents): every later shuffle moves 8-byte longs,
        # whatever the users' ids are (URLs run to 100 bytes).
        extra = []
        if digest:
            extra = [F.col(TEXT_DIGEST) if TEXT_DIGEST in docs.columns else text_digest(F.col(C.TEXT)).alias(TEXT_DIGEST)]
        slim = docs.select(C.NID, C.DOC_ID, C.TEXT, *keeper_inputs(docs, plan.keeper), *extra)
        table = run.keep(sketch(slim, plan.cfg, plan.matcher, strip))
        aggs = [F.count(F.lit(1)).alias("n"), F.sum(F.col(C.IS_EMPTY).cast("long")).alias("empty"),
                F.sum(F.length(C.SHINGLES)).alias("set_bytes")]
        if strip is not None:
            aggs += [F.sum(C.STRIPPED).alias("segments"), F.sum((F.col(C.STRIPPED) > 0).cast("long")).alias("docs")]
        row = table.agg(*aggs).first()
        counts["empty"] = int(row["empty"] or 0)
        if sampled:
            counts["sampled_documents"] = int(row["n"])
        want = counts["documents"] if expected is None else expected
        if not sampled and int(row["n"]) != want:  # pragma: no cover - an invariant, not an input error
            raise AssertionError(f"{row['n']} sketched rows for {want} documents")
    return table, row


def match(table: DataFrame, plan: Plan, run: Runner, set_bytes: float | None = None,
          archive: Archive | None = None) -> Matches:
    """The exact pass, candidates and verification over a sketch table; with an `archive`,
    also against it (an extra candidate source and an extra side of verification).

    counts: exact_duplicates, candidate_pairs, verified_pairs; with an archive also
    exact_archive_matches and archived_documents_met."""
    cfg, m, counts = plan.cfg, plan.matcher, run.counts
    links = met = banded = None
    with run.stage("exact"):
        copies, _ = run.counted(exact_copies(table), "exact_duplicates")
        reps = representatives(table, copies, counts["exact_duplicates"])
        if archive is not None:
            # A representative with an archived copy is that copy's: it is not looked up again.
            links, _ = run.counted(archive.exact(reps.select(C.NID, C.EXACT_HASH)), "exact_archive_matches")
            reps = reps.join(links.select(C.NID), C.NID, "left_anti")

    with run.stage("band_candidates"):
        if m.kind == "containment":
            cands = containment.candidates(table, copies, m.bucket_limit)
        elif archive is None:
            cands = representative_pairs(reps, m.bucket_limit, m.keys_per_doc)
        else:
            banded, rows = run.counted(reps.select(C.NID, F.explode(C.BANDS).alias(C.BUCKET)))
            against = run.keep(archive.hits(banded, rows, m.bucket_limit))
            # The archived documents met get negative internal ids in this run's graph.
            met = against.select(_ADOC).unionByName(links.select(_ADOC)).distinct()
            met, _ = run.counted(met.withColumn(C.NID, -1 - F.monotonically_increasing_id()),
                                 "archived_documents_met")
            across = against.join(met.select(_ADOC, F.col(C.NID).alias(C.DOC_A)), _ADOC).select(
                C.DOC_A, F.col(C.NID).alias(C.DOC_B))
            # The batch's own pairs as a full run finds them (grouped keys in local mode), not from
            # the exploded rows kept for the probe: one row per document and partition to shuffle.
            cands = representative_pairs(reps, m.bucket_limit, m.keys_per_doc).unionByName(across)
        cands, n_cands = run.counted(cands, "candidate_pairs")

    with run.stage("verify"):
        sets = table
        if archive is not None:
            prints = m.simhash.columns if m.simhash is not None else []
            sets = table.select(C.NID, C.SHINGLES, *prints).unionByName(
                archive.sets(met, counts["archived_documents_met"], prints))
            links = links.join(met.select(_ADOC, F.col(C.NID).alias(C.EXACT_REP)), _ADOC).select(C.EXACT_REP, C.NID)
        # Cut from verify's plan by a local checkpoint (cluster.checkpoint = "local") and the
        # candidates dropped: the shuffles behind both (tens of GB of local disk at 10M
        # documents) can go now. Otherwise persisted, so a lost executor's blocks are
        # recomputed (a reliable checkpoint would compute verify twice and outlive the run).
        local = run.cut or cfg.cluster.checkpoint == LOCAL
        near, _ = run.counted(verify(cands, cfg, sets, n_cands, set_bytes), "verified_pairs",
                              how=LOCAL if local else KEEP)
        run.drop(cands)
    return Matches(copies, near, met, links, banded)


def verified(raw: DataFrame, plan: Plan, run: Runner | None = None, digest: bool = False) -> Verified:
    """`prepared`, then `match`: the exact pass, candidates and exact verification."""
    prep = prepared(raw, plan, run, digest)
    found = match(prep.table, plan, prep.run, prep.set_bytes)
    counts = prep.counts
    counts["signed_documents"] = counts["documents"] - counts["empty"] - counts["exact_duplicates"]
    return Verified(prep, found)


def deduplicate(raw: DataFrame, plan: Plan, digest: bool = False) -> DedupResult:
    """Find near-duplicates in `raw` (with the columns plan.cfg.input names) and pick keepers.

    Raises InputError before heavy work for missing columns, wrong types,
    malformed JSON, null or duplicate ids.
    """
    run = Runner(raw.sparkSession, scratch=plan.cfg.cluster.scratch)
    with run.released_on_error():
        return _deduplicated(raw, plan, run, digest)


def _deduplicated(raw: DataFrame, plan: Plan, run: Runner, digest: bool) -> DedupResult:
    cfg = plan.cfg
    notes = in_background(lambda: plan.advice)  # pure Python: computed while Spark works
    v = verified(raw, plan, run, digest)
    table, counts, edges = v.prep.table, run.counts, v.edges

    index = table.select(C.NID, C.DOC_ID, C.IS_EMPTY, C.EXACT_HASH, TEXT_LEN, *keeper_columns(plan.keeper))
    with run.stage("components"):
        components = None
        if cfg.cluster.linkage == "keeper":
            components = run.keep(connected_components(edges, cfg, run.work, run.scratch), now=True)
            comps = keeper_stars(edges, index, plan, run, components=components)
        else:
            # It iterates with its own actions; read once below.
            comps = connected_components(edges, cfg, run.work, run.scratch)

    with run.stage("keepers"):
        chosen = run.keep(choose_keepers(index, plan.keeper, comps, keep=[C.NID, C.EXACT_HASH], size_as=_SIZE))
        clusters = chosen.select(*CLUSTER_COLUMNS)
        row = chosen.agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(F.col(C.IS_KEEPER).cast("long")).alias("keepers"),
            F.countDistinct(F.when(F.col(C.STATUS).isin(C.KEEPER), F.col(C.CLUSTER_ID))).alias("dup_clusters"),
            F.max(_SIZE).alias("largest"),
            F.sum((F.col(C.STATUS) == F.lit(C.EXACT_DUPLICATE)).cast("long")).alias("copies"),
        ).first()
        keepers = int(row["keepers"] or 0)  # a sum over no rows (an empty input) is null
        counts["clusters"] = keepers
        counts["clusters_with_duplicates"] = int(row["dup_clusters"])
        counts["removed"] = int(row["n"]) - keepers
        counts["largest_cluster"] = int(row["largest"] or 0)
        counts["removed_verified_against_keeper"] = int(row["copies"] or 0) + verified_with_keeper(chosen, edges)
        if int(row["n"]) != counts["documents"]:  # pragma: no cover - an invariant, not an input error
            raise AssertionError(f"{row['n']} cluster rows for {counts['documents']} documents")

    advice = notes.result()
    lsh = plan.matcher.lsh
    if plan.matcher.kind == "minhash" and cfg.match.mode == "jaccard" and lsh.p_at_threshold < lsh_kernel.TARGET_CATCH:
        advice = lsh_kernel.advice(plan.matcher.lsh, cfg.lsh.far_fraction, cfg.lsh.max_far_probability,
                                   caught(v.found.near, plan.matcher.lsh))
    report = run.report(
        neardup_spark_version=__version__,
        spark_version=raw.sparkSession.version,
        sizing=sizing.describe(raw.sparkSession).as_dict(),
        lsh=lsh_report(plan),
        advice=advice,
        boilerplate=v.prep.boilerplate,
        config=to_dict(cfg),
    )
    pairs = with_doc_ids(edges, index.select(C.NID, C.DOC_ID))
    dedup = keeper_rows(raw, cfg.input.id_col, clusters, counts["clusters"], counts["removed"])
    if components is not None:
        components = component_ids(index, components)
    lines = boilerplate.lines_frame(raw.sparkSession, v.prep.lines) if v.prep.lines is not None else None
    return DedupResult(clusters, pairs, dedup, report, lines, table, v.copies, components, run)


def caught(near: DataFrame, lsh) -> lsh_kernel.Caught:
    """near(jaccard) verified pairs + the run's LSH -> what they say about the pairs it missed
    (`kernels.lsh.Caught`), in one aggregation."""
    s = F.col(C.JACCARD)
    p = F.lit(1.0) - F.pow(F.lit(1.0) - F.pow(s, F.lit(float(lsh.rows))), F.lit(float(lsh.bands)))
    # p rounds to 0 only far below any threshold a banding is chosen for: such a pair is left out.
    row = near.agg(F.count(F.lit(1)).alias("n"),
                   F.sum(F.when(s < F.lit(lsh.threshold + lsh_kernel.NEAR), 1).otherwise(0)).alias("near"),
                   F.sum(F.when(p > 0, (F.lit(1.0) - p) / p)).alias("missed")).first()
    return lsh_kernel.Caught(int(row["n"]), int(row["near"] or 0), float(row["missed"] or 0.0))


def verified_with_keeper(chosen: DataFrame, edges: DataFrame) -> int:
    """chosen(_nid, doc_id, exact_hash, cluster_id, keeper_id, status) + edges(doc_a, doc_b) of
    internal ids -> how many `duplicate` documents have a text with a verified pair (or an exact
    copy of one) to their keeper's text in their cluster: texts, not ids, since pairs join the
    first copy of each text (with keeper linkage: all of them; with components, those a chain
    did not carry away from their keeper)."""
    text = chosen.select(C.NID, C.CLUSTER_ID, C.EXACT_HASH)
    a = text.select(F.col(C.NID).alias(C.DOC_A), F.col(C.CLUSTER_ID).alias("_c"), F.col(C.EXACT_HASH).alias("_ha"))
    b = text.select(F.col(C.NID).alias(C.DOC_B), F.col(C.CLUSTER_ID).alias("_cb"), F.col(C.EXACT_HASH).alias("_hb"))
    linked = edges.select(C.DOC_A, C.DOC_B).join(a, C.DOC_A).join(b, C.DOC_B).where(F.col("_c") == F.col("_cb"))
    kept = chosen.where(F.col(C.IS_KEEPER)).select(F.col(C.CLUSTER_ID).alias("_c"), F.col(C.EXACT_HASH).alias("_k"))
    linked = linked.join(kept, "_c")
    # The text at the other end of each pair that touches the keeper's text.
    other = F.when(F.col("_ha") == F.col("_k"), F.col("_hb")).otherwise(F.col("_ha"))
    texts = linked.where((F.col("_ha") == F.col("_k")) | (F.col("_hb") == F.col("_k"))).select(
        F.col("_c").alias(C.CLUSTER_ID), other.alias(C.EXACT_HASH)).distinct()
    removed = chosen.where(F.col(C.STATUS) == F.lit(C.DUPLICATE))
    return removed.join(texts, [C.CLUSTER_ID, C.EXACT_HASH], "left_semi").count()


def component_ids(index: DataFrame, components: DataFrame) -> DataFrame:
    """index(_nid, doc_id) + components(doc_id, cluster_id) of internal ids -> (doc_id, component_id)
    of every document: the smallest doc_id of its component (its own outside any)."""
    comps = components.select(F.col(C.DOC_ID).alias(C.NID), F.col(C.CLUSTER_ID).alias("_c"))
    grouped = index.select(C.NID, C.DOC_ID).join(comps, C.NID, "left").withColumn(
        "_c", F.coalesce(F.col("_c"), F.col(C.NID)))
    return grouped.select(C.DOC_ID, F.min(C.DOC_ID).over(Window.partitionBy("_c")).alias(C.COMPONENT_ID))


def lsh_report(plan: Plan) -> dict:
    """The report's `lsh` section: the matcher's parameters."""
    cfg, m = plan.cfg, plan.matcher
    if m.simhash is not None:
        return m.simhash.as_dict()
    if m.kind == "containment":
        return {"mode": "containment", "containment_threshold": cfg.match.containment_threshold,
                "num_perm": cfg.minhash.num_perm, "size_classes": [c.as_dict() for c in m.classes]}
    return m.lsh.as_dict()


def _boilerplate_report(cfg: Config, found: boilerplate.Boilerplate | None, sketched) -> dict:
    """What stripping did: the rule, the lines found, and what they removed."""
    out: dict = {"enabled": cfg.boilerplate.enabled}
    if found is not None:
        out.update(
            unit=cfg.boilerplate.unit,
            min_documents=found.min_documents,
            lines=len(found.keys),
            stripped_segments=int(sketched["segments"] or 0),
            documents_stripped=int(sketched["docs"] or 0),
        )
    return out


_WARMING: "weakref.WeakKeyDictionary[SparkSession, threading.Thread]" = weakref.WeakKeyDictionary()


def warm_python_workers(spark: SparkSession) -> threading.Thread:
    """Start Spark's Python workers while the JVM reads and checks the input.

    The first Pandas UDF of a session pays for starting the worker daemon and
    importing pandas and pyarrow (~3.6 s in local mode here); a one-row job in
    a background thread overlaps that with the input checks. One partition,
    so one task: the daemon it starts forks every later worker with the
    imports done, and the other cores stay free for the checks (a task per
    core held them all: 100k read stage 3.5-3.9 -> 2.7-3.0 s). Failures are
    left to the sketch stage, which reports them properly. Once per session:
    a later call returns the first call's thread (`run` starts it before it
    reads the input, `checked_documents` for a DataFrame passed in).
    """
    started = _WARMING.get(spark)
    if started is not None:
        return started

    def run() -> None:
        try:
            noop = pandas_udf(lambda s: s, "long")
            spark.range(0, 1, 1, 1).select(noop("id")).collect()
        except Exception:  # pragma: no cover - the sketch stage will fail loudly instead
            pass

    thread = threading.Thread(target=run, name="neardup-warm-workers", daemon=True)
    _WARMING[spark] = thread
    thread.start()
    return thread


def with_doc_ids(pairs: DataFrame, ids: DataFrame) -> DataFrame:
    """Pairs of internal ids -> the output pairs table: doc ids, doc_a < doc_b."""
    a = ids.select(F.col(C.NID).alias("_a"), F.col(C.DOC_ID).alias("_ida"))
    b = ids.select(F.col(C.NID).alias("_b"), F.col(C.DOC_ID).alias("_idb"))
    named = pairs.join(a, F.col(C.DOC_A) == F.col("_a")).join(b, F.col(C.DOC_B) == F.col("_b"))
    swap = F.col("_ida") > F.col("_idb")
    return named.select(
        F.when(swap, F.col("_idb")).otherwise(F.col("_ida")).alias(C.DOC_A),
        F.when(swap, F.col("_ida")).otherwise(F.col("_idb")).alias(C.DOC_B),
        C.JACCARD,
        F.when(swap, F.col(C.CONTAINMENT_B)).otherwise(F.col(C.CONTAINMENT_A)).alias(C.CONTAINMENT_A),
        F.when(swap, F.col(C.CONTAINMENT_A)).otherwise(F.col(C.CONTAINMENT_B)).alias(C.CONTAINMENT_B),
        C.MATCH,
    )
