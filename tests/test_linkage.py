"""Keeper linkage: every cluster is a star of documents that match its keeper (no chains)."""

import pytest

from neardup_spark import columns as C
from neardup_spark.api import deduplicate
from neardup_spark.config import Config, ConfigError
from neardup_spark.kernels.normalise import normalise_text
from neardup_spark.tools import corpus

from . import oracles

THRESHOLD = 0.3


def _clusters(spark, rows, linkage):
    cfg = Config().with_overrides({"cluster.linkage": linkage, "verify.threshold": THRESHOLD,
                                   "minhash.num_perm": 256})
    result = deduplicate(spark.createDataFrame(rows), cfg)
    out = {r[C.DOC_ID]: (r[C.CLUSTER_ID], r[C.KEEPER_ID]) for r in result.clusters.collect()}
    work = dict(result.report["work"])
    result.unpersist()
    return out, work


def _jaccard(a: str, b: str) -> float:
    sa, sb = oracles.word_shingles(normalise_text(a), 5), oracles.word_shingles(normalise_text(b), 5)
    return len(sa & sb) / len(sa | sb)


@pytest.fixture(scope="module")
def chained(spark):
    rows = [{"id": r["id"], "text": r["text"]} for r in corpus.chains()]
    return rows, _clusters(spark, rows, "components"), _clusters(spark, rows, "keeper")


def test_every_member_matches_its_keeper(chained):
    rows, _, (keeper, work) = chained
    text = {r["id"]: r["text"] for r in rows}
    assert set(keeper) == set(text)  # every document once
    for doc, (_, keeper_id) in keeper.items():
        assert doc == keeper_id or _jaccard(text[doc], text[keeper_id]) >= THRESHOLD, doc
    assert work["linkage_rounds"] >= 2 and work["linkage_reclustered"] > 0


def test_components_chain_and_keeper_linkage_splits_them(chained):
    rows, (components, _), (keeper, work) = chained
    text = {r["id"]: r["text"] for r in rows}
    truth = set(oracles.jaccard_pairs(rows, THRESHOLD))
    far = [doc for doc, (_, k) in components.items() if _jaccard(text[doc], text[k]) < THRESHOLD]
    assert far, "the chains should put members below the threshold of their keeper"
    # Each chain is one component; keeper linkage splits it into stars.
    assert len(set(c for c, _ in keeper.values())) > len(set(c for c, _ in components.values()))

    def precision(clusters):
        pairs = oracles.cluster_pairs({d: c for d, (c, _) in clusters.items()})
        return len(pairs & truth) / len(pairs)

    assert precision(components) < 0.6
    # No chain through a keeper either: every two members of a star are a true pair.
    assert precision(keeper) == 1.0
    assert work["linkage_member_checks"] > 0


def test_exact_copies_share_their_texts_fate(spark):
    rows = [{"id": r["id"], "text": r["text"]} for r in corpus.chains()]
    top = max(r["id"] for r in rows)
    copies = [{"id": top + 1 + i, "text": r["text"]} for i, r in enumerate(rows[::3])]
    stars, _ = _clusters(spark, rows + copies, "keeper")
    text = {r["id"]: r["text"] for r in rows + copies}
    for copy, original in zip(copies, rows[::3]):
        assert stars[copy["id"]][0] == stars[original["id"]][0]
    for a, b in oracles.cluster_pairs({d: c for d, (c, _) in stars.items()}):
        assert text[a] == text[b] or _jaccard(text[a], text[b]) >= THRESHOLD, (a, b)


def test_containment_stars_hold_only_pairs_that_pass_containment(spark):
    # Containment has no triangle bound: every two members of a star are checked.
    rows = [{"id": r["id"], "text": r["text"]} for r in corpus.chains(n_chains=6, shift=20, unrelated=3)]
    cfg = Config().with_overrides({"cluster.linkage": "keeper", "match.mode": "containment",
                                   "match.containment_threshold": 0.6, "minhash.num_perm": 256})
    result = deduplicate(spark.createDataFrame(rows), cfg)
    stars = {r[C.DOC_ID]: r[C.CLUSTER_ID] for r in result.clusters.collect()}
    result.unpersist()
    text = {r["id"]: r["text"] for r in rows}
    pairs = oracles.cluster_pairs(stars)
    assert pairs
    for a, b in pairs:
        sa, sb = (oracles.word_shingles(normalise_text(text[d]), 5) for d in (a, b))
        assert len(sa & sb) / min(len(sa), len(sb)) >= 0.6, (a, b)


def test_same_clusters_run_after_run(spark, chained):
    rows, _, (keeper, _) = chained
    again, _ = _clusters(spark, rows[::-1], "keeper")
    assert again == keeper


def test_without_chains_keeper_linkage_changes_nothing(spark):
    import pandas as pd

    rows = pd.DataFrame(corpus.generate(corpus.CorpusSpec(n_docs=400, seed=9, words=120)))[["id", "text"]]
    records = rows.to_dict("records")
    comps, _ = _clusters(spark, records, "components")
    stars, work = _clusters(spark, records, "keeper")
    assert stars == comps and work["linkage_reclustered"] == 0
    # Members are checked against each other where the keeper test does not vouch for them
    # (Jaccard to the keeper of a + c < 1 + threshold): here the appended and replaced copies.
    assert 0 < work["linkage_member_checks"] < len(records)


def test_linkage_is_validated():
    # The index's keeper linkage: tests/test_nightly_keeper.py.
    with pytest.raises(ConfigError, match="cluster.linkage"):
        Config().with_overrides({"cluster.linkage": "cliques"})
