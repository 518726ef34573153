"""Each stage on hand-written rows."""

import pytest
from pyspark.sql import functions as F

from neardup_spark import columns as C
from neardup_spark.candidates import candidate_pairs
from neardup_spark.config import Config
from neardup_spark.exact import exact_edges, exact_pass, representatives
from neardup_spark.keepers import choose_keepers
from neardup_spark.normalise import normalise
from neardup_spark.verify import verify


def cfg(**overrides):
    return Config().with_overrides(overrides)


def test_normalise_and_exact_pass(spark):
    docs = spark.createDataFrame(
        [(5, "Same  TEXT here."), (2, "same text here"), (9, "other"), (3, None), (4, "!!!"), (7, "same text, here")],
        "doc_id long, text string",
    )
    out = {r[C.DOC_ID]: r for r in docs.transform(normalise, cfg()).transform(exact_pass, cfg()).collect()}
    assert out[5][C.NORM] == "same text here"
    assert {d: out[d][C.EXACT_REP] for d in (5, 2, 7)} == {5: 2, 2: 2, 7: 2}
    assert out[9][C.EXACT_REP] == 9
    assert out[3][C.IS_EMPTY] and out[4][C.IS_EMPTY] and out[3][C.EXACT_REP] == 3
    table = docs.transform(normalise, cfg()).transform(exact_pass, cfg())
    assert sorted(r[C.DOC_ID] for r in representatives(table).collect()) == [2, 9]
    edges = sorted((r[C.DOC_A], r[C.DOC_B], r[C.JACCARD]) for r in exact_edges(table).collect())
    assert edges == [(2, 5, 1.0), (2, 7, 1.0)]


def _banded(spark, rows):
    return spark.createDataFrame(rows, "doc_id long, band int, bucket long")


def test_candidates_all_pairs_in_small_buckets_deduplicated_across_bands(spark):
    rows = [(d, 0, 11) for d in (3, 1, 2)] + [(d, 1, 7) for d in (1, 2)] + [(4, 1, 8)]
    got = sorted(tuple(r) for r in candidate_pairs(_banded(spark, rows), cfg()).collect())
    assert got == [(1, 2), (1, 3), (2, 3)]


def test_candidates_star_beyond_the_limit(spark):
    rows = [(d, 0, 5) for d in range(10, 0, -1)]
    got = sorted(tuple(r) for r in candidate_pairs(_banded(spark, rows), cfg(**{"lsh.all_pairs_bucket_limit": 4})).collect())
    assert got == [(1, d) for d in range(2, 11)]  # n-1 pairs, not n(n-1)/2


def test_candidates_with_string_ids(spark):
    rows = spark.createDataFrame([("b", 0, 1), ("a", 0, 1), ("c", 0, 1)], "doc_id string, band int, bucket long")
    assert sorted(tuple(r) for r in candidate_pairs(rows, cfg()).collect()) == [("a", "b"), ("a", "c"), ("b", "c")]


def test_verify_exact_jaccard_and_containment(spark):
    shingled = spark.createDataFrame(
        [(1, [1, 2, 3, 4]), (2, [1, 2, 3, 4, 5, 6, 7, 8]), (3, [9, 10]), (4, [1, 2, 3, 5])],
        "doc_id long, shingles array<int>",
    )
    cands = spark.createDataFrame([(1, 2), (1, 3), (1, 4)], "doc_a long, doc_b long")
    got = {(r[0], r[1]): r for r in verify(cands, cfg(**{"verify.threshold": 0.3}), shingled).collect()}
    assert set(got) == {(1, 2), (1, 4)}
    assert got[(1, 2)][C.JACCARD] == pytest.approx(0.5)
    assert got[(1, 2)][C.CONTAINMENT_A] == pytest.approx(1.0)
    assert got[(1, 2)][C.CONTAINMENT_B] == pytest.approx(0.5)
    assert got[(1, 4)][C.JACCARD] == pytest.approx(3 / 5)


def _index(spark):
    # doc 1..4 in one cluster, 5 alone, 6 empty.
    return spark.createDataFrame(
        [
            (1, False, "h1", 100, "2026-01-05", "wire"),
            (2, False, "h2", 300, "2026-01-02", "blog"),
            (3, False, "h1", 100, None, "paper"),
            (4, False, "h4", 300, "2026-01-02", "paper"),
            (5, False, "h5", 50, "2026-01-01", "wire"),
            (6, True, None, 0, "2026-01-01", "wire"),
        ],
        "doc_id long, is_empty boolean, exact_hash string, text_len int, published_at string, source string",
    )


@pytest.mark.parametrize(
    "rules, extra, keeper",
    [
        ("smallest_id", {}, 1),
        ("earliest", {}, 2),  # 2 and 4 tie on time; smallest id wins
        ("longest", {}, 2),
        ("source_priority", {"keeper.source_priority": "paper,wire"}, 3),
        ("source_priority,longest", {"keeper.source_priority": "paper,wire"}, 4),
    ],
)
def test_keeper_rules(spark, rules, extra, keeper):
    comps = spark.createDataFrame([(d, 1) for d in (1, 2, 3, 4)], "doc_id long, cluster_id long")
    out = {r[C.DOC_ID]: r for r in choose_keepers(_index(spark), cfg(**{"keeper.rules": rules, **extra}), comps).collect()}
    assert len(out) == 6
    assert {d: out[d][C.KEEPER_ID] for d in (1, 2, 3, 4)} == {d: keeper for d in (1, 2, 3, 4)}
    assert [d for d in (1, 2, 3, 4) if out[d][C.IS_KEEPER]] == [keeper]
    assert out[5][C.STATUS] == C.UNIQUE and out[5][C.KEEPER_ID] == 5 and out[5][C.IS_KEEPER]
    assert out[6][C.STATUS] == C.EMPTY and out[6][C.CLUSTER_ID] == 6
    assert out[keeper][C.STATUS] == C.KEEPER
    if keeper == 1:
        assert out[3][C.STATUS] == C.EXACT_DUPLICATE and out[2][C.STATUS] == C.DUPLICATE


def test_earliest_puts_missing_times_last(spark):
    comps = spark.createDataFrame([(1, 1), (3, 1)], "doc_id long, cluster_id long")
    out = choose_keepers(_index(spark).where(F.col("doc_id").isin(1, 3)), cfg(**{"keeper.rules": "earliest"}), comps)
    assert {r[C.KEEPER_ID] for r in out.collect()} == {1}
