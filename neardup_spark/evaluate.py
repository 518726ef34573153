"""Scoring clusters against labels: pair precision, recall, F1, and recall per edit type.

Pair metrics count document pairs that share a cluster (predicted) and pairs
that share a label (true), from the contingency table of (cluster, label)
cell sizes, so nothing quadratic is ever listed. Works on pandas frames of
any size that fits on the driver.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd


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
