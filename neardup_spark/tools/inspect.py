"""Look at what a run merged: a cluster's members against its keeper, with a word-level diff.

Reads a run's outputs (clusters/, pairs/ or the catalog tables report.json names, and
report.json) and the run's input
(its path, format and columns from report.json), and collects only the rows
it shows: the members of the clusters asked for (up to `max_members` each)
and their texts.

Each member is compared with its cluster's keeper: the Jaccard and the two
containments from the run's pairs/ when the run verified that very pair,
else computed here on the texts as the run normalises and shingles them
(`source` says which; a run that stripped boilerplate compared the stripped
texts, this comparison does not strip).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from neardup_spark import columns as C
from neardup_spark.config import Config, from_dict
from neardup_spark.errors import InputError
from neardup_spark.kernels.sketch import shingle_sets
from neardup_spark.runtime.publish import pending, pending_note
from neardup_spark.terminal import printable
from neardup_spark.stages.read import documents, read_input

MAX_MEMBERS = 20
CONTEXT_WORDS = 6
DIFF_CHARS = 600


@dataclass(frozen=True)
class RunOutput:
    """A finished run's output directory: its tables and the configuration it ran with."""

    path: str
    cfg: Config
    report: dict = field(default_factory=dict, repr=False)  # its report.json

    def clusters(self, spark: SparkSession) -> DataFrame:
        return self._table(spark, "clusters")

    def pairs(self, spark: SparkSession) -> DataFrame:
        return self._table(spark, "pairs")

    def _table(self, spark: SparkSession, name: str) -> DataFrame:
        """path/name, or the catalog table the run wrote it to (report.json's `tables`)."""
        table = (self.report.get("tables") or {}).get(name)
        if table is None:
            return spark.read.parquet(f"{self.path.rstrip('/')}/{name}")
        try:
            return spark.table(table)
        except Exception as exc:  # noqa: BLE001 - AnalysisException: not in this session's catalog
            raise InputError(f"the run wrote its {name} to the table {table}, which this session's catalog "
                             "does not have (a catalog that forgot it, or another session's)") from exc


def open_output(spark: SparkSession, path: str) -> RunOutput:
    """The run at `path`, from its report.json; an InputError when it is not a finished run's output."""
    root = path.rstrip("/")
    interrupted = pending(spark, path)  # a stopped run's publication: readers never move anything
    if interrupted:
        raise InputError(f"{path}: {interrupted}")
    report = None
    for where in (f"{root}/report.json", f"{root}/report"):  # report/: a remote output under Spark Connect
        try:
            report = json.loads("\n".join(r.value for r in spark.read.text(where).collect()))
            break
        except Exception:  # noqa: BLE001 - missing or unreadable: try the other, then one message
            continue
    if report is None:
        raise InputError(f"{path} holds no finished run (no readable report.json)")
    if pending_note(report):
        raise InputError(f"{path}: {pending_note(report)}")
    if "config" not in report:
        raise InputError(f"{path}/report.json has no config section; inspect reads a run's output directory")
    if report.get("mode") == "append":
        raise InputError(f"{path} is a nightly append's output (its batch only, not whole clusters); "
                         "write the index's clusters with `neardup index export` or look at a full run")
    return RunOutput(path, from_dict(report["config"]), report)


def _id_value(clusters: DataFrame, value):
    """value (from the command line: a string) as the ids' type."""
    kind = dict(clusters.dtypes)[C.DOC_ID]
    if kind in ("bigint", "int", "long", "smallint", "tinyint") and isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise InputError(f"the run's ids are integers; {value!r} is not one") from None
    return value


def cluster_of(spark: SparkSession, out: RunOutput, doc) -> object:
    """The cluster id of one document; an InputError when the run has no such document."""
    clusters = out.clusters(spark)
    doc = _id_value(clusters, doc)
    row = clusters.where(F.col(C.DOC_ID) == doc).select(C.CLUSTER_ID).limit(1).collect()
    if not row:
        raise InputError(f"no document {doc!r} in {out.path}/clusters")
    return row[0][0]


