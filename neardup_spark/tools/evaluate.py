"""Scoring clusters against labels: pair precision, recall, F1, adjusted Rand index, recall per edit type.

Pair metrics count document pairs that share a cluster (predicted) and pairs
that share a label (true), from the contingency table of (cluster, label)
cell sizes, so nothing quadratic is ever listed.

* `score(clusters, labels)`: in Spark, for runs of any size (`neardup evaluate`);
  only scalars and one row per edit type reach the driver.
* `pair_scores`, `recall_by_edit`: the same on pandas frames that fit on the
  driver (benchmarks).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.errors import InputError


def _pairs(n: pd.Series) -> int:
    return int((n * (n - 1) // 2).sum())


@dataclass(frozen=True)
class PairScores:
    true_pairs: int
    predicted_pairs: int
    correct_pairs: int

    @property
    def precision(self) -> float:
        return self.correct_pairs / self.predicted_pairs if self.predicted_pairs else 1.0

    @property
    def recall(self) -> float:
        return self.correct_pairs / self.true_pairs if self.true_pairs else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def as_dict(self) -> dict:
        return {
            "true_pairs": self.true_pairs,
            "predicted_pairs": self.predicted_pairs,
            "correct_pairs": self.correct_pairs,
            "precision": round(self.precision, 6),
            "recall": round(self.recall, 6),
            "f1": round(self.f1, 6),
        }


def pair_scores(cluster_of: pd.Series, label_of: pd.Series) -> PairScores:
    """cluster_of and label_of: Series indexed by document id (same ids)."""
    frame = pd.DataFrame({"c": cluster_of, "l": label_of.reindex(cluster_of.index)})
    if frame["l"].isna().any():
        raise ValueError("every clustered document needs a label")
    return PairScores(
        true_pairs=_pairs(frame.groupby("l").size()),
        predicted_pairs=_pairs(frame.groupby("c").size()),
        correct_pairs=_pairs(frame.groupby(["c", "l"]).size()),
    )


def recall_by_edit(cluster_of: pd.Series, labels: pd.DataFrame, original: str = "original") -> pd.DataFrame:
    """Per edit type: the share of edited copies that landed in their original's cluster.

    labels: indexed by document id, with columns `group` and `edit`; each group
    with edits has exactly one row whose edit is `original`.
    """
    df = labels.assign(cluster=cluster_of.reindex(labels.index))
    origin = df[df["edit"] == original].set_index("group")["cluster"]
    edited = df[(df["edit"] != original) & df["group"].isin(origin.index)]
    found = edited["cluster"].to_numpy() == origin.reindex(edited["group"]).to_numpy()
    out = edited.assign(found=found).groupby("edit")["found"].agg(["count", "sum"])
    out["recall"] = out["sum"] / out["count"]
    return out.rename(columns={"count": "copies", "sum": "found"})


def adjusted_rand_index(scores: PairScores, n: int) -> float:
    """Hubert & Arabie's adjusted Rand index of n documents from their pair counts.

    index = correct pairs, expected = predicted * true / C(n, 2), max = (predicted
    + true) / 2. Exact integer arithmetic, one division at the end; 1.0 when
    max == expected, which happens only when both sides are all singletons or
    both are one cluster.
    """
    total = n * (n - 1) // 2
    num = 2 * (scores.correct_pairs * total - scores.predicted_pairs * scores.true_pairs)
    den = (scores.predicted_pairs + scores.true_pairs) * total - 2 * scores.predicted_pairs * scores.true_pairs
    return num / den if den else 1.0


# Internal column names; the inputs' own columns are renamed to these at once.
_ID, _CLUSTER, _LABEL, _SOLO, _EDIT = "_id", "_cluster", "_label", "_solo", "_edit"
_IN_C, _IN_L, _N = "_in_clusters", "_in_labels", "_n"
_INT_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
# More distinct edit values than this means edit_col is not an edit type.
MAX_EDITS = 1000


def score(
    clusters: DataFrame,
    labels: DataFrame,
    *,
    id_col: str = "doc_id",
    cluster_col: str = "cluster_id",
    label_col: str = "group",
    edit_col: str | None = None,
    original: str = "original",
) -> dict:
    """Score a run's clusters against labels, in Spark; returns a JSON-serialisable dict.

    clusters(id_col, cluster_col): one row per document (a run's clusters/).
    labels(id_col, label_col[, edit_col]): one row per document, the same ids.
    A document whose label is null is a group of its own. Integer ids of any
    width match; otherwise the id types must be equal.

    Returns {"documents", "clusters", "groups", "pairs": PairScores.as_dict(),
    "adjusted_rand_index", "by_edit"}; "by_edit" only with edit_col, keyed by
    edit value (as a string; null edits are left out), each entry:

    * documents: documents with that edit;
    * copies, found, recall: of the documents whose group has an `original`
      row (not counting that row), how many share its cluster; recall is
      found / copies, null when copies == 0 (and for `original` itself);
    * skipped: documents whose group has no `original` row (so not scored);
    * false_merges: documents in a cluster that also holds another group.

    Raises InputError (one line, counts and an example) for missing columns,
    mismatched id types, null or duplicate ids, ids in only one input, null
    cluster ids, or a group with more than one `original` row.
    """
    id_c, id_l = _check_columns(clusters, labels, id_col, cluster_col, label_col, edit_col)
    # Cached for the call: one row per id, read by every sum and by the per-edit
    # job; without it each branch re-reads and re-shuffles both inputs.
    # A session that cannot cache (Databricks serverless) computes it for each job instead.
    docs = _documents(clusters, labels, id_c, id_l, cluster_col, label_col, edit_col)
    try:
        docs = docs.persist()
    except Exception:  # noqa: BLE001 - refused: the same figures, computed more than once
        return _score(docs, edit_col, original)
    try:
        return _score(docs, edit_col, original)
    finally:
        docs.unpersist()


def _score(docs: DataFrame, edit_col: str | None, original: str) -> dict:
    """score() on the per-id rows of _documents (cached)."""
    valid = docs.where(F.col(_ID).isNotNull() & (F.col(_IN_C) == 1) & (F.col(_IN_L) == 1))
    # The contingency table's cells, summed per cluster (row sums and the cells'
    # own pairs) and per group (column sums); one job computes the checks and all sums.
    cells = valid.groupBy(_CLUSTER, _LABEL, _SOLO).agg(F.count(F.lit(1)).alias(_N))
    per_cluster = cells.groupBy(_CLUSTER).agg(
        F.sum(_N).alias(_N), F.count(F.lit(1)).alias("_groups"), _twice_pairs(_N).alias("_correct2")
    )
    per_group = valid.groupBy(_LABEL, _SOLO).agg(F.count(F.lit(1)).alias(_N))
    parts = [
        _checks(docs),
        per_cluster.agg(
            F.sum(_N).alias("n"),
            F.count(F.lit(1)).alias("clusters"),
            _twice_pairs(_N).alias("predicted2"),
            F.sum("_correct2").alias("correct2"),
        ),
        per_group.agg(F.count(F.lit(1)).alias("groups"), _twice_pairs(_N).alias("true2")),
    ]
    origins = _origins(valid, original) if edit_col is not None else None
    if origins is not None:
        parts.append(
            origins.agg(
                F.sum((F.col("_originals") > 1).cast("long")).alias("multi_original"),
                F.min(F.when(F.col("_originals") > 1, F.col(_LABEL).cast("string"))).alias("multi_original_eg"),
            )
        )
    query = parts[0]
    for part in parts[1:]:
        query = query.crossJoin(part)
    row = query.first().asDict()
    _raise_problems(row, edit_col, original)

    n = int(row["n"] or 0)
    pairs = PairScores(
        true_pairs=int(row["true2"] or 0) // 2,
        predicted_pairs=int(row["predicted2"] or 0) // 2,
        correct_pairs=int(row["correct2"] or 0) // 2,
    )
    out = {
        "documents": n,
        "clusters": int(row["clusters"]),
        "groups": int(row["groups"]),
        "pairs": pairs.as_dict(),
        "adjusted_rand_index": round(adjusted_rand_index(pairs, n), 6),
    }
    if origins is not None:
        out["by_edit"] = _by_edit(valid, per_cluster, origins, original)
    return out


def _check_columns(clusters, labels, id_col, cluster_col, label_col, edit_col) -> tuple[Column, Column]:
    """The id column of each input, as comparable types; InputError for missing columns or mismatched ids."""
    for name, df, needed in (
        ("clusters", clusters, [id_col, cluster_col]),
        ("labels", labels, [id_col, label_col] + ([edit_col] if edit_col else [])),
    ):
        missing = [c for c in needed if c not in df.columns]
        if missing:
            raise InputError(f"{name} have no column(s) {', '.join(missing)}; they have: {', '.join(df.columns)}")
    ct, lt = clusters.schema[id_col].dataType, labels.schema[id_col].dataType
    if isinstance(ct, _INT_TYPES) and isinstance(lt, _INT_TYPES):
        return F.col(id_col).cast("long"), F.col(id_col).cast("long")
    if ct != lt:
        raise InputError(
            f"id column {id_col!r} is {ct.simpleString()} in the clusters but {lt.simpleString()} in the labels; "
            "cast one side"
        )
    return F.col(id_col), F.col(id_col)


def _documents(clusters, labels, id_c, id_l, cluster_col, label_col, edit_col) -> DataFrame:
    """One row per id seen in either input: _id, _in_clusters and _in_labels (row counts), _cluster,
    _label, _solo (the id when the label is null, so such a document is a group of its own), _edit.

    A union and one groupBy rather than a join, so duplicate ids are counted, not multiplied.
    """
    ct, lt = clusters.schema[cluster_col].dataType, labels.schema[label_col].dataType
    edit = F.col(edit_col).cast("string") if edit_col else F.lit(None).cast("string")
    from_clusters = clusters.select(
        id_c.alias(_ID),
        F.lit(1).alias(_IN_C),
        F.lit(0).alias(_IN_L),
        F.col(cluster_col).alias(_CLUSTER),
        F.lit(None).cast(lt).alias(_LABEL),
        F.lit(None).cast("string").alias(_EDIT),
    )
    from_labels = labels.select(
        id_l.alias(_ID),
        F.lit(0).alias(_IN_C),
        F.lit(1).alias(_IN_L),
        F.lit(None).cast(ct).alias(_CLUSTER),
        F.col(label_col).alias(_LABEL),
        edit.alias(_EDIT),
    )
    # Once ids are checked unique, each id has one row from each side, so
    # first(ignorenulls) picks that side's value (a null label stays null).
    per_id = (
        from_clusters.unionByName(from_labels)
        .groupBy(_ID)
        .agg(
            F.sum(_IN_C).alias(_IN_C),
            F.sum(_IN_L).alias(_IN_L),
            *[F.first(c, ignorenulls=True).alias(c) for c in (_CLUSTER, _LABEL, _EDIT)],
        )
    )
    return per_id.withColumn(_SOLO, F.when(F.col(_LABEL).isNull(), F.col(_ID)))


def _twice_pairs(n: str) -> Column:
    """sum(n * (n - 1)) as a long: twice the pair count, halved exactly on the driver."""
    return F.sum(F.col(n).cast("long") * (F.col(n).cast("long") - 1))


def _checks(docs: DataFrame) -> DataFrame:
    """One row: counts of each input problem, with the smallest offending id as an example."""
    has_id = F.col(_ID).isNotNull()
    both = has_id & (F.col(_IN_C) == 1) & (F.col(_IN_L) == 1)
    problems = {
        "dup_clusters": has_id & (F.col(_IN_C) > 1),
        "dup_labels": has_id & (F.col(_IN_L) > 1),
        "not_clustered": has_id & (F.col(_IN_C) == 0),
        "not_labelled": has_id & (F.col(_IN_L) == 0),
        "null_cluster": both & F.col(_CLUSTER).isNull(),
    }
    aggs = [
        F.sum(F.when(~has_id, F.col(_IN_C)).otherwise(0)).alias("null_ids_clusters"),
        F.sum(F.when(~has_id, F.col(_IN_L)).otherwise(0)).alias("null_ids_labels"),
    ]
    for name, cond in problems.items():
        aggs += [F.sum(cond.cast("long")).alias(name), F.min(F.when(cond, F.col(_ID))).alias(f"{name}_eg")]
    return docs.agg(*aggs)


def _raise_problems(row: dict, edit_col: str | None, original: str) -> None:
    """InputError listing every problem _checks found, in one line."""
    messages = {
        "dup_clusters": "document id(s) appear more than once in the clusters",
        "dup_labels": "document id(s) appear more than once in the labels",
        "not_clustered": "labelled document(s) are missing from the clusters",
        "not_labelled": "clustered document(s) are missing from the labels",
        "null_cluster": "document(s) have a null cluster id",
    }
    found = []
    nulls = (row["null_ids_clusters"] or 0, row["null_ids_labels"] or 0)
    if any(nulls):
        found.append(f"{nulls[0]} null id(s) in the clusters and {nulls[1]} in the labels")
    for name, message in messages.items():
        if row[name]:
            found.append(f"{row[name]} {message}, e.g. {row[name + '_eg']!r}")
    if edit_col is not None and row["multi_original"]:
        found.append(
            f"{row['multi_original']} group(s) have more than one {original!r} row in {edit_col!r}, "
            f"e.g. {row['multi_original_eg']!r}"
        )
    if found:
        raise InputError("cannot score: " + "; ".join(found))


def _origins(valid: DataFrame, original: str) -> DataFrame:
    """Per labelled group with an `original` row: _label, _originals (row count), _origin (its cluster)."""
    rows = valid.where((F.col(_EDIT) == original) & F.col(_LABEL).isNotNull())
    return rows.groupBy(_LABEL).agg(F.count(F.lit(1)).alias("_originals"), F.first(_CLUSTER).alias("_origin"))


def _by_edit(valid: DataFrame, per_cluster: DataFrame, origins: DataFrame, original: str) -> dict:
    """{edit: {documents, copies, found, recall, skipped, false_merges}}: one row per edit value collected."""
    docs = (
        valid.where(F.col(_EDIT).isNotNull())
        .join(per_cluster.select(_CLUSTER, "_groups"), _CLUSTER)
        .join(origins.select(_LABEL, "_origin"), _LABEL, "left")
    )
    copy = F.col(_EDIT) != original
    scored = copy & F.col("_origin").isNotNull()
    rows = (
        docs.groupBy(_EDIT)
        .agg(
            F.count(F.lit(1)).alias("documents"),
            F.sum(scored.cast("long")).alias("copies"),
            F.sum((scored & (F.col(_CLUSTER) == F.col("_origin"))).cast("long")).alias("found"),
            F.sum((copy & F.col("_origin").isNull()).cast("long")).alias("skipped"),
            F.sum((F.col("_groups") > 1).cast("long")).alias("false_merges"),
        )
        .orderBy(_EDIT)
        .limit(MAX_EDITS + 1)
        .collect()
    )
    if len(rows) > MAX_EDITS:
        raise InputError(f"more than {MAX_EDITS} distinct edit values; is the edit column an edit type?")
    out = {}
    for r in rows:
        copies, found = int(r["copies"]), int(r["found"])
        out[r[_EDIT]] = {
            "documents": int(r["documents"]),
            "copies": copies,
            "found": found,
            "recall": round(found / copies, 6) if copies else None,
            "skipped": int(r["skipped"]),
            "false_merges": int(r["false_merges"]),
        }
    return out


def format_scores(result: dict) -> str:
    """The text `neardup evaluate` prints."""
    p = result["pairs"]
    lines = [
        f"documents          {result['documents']}",
        f"pair precision     {p['precision']:.4f}  ({p['correct_pairs']} of {p['predicted_pairs']} predicted pairs)",
        f"pair recall        {p['recall']:.4f}  ({p['correct_pairs']} of {p['true_pairs']} true pairs)",
        f"pair F1            {p['f1']:.4f}",
        f"adjusted Rand      {result['adjusted_rand_index']:.4f}",
    ]
    if result.get("by_edit"):
        lines.append("per edit: recall (copies in their original's cluster), false merges (with other groups)")
    for edit, row in sorted(result.get("by_edit", {}).items()):
        recall = "   -  " if row["recall"] is None else f"{row['recall']:.4f}"
        lines.append(f"  {edit:<22} recall {recall}  ({row['found']}/{row['copies']})  "
                     f"false merges {row['false_merges']}")
    return "\n".join(lines)
