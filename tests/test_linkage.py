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
    rows, (components, _), (keeper, _) = chained
    text = {r["id"]: r["text"] for r in rows}
    truth = set(oracles.jaccard_pairs(rows, THRESHOLD))
    far = [doc for doc, (_, k) in components.items() if _jaccard(text[doc], text[k]) < THRESHOLD]
    assert far, "the chains should put members below the threshold of their keeper"
    # Each chain is one component; keeper linkage splits it into stars.
    assert len(set(c for c, _ in keeper.values())) > len(set(c for c, _ in components.values()))

    def precision(clusters):
        pairs = oracles.cluster_pairs({d: c for d, (c, _) in clusters.items()})
        return len(pairs & truth) / len(pairs)

    assert precision(keeper) > precision(components)
    # Every pair the stars hold that is not a true pair is two members of one star.
    for a, b in oracles.cluster_pairs({d: c for d, (c, _) in keeper.items()}) - truth:
        assert keeper[a][1] not in (a, b) and keeper[b][1] not in (a, b)


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


def test_linkage_is_validated_and_the_index_refuses_keeper_linkage(spark, tmp_path):
    with pytest.raises(ConfigError, match="cluster.linkage"):
        Config().with_overrides({"cluster.linkage": "cliques"})
    from neardup_spark.api import build_index
    from neardup_spark.archive.index import IndexError_

    cfg = Config().with_overrides({"cluster.linkage": "keeper", "input.path": str(tmp_path / "in"),
                                   "index.path": str(tmp_path / "ix")})
    with pytest.raises(IndexError_, match="keeper linkage"):
        build_index(spark, cfg)