def sample_clusters(spark: SparkSession, out: RunOutput, n: int, lo: float = 0.0, hi: float = 1.0,
                    strata: int = 5, seed: int = 1) -> list:
    """Up to n cluster ids drawn across `strata` equal Jaccard bins of the run's near pairs in
    [lo, hi] (each bin gets its share; one pair per cluster), smallest Jaccard first."""
    if not 0.0 <= lo < hi <= 1.0:
        raise InputError(f"the Jaccard range must satisfy 0 <= lo < hi <= 1; got {lo}, {hi}")
    width = (hi - lo) / strata
    pairs = out.pairs(spark).where((F.col(C.MATCH) == C.MATCH_NEAR) & F.col(C.JACCARD).between(lo, hi))
    clusters = out.clusters(spark).select(F.col(C.DOC_ID).alias(C.DOC_A), C.CLUSTER_ID)
    binned = pairs.join(clusters, C.DOC_A).select(
        C.CLUSTER_ID, C.JACCARD,
        F.least(F.floor((F.col(C.JACCARD) - lo) / width), F.lit(strata - 1)).cast("int").alias("_bin"))
    per_cluster = binned.groupBy(C.CLUSTER_ID).agg(F.min(C.JACCARD).alias(C.JACCARD), F.min("_bin").alias("_bin"))
    quota = -(-n // strata)
    order = Window.partitionBy("_bin").orderBy(F.rand(seed), C.CLUSTER_ID)
    ranked = per_cluster.withColumn("_r", F.row_number().over(order))
    # Round-robin over the bins (first draw of each, then second...), so a small n still spans them.
    drawn = ranked.where(F.col("_r") <= quota).orderBy("_r", "_bin").limit(n).collect()
    return [r[C.CLUSTER_ID] for r in sorted(drawn, key=lambda r: (r[C.JACCARD], r[C.CLUSTER_ID]))]


def members(spark: SparkSession, out: RunOutput, cluster, max_members: int = MAX_MEMBERS) -> pd.DataFrame:
    """The cluster's keeper and up to max_members other members (smallest ids first), each against
    the keeper: doc_id, status, is_keeper, jaccard, containment_member, containment_keeper,
    source ("pairs" or "texts"), text, diff (word-level, against the keeper's text). The frame's
    attrs hold the cluster id, its size and its keeper."""
    clusters = out.clusters(spark)
    cluster = _id_value(clusters, cluster)
    clusters = clusters.where(F.col(C.CLUSTER_ID) == cluster)
    size = clusters.count()
    if size == 0:
        raise InputError(f"no cluster {cluster!r} in {out.path}/clusters")
    keeper_row = clusters.where(F.col(C.IS_KEEPER)).select(C.DOC_ID).collect()
    if len(keeper_row) != 1:
        raise InputError(f"cluster {cluster!r} in {out.path}/clusters has {len(keeper_row)} keepers, not one: "
                         "not a full run's clusters table")
    keeper = keeper_row[0][0]
    shown = clusters.where(~F.col(C.IS_KEEPER)).orderBy(C.DOC_ID).limit(max_members).toPandas()
    keeper_frame = clusters.where(F.col(C.IS_KEEPER)).toPandas()
    rows = pd.concat([keeper_frame, shown], ignore_index=True)
    ids = rows[C.DOC_ID].tolist()
    texts = _texts(spark, out, ids)
    rows["text"] = rows[C.DOC_ID].map(texts)
    figures = _against_keeper(spark, out, keeper, ids, texts)
    rows = rows.join(figures, on=C.DOC_ID)
    keeper_text = texts.get(keeper) or ""
    rows["diff"] = [None if d == keeper else word_diff(keeper_text, texts.get(d) or "") for d in rows[C.DOC_ID]]
    rows.attrs.update(cluster=cluster, size=size, keeper=keeper)
    return rows[[C.DOC_ID, C.STATUS, C.IS_KEEPER, "jaccard", "containment_member", "containment_keeper", "source",
                 "text", "diff"]]


def _texts(spark: SparkSession, out: RunOutput, ids: list) -> dict:
    """{doc id: raw text} of these documents, read from the run's input."""
    docs = documents(read_input(spark, out.cfg), out.cfg)
    got = docs.where(F.col(C.DOC_ID).isin(ids)).select(C.DOC_ID, C.TEXT).collect()
    return {r[0]: r[1] for r in got}


def _against_keeper(spark: SparkSession, out: RunOutput, keeper, ids: list, texts: dict) -> pd.DataFrame:
    """jaccard, containment_member, containment_keeper, source per doc id, against the keeper."""
    others = [d for d in ids if d != keeper]
    pairs = out.pairs(spark).where(
        ((F.col(C.DOC_A) == keeper) & F.col(C.DOC_B).isin(others))
        | ((F.col(C.DOC_B) == keeper) & F.col(C.DOC_A).isin(others))).collect()
    found = {}
    for p in pairs:
        if p[C.DOC_A] == keeper:
            found[p[C.DOC_B]] = (p[C.JACCARD], p[C.CONTAINMENT_B], p[C.CONTAINMENT_A])
        else:
            found[p[C.DOC_A]] = (p[C.JACCARD], p[C.CONTAINMENT_A], p[C.CONTAINMENT_B])
    cfg = out.cfg
    sets = shingle_sets([texts.get(d) or "" for d in ids], cfg.normalise, cfg.shingle.unit, cfg.shingle.k,
                        cfg.minhash.seed)
    by_id = dict(zip(ids, sets))
    rows = []
    for d in ids:
        if d == keeper:
            rows.append((d, 1.0, 1.0, 1.0, "keeper"))
        elif d in found:
            rows.append((d, *found[d], "pairs"))
        else:
            rows.append((d, *set_figures(by_id[d], by_id[keeper]), "texts"))
    return pd.DataFrame(rows, columns=[C.DOC_ID, "jaccard", "containment_member", "containment_keeper",
                                       "source"]).set_index(C.DOC_ID)


def set_figures(member: np.ndarray, keeper: np.ndarray) -> tuple[float, float, float]:
    """(Jaccard, |M n K| / |M|, |M n K| / |K|) of two shingle sets (0 for an empty one)."""
    inter = int(np.intersect1d(member, keeper, assume_unique=True).size)
    union = int(member.size + keeper.size - inter)
    return (inter / union if union else 0.0, inter / member.size if member.size else 0.0,
            inter / keeper.size if keeper.size else 0.0)


def word_diff(old: str, new: str, context: int = CONTEXT_WORDS, max_chars: int = DIFF_CHARS) -> str:
    """A word-level diff of new against old: [-removed-] {+added+}, with `context` words around
    each change and " ... " between far-apart changes; "(same words)" when only spacing or
    nothing differs."""
    a, b = old.split(), new.split()
    ops = [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op[0] != "equal"]
    parts: list[str] = []
    last = 0  # the words of `new` shown so far
    for k, (_, i1, i2, j1, j2) in enumerate(ops):
        start = max(last, j1 - context)
        if start > last:
            parts.append("...")
        parts += b[start:j1]
        if i2 > i1:
            parts.append("[-" + " ".join(a[i1:i2]) + "-]")
        if j2 > j1:
            parts.append("{+" + " ".join(b[j1:j2]) + "+}")
        following = ops[k + 1][3] if k + 1 < len(ops) else len(b)
        stop = following if following - j2 <= 2 * context else min(len(b), j2 + context)
        parts += b[j2:stop]
        last = stop
    if not parts:
        return "(same words)"
    if last < len(b):
        parts.append("...")
    text = " ".join(parts)
    return text if len(text) <= max_chars else text[: max_chars - 4].rstrip() + " ..."


def format_cluster(rows: pd.DataFrame, text_chars: int = 160) -> str:
    """`members` as text: a header, the keeper's opening, then each member's figures and diff.
    Every value from the data is shown `printable` (a document cannot drive the terminal)."""
    attrs = rows.attrs
    shown = len(rows) - 1
    lines = [f"cluster {printable(attrs['cluster'])}: {attrs['size']} documents, keeper {printable(attrs['keeper'])}"
             + (f" (showing {shown} of {attrs['size'] - 1} others)" if shown < attrs["size"] - 1 else "")]
    for r in rows.itertuples(index=False):
        if r.is_keeper:
            lines.append(f"  keeper {printable(r.doc_id)}: {printable(opening(r.text, text_chars))}")
            continue
        lines.append(f"  {r.status} {printable(r.doc_id)}: jaccard {r.jaccard:.3f}, containment "
                     f"{r.containment_member:.3f} of it in the keeper, {r.containment_keeper:.3f} of the keeper in it "
                     f"({'verified pair' if r.source == 'pairs' else 'computed on the texts'})")
        lines.append(f"      {printable(r.diff)}")
    return "\n".join(lines)


def opening(text: str | None, n: int) -> str:
    """The text's first n characters, whitespace collapsed ("…" where it was cut)."""
    if text is None:
        return "(no text)"
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1].rstrip() + "…"
