import itertools
import json
import random

import pandas as pd
import pytest

from neardup_spark.errors import InputError
from neardup_spark.tools.evaluate import (
    PairScores,
    adjusted_rand_index,
    pair_scores,
    recall_by_edit,
    score,
)


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


# --- score(): the same metrics in Spark -------------------------------------------------------------

try:
    from sklearn.metrics import adjusted_rand_score
except ImportError:  # not a dependency; the brute-force pair count below is the oracle then
    adjusted_rand_score = None


def brute_ari(cluster_of, label_of):
    """ARI from the 2x2 pair confusion counts, every pair listed (the form sklearn uses).
    A null label equals nothing, not even another null."""
    ids = list(cluster_of.index)
    tp = fp = fn = tn = 0
    for a, b in itertools.combinations(ids, 2):
        same_c = cluster_of[a] == cluster_of[b]
        same_l = label_of[a] is not None and label_of[a] == label_of[b]
        tp += same_c and same_l
        fp += same_c and not same_l
        fn += same_l and not same_c
        tn += not same_c and not same_l
    if fp == 0 and fn == 0:
        return 1.0
    return 2 * (tp * tn - fn * fp) / ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn))


def oracle_ari(cluster_of, label_of):
    if adjusted_rand_score is not None and label_of.notna().all():
        return adjusted_rand_score(label_of[cluster_of.index].tolist(), cluster_of.tolist())
    return brute_ari(cluster_of, label_of)


