import itertools

import pandas as pd
import pytest

from neardup_spark.evaluate import pair_scores, recall_by_edit


def brute(cluster_of, label_of):
    ids = list(cluster_of.index)
    pred = {(a, b) for a, b in itertools.combinations(ids, 2) if cluster_of[a] == cluster_of[b]}
    true = {(a, b) for a, b in itertools.combinations(ids, 2) if label_of[a] == label_of[b]}
    return len(true), len(pred), len(pred & true)


def test_pair_scores_match_brute_force():
    cl = pd.Series({1: 1, 2: 1, 3: 1, 4: 4, 5: 5, 6: 5, 7: 7})
    lab = pd.Series({1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c", 7: "c"})
    s = pair_scores(cl, lab)
    assert (s.true_pairs, s.predicted_pairs, s.correct_pairs) == brute(cl, lab)
    assert s.precision == pytest.approx(2 / 4) and s.recall == pytest.approx(2 / 5)


def test_recall_by_edit():
    labels = pd.DataFrame(
        {"group": ["g", "g", "g", "h", "h"], "edit": ["original", "char", "reorder", "original", "char"]},
        index=[1, 2, 3, 4, 5],
    )
    cl = pd.Series({1: 1, 2: 1, 3: 3, 4: 4, 5: 4})
    out = recall_by_edit(cl, labels)
    assert out.loc["char", "recall"] == 1.0 and out.loc["reorder", "recall"] == 0.0


def test_missing_label_is_an_error():
    with pytest.raises(ValueError):
        pair_scores(pd.Series({1: 1, 2: 1}), pd.Series({1: "a"}))