def random_case(seed, n=60):
    """Clusters that mostly follow the labels, with some splits and merges."""
    rng = random.Random(seed)
    n_groups = rng.randint(2, 25)
    label = {i: f"g{rng.randrange(n_groups)}" for i in range(n)}
    cluster = {i: (int(label[i][1:]) if rng.random() < 0.7 else 100 + rng.randrange(n // 2)) for i in range(n)}
    return pd.Series(cluster), pd.Series(label)


SPECIAL_CASES = {
    "all singletons": (pd.Series({i: i for i in range(60)}), pd.Series({i: f"g{i}" for i in range(60)})),
    "one cluster, one group": (pd.Series({i: 7 for i in range(60)}), pd.Series({i: "g" for i in range(60)})),
    "singletons vs one group": (pd.Series({i: i for i in range(60)}), pd.Series({i: "g" for i in range(60)})),
    "one cluster vs random groups": (pd.Series({i: 0 for i in range(60)}), random_case(11)[1]),
    "random clusters vs singletons": (random_case(12)[0], pd.Series({i: f"g{i}" for i in range(60)})),
}


def frames(spark, cluster_of, label_of, edit_of=None):
    clusters = spark.createDataFrame([(int(i), int(c)) for i, c in cluster_of.items()], "doc_id long, cluster_id long")
    if edit_of is None:
        rows = [(int(i), None if pd.isna(g) else str(g)) for i, g in label_of.items()]
        labels = spark.createDataFrame(rows, "doc_id long, group string")
    else:
        rows = [(int(i), None if pd.isna(g) else str(g), edit_of[i]) for i, g in label_of.items()]
        labels = spark.createDataFrame(rows, "doc_id long, group string, edit string")
    return clusters, labels


def test_adjusted_rand_index_matches_pair_confusion_form():
    # Pure Python: no JVM. The Hubert-Arabie form from pair sums vs the pair-confusion form.
    cases = [random_case(seed) for seed in range(20)] + list(SPECIAL_CASES.values())
    for cluster_of, label_of in cases:
        expected = brute_ari(cluster_of, label_of)
        assert adjusted_rand_index(pair_scores(cluster_of, label_of), len(cluster_of)) == pytest.approx(expected)
    assert adjusted_rand_index(PairScores(0, 0, 0), 0) == 1.0
    assert adjusted_rand_index(PairScores(0, 0, 0), 1) == 1.0


def test_adjusted_rand_index_is_exact_at_archive_scale():
    # 10M documents in one group, split into two clusters of 5M: ~5e13 pairs, more than a double holds exactly.
    n, half = 10_000_000, 5_000_000
    true = n * (n - 1) // 2
    predicted = correct = 2 * (half * (half - 1) // 2)
    ari = adjusted_rand_index(PairScores(true, predicted, correct), n)
    assert ari == 0.0  # one side a single cluster: the expected index equals the index


@pytest.mark.parametrize("case", [f"seed {s}" for s in range(5)] + list(SPECIAL_CASES))
def test_score_matches_pandas_and_ari_oracle(spark, case):
    cluster_of, label_of = SPECIAL_CASES[case] if case in SPECIAL_CASES else random_case(int(case.split()[1]))
    out = score(*frames(spark, cluster_of, label_of))
    assert out["pairs"] == pair_scores(cluster_of, label_of).as_dict()
    assert out["adjusted_rand_index"] == pytest.approx(oracle_ari(cluster_of, label_of), abs=1e-6)
    assert out["documents"] == len(cluster_of)
    assert out["clusters"] == cluster_of.nunique() and out["groups"] == label_of.nunique()
    assert "by_edit" not in out
    json.dumps(out)


def test_score_hand_computed(spark):
    # Same frame as test_pair_scores_match_brute_force: clusters {1,2,3} {4} {5,6} {7}; groups a={1,2} b={3,4} c={5,6,7}.
    cl = pd.Series({1: 1, 2: 1, 3: 1, 4: 4, 5: 5, 6: 5, 7: 7})
    lab = pd.Series({1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c", 7: "c"})
    out = score(*frames(spark, cl, lab))
    assert out["pairs"]["true_pairs"] == 5 and out["pairs"]["predicted_pairs"] == 4
    assert out["pairs"]["correct_pairs"] == 2
    # index 2, expected 4 * 5 / 21, max 4.5
    assert out["adjusted_rand_index"] == pytest.approx((2 - 20 / 21) / (4.5 - 20 / 21), abs=1e-6)


def test_null_label_is_a_group_of_its_own(spark):
    cl = pd.Series({1: 1, 2: 1, 3: 1, 4: 4, 5: 4, 6: 6})
    lab = pd.Series({1: "a", 2: "a", 3: None, 4: None, 5: None, 6: "a"}, dtype=object)
    out = score(*frames(spark, cl, lab))
    # Pairs sharing a label: (1,2) (1,6) (2,6); nulls pair with nothing.
    assert (out["pairs"]["true_pairs"], out["pairs"]["predicted_pairs"], out["pairs"]["correct_pairs"]) == (3, 4, 1)
    assert out["groups"] == 4
    unique = lab.copy()
    unique[unique.isna()] = [f"null-{i}" for i in unique.index[unique.isna()]]
    assert out["pairs"] == pair_scores(cl, unique).as_dict()
    assert out["adjusted_rand_index"] == pytest.approx(brute_ari(cl, lab), abs=1e-6)


def test_integer_ids_of_any_width_match(spark):
    clusters = spark.createDataFrame([(1, 1), (2, 1), (3, 3)], "doc_id long, cluster_id long")
    labels = spark.createDataFrame([(1, "a"), (2, "a"), (3, "b")], "doc_id int, group string")
    assert score(clusters, labels)["pairs"]["correct_pairs"] == 1


@pytest.mark.parametrize(
    "cluster_rows, label_rows, message",
    [
        (
            [(1, 1), (2, 1), (3, 3), (4, 3)],
            [(1, "a"), (2, "a"), (3, "b"), (5, "b"), (6, "c")],
            (
                "2 labelled document(s) are missing from the clusters, e.g. 5; "
                "1 clustered document(s) are missing from the labels, e.g. 4"
            ),
        ),
        (
            [(1, 1), (2, 1), (2, 1)],
            [(1, "a"), (2, "a")],
            "1 document id(s) appear more than once in the clusters, e.g. 2",
        ),
        (
            [(1, 1), (2, 1)],
            [(1, "a"), (2, "a"), (1, "b")],
            "1 document id(s) appear more than once in the labels, e.g. 1",
        ),
        ([(1, 1), (None, 1)], [(1, "a")], "1 null id(s) in the clusters and 0 in the labels"),
        ([(1, 1), (2, None)], [(1, "a"), (2, "a")], "1 document(s) have a null cluster id, e.g. 2"),
    ],
)
def test_inconsistent_inputs_are_an_error(spark, cluster_rows, label_rows, message):
    clusters = spark.createDataFrame(cluster_rows, "doc_id long, cluster_id long")
    labels = spark.createDataFrame(label_rows, "doc_id long, group string")
    with pytest.raises(InputError) as err:
        score(clusters, labels)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_mismatched_id_types_and_missing_columns_are_errors(spark):
    clusters = spark.createDataFrame([(1, 1)], "doc_id long, cluster_id long")
    with pytest.raises(InputError, match="bigint in the clusters but string in the labels"):
        score(clusters, spark.createDataFrame([("1", "a")], "doc_id string, group string"))
    with pytest.raises(InputError, match="labels have no column"):
        score(clusters, spark.createDataFrame([(1, "a")], "doc_id long, label string"))


def edit_case():
    """Groups g (original, char, reorder, word), h (original, char), k (no original: char, word),
    m (original, word), two null-label documents (char, original) and one null edit; the clusters
    merge h's char copy into g, and m's original with k's word copy."""
    rows = [
        ("g", "original"), ("g", "char"), ("g", "reorder"), ("g", "word"), ("h", "original"), ("h", "char"),
        ("k", "char"), ("k", "word"), ("m", "original"), ("m", "word"), (None, "char"), (None, "original"), ("g", None),
    ]  # fmt: skip
    labels = pd.DataFrame(rows, columns=["group", "edit"], index=range(1, 14))
    cl = pd.Series({1: 1, 2: 1, 3: 3, 4: 1, 5: 5, 6: 1, 7: 7, 8: 9, 9: 9, 10: 10, 11: 11, 12: 12, 13: 1})
    return cl, labels


def test_by_edit_matches_recall_by_edit(spark):
    cl, labels = edit_case()
    clusters, labs = frames(spark, cl, labels["group"], labels["edit"])
    out = score(clusters, labs, edit_col="edit")
    # pandas would match null groups to each other; score() makes each a group of its own.
    own = labels.assign(group=[g if g is not None else f"null-{i}" for i, g in labels["group"].items()])
    expected = recall_by_edit(cl, own)
    copies = {e: v for e, v in out["by_edit"].items() if e != "original"}
    assert set(copies) == set(expected.index) == {"char", "reorder", "word"}
    for edit, row in expected.iterrows():
        assert copies[edit]["copies"] == row["copies"] and copies[edit]["found"] == row["found"]
        assert copies[edit]["recall"] == pytest.approx(row["recall"])
    assert out["by_edit"] == {
        # 2 (g) found, 6 (h) not; 7 (k) and 11 (null label) have no original. 2 and 6 share cluster 1 across groups.
        "char": {"documents": 4, "copies": 2, "found": 1, "recall": 0.5, "skipped": 2, "false_merges": 2},
        # 1 (cluster 1) and 9 (with k's word copy) are falsely merged; 12's null label is not a group to skip.
        "original": {"documents": 4, "copies": 0, "found": 0, "recall": None, "skipped": 0, "false_merges": 2},
        "reorder": {"documents": 1, "copies": 1, "found": 0, "recall": 0.0, "skipped": 0, "false_merges": 0},
        # 4 (g) found, 10 (m) not; 8 (k) skipped, merged with m's original.
        "word": {"documents": 3, "copies": 2, "found": 1, "recall": 0.5, "skipped": 1, "false_merges": 2},
    }
    assert out["documents"] == 13  # the null edit is scored in the pair metrics, not per edit
    json.dumps(out)


def test_two_originals_in_a_group_are_an_error(spark):
    cl = pd.Series({1: 1, 2: 1, 3: 1})
    clusters, labels = frames(spark, cl, pd.Series({1: "g", 2: "g", 3: "g"}), {1: "original", 2: "original", 3: "x"})
    with pytest.raises(InputError, match="1 group\\(s\\) have more than one 'original' row in 'edit', e.g. 'g'"):
        score(clusters, labels, edit_col="edit")
