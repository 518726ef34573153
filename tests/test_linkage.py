"""Keeper linkage (the default): every removed document is a verified pair with its own
keeper or an exact copy of one; clusters are the greedy star cover in keeper order."""

import numpy as np
import pytest

from neardup_spark import columns as C
from neardup_spark.api import deduplicate
from neardup_spark.config import Config, ConfigError
from neardup_spark.kernels.graph import driver_components, greedy_stars
from neardup_spark.kernels.normalise import normalise_text
from neardup_spark.tools import corpus

from . import oracles

THRESHOLD = 0.3


def _run(spark, rows, linkage, **more):
    cfg = Config().with_overrides({"cluster.linkage": linkage, "verify.threshold": THRESHOLD,
                                   "minhash.num_perm": 256, **more})
    result = deduplicate(spark.createDataFrame(rows), cfg)
    out = {r[C.DOC_ID]: (r[C.CLUSTER_ID], r[C.KEEPER_ID]) for r in result.clusters.collect()}
    pairs = {(r[C.DOC_A], r[C.DOC_B]) for r in result.pairs.collect()}
    work = dict(result.report["work"])
    result.unpersist()
    return out, work, pairs


def _clusters(spark, rows, linkage, **more):
    out, work, _ = _run(spark, rows, linkage, **more)
    return out, work


def _jaccard(a: str, b: str) -> float:
    sa, sb = oracles.word_shingles(normalise_text(a), 5), oracles.word_shingles(normalise_text(b), 5)
    return len(sa & sb) / len(sa | sb)


@pytest.fixture(scope="module")
def chained(spark):
    rows = [{"id": r["id"], "text": r["text"]} for r in corpus.chains()]
    return rows, _clusters(spark, rows, "components"), _run(spark, rows, "keeper")


def test_every_member_matches_its_keeper(chained):
    rows, _, (keeper, work, pairs) = chained
    text = {r["id"]: r["text"] for r in rows}
    assert set(keeper) == set(text)  # every document once
    for doc, (_, keeper_id) in keeper.items():
        assert doc == keeper_id or _jaccard(text[doc], text[keeper_id]) >= THRESHOLD, doc
        assert doc == keeper_id or (min(doc, keeper_id), max(doc, keeper_id)) in pairs, doc
    assert work["linkage_reclustered"] > 0


def test_stars_are_the_greedy_cover_in_keeper_order(chained):
    # The default keeper rule is the smallest id.
    rows, _, (keeper, _, pairs) = chained
    text = {r["id"]: r["text"] for r in rows}
    in_pairs = {d for p in pairs for d in p}
    comps = oracles.union_find_clusters(sorted(in_pairs), pairs)
    order = {d: d for d in in_pairs}
    expected = {}
    for members in {}.fromkeys(comps.values()):
        ids = sorted((d for d, c in comps.items() if c == members), key=order.get)
        rank = {d: i for i, d in enumerate(ids)}
        by_rank = oracles.sequential_stars(list(rank.values()), {rank[d]: text[d] for d in ids},
                                   {(rank[a], rank[b]) for a, b in pairs if a in rank and b in rank})
        expected.update({ids[i]: ids[k] for i, k in by_rank.items()})
    assert {d: k for d, (_, k) in keeper.items() if d in in_pairs} == expected


def test_components_chain_and_keeper_linkage_splits_them(chained):
    rows, (components, _), (keeper, _, _) = chained
    text = {r["id"]: r["text"] for r in rows}
    truth = set(oracles.jaccard_pairs(rows, THRESHOLD))
    far = [doc for doc, (_, k) in components.items() if _jaccard(text[doc], text[k]) < THRESHOLD]
    assert far, "the chains should put members below the threshold of their keeper"
    # Each chain is one component; keeper linkage splits it into stars.
    assert len(set(c for c, _ in keeper.values())) > len(set(c for c, _ in components.values()))

    def precision(clusters):
        pairs = oracles.cluster_pairs({d: c for d, (c, _) in clusters.items()})
        return len(pairs & truth) / len(pairs)

    assert precision(components) < 0.6 < precision(keeper)


def test_exact_copies_share_their_texts_fate(spark):
    rows = [{"id": r["id"], "text": r["text"]} for r in corpus.chains()]
    top = max(r["id"] for r in rows)
    copies = [{"id": top + 1 + i, "text": r["text"]} for i, r in enumerate(rows[::3])]
    stars, _ = _clusters(spark, rows + copies, "keeper")
    text = {r["id"]: r["text"] for r in rows + copies}
    for copy, original in zip(copies, rows[::3]):
        assert stars[copy["id"]][0] == stars[original["id"]][0]
    for doc, (_, k) in stars.items():
        assert text[doc] == text[k] or _jaccard(text[doc], text[k]) >= THRESHOLD, doc


def test_every_removed_document_counts_as_verified_when_copies_keep(spark):
    # Earlier copies keep: the keeper is a copy, not its text's first id (which the pairs join),
    # and the count still finds every removed document's pair with the keeper's text.
    rows = [{"id": r["id"], "text": r["text"], "published_at": "2021-01-01T00:00:00Z"} for r in corpus.chains()]
    top = max(r["id"] for r in rows)
    rows += [{"id": top + 1 + i, "text": r["text"], "published_at": "2020-01-01T00:00:00Z"}
             for i, r in enumerate(rows[::3])]
    cfg = Config().with_overrides({"verify.threshold": THRESHOLD, "keeper.rules": ["earliest"]})
    result = deduplicate(spark.createDataFrame(rows), cfg)
    counts = dict(result.report["counts"])
    keepers = {r[C.KEEPER_ID] for r in result.clusters.collect()}
    result.unpersist()
    assert keepers & {top + 1 + i for i in range(len(rows[::3]))}, "some copy should keep"
    assert counts["removed_verified_against_keeper"] == counts["removed"] > 0


def test_containment_stars_hold_only_members_that_pass_containment(spark):
    rows = [{"id": r["id"], "text": r["text"]} for r in corpus.chains(n_chains=6, shift=20, unrelated=3)]
    cfg = Config().with_overrides({"cluster.linkage": "keeper", "match.mode": "containment",
                                   "match.containment_threshold": 0.6, "minhash.num_perm": 256})
    result = deduplicate(spark.createDataFrame(rows), cfg)
    stars = {r[C.DOC_ID]: r[C.KEEPER_ID] for r in result.clusters.collect()}
    result.unpersist()
    text = {r["id"]: r["text"] for r in rows}
    removed = [(d, k) for d, k in stars.items() if d != k]
    assert removed
    for a, b in removed:
        sa, sb = (oracles.word_shingles(normalise_text(text[d]), 5) for d in (a, b))
        assert len(sa & sb) / min(len(sa), len(sb)) >= 0.6, (a, b)


def test_same_clusters_run_after_run_and_on_the_driver_or_not(spark, chained):
    rows, _, (keeper, work, _) = chained
    assert work["linkage_on_driver"] == 1
    again, work = _clusters(spark, rows[::-1], "keeper", **{"cluster.driver_max_edges": 0})
    assert work["linkage_on_driver"] == 0
    assert again == keeper


def test_without_chains_keeper_linkage_changes_nothing(spark):
    import pandas as pd

    rows = pd.DataFrame(corpus.generate(corpus.CorpusSpec(n_docs=400, seed=9, words=120)))[["id", "text"]]
    records = rows.to_dict("records")
    comps, _ = _clusters(spark, records, "components")
    stars, work = _clusters(spark, records, "keeper")
    assert stars == comps and work["linkage_reclustered"] == 0


def test_linkage_is_validated_and_keeper_is_the_default():
    assert Config().cluster.linkage == "keeper"
    # The index's keeper linkage: tests/test_nightly_keeper.py.
    with pytest.raises(ConfigError, match="cluster.linkage"):
        Config().with_overrides({"cluster.linkage": "cliques"})


def _kernel_oracle(comp, pos, text_pos, nid, src, dst):
    text = {int(n): (int(c), int(t)) for n, c, t in zip(nid, comp, text_pos)}
    order = {int(n): (int(c), int(p)) for n, c, p in zip(nid, comp, pos)}
    ids = sorted(text, key=order.get)
    rank = {d: i for i, d in enumerate(ids)}
    by_rank = oracles.sequential_stars(list(rank.values()), {rank[d]: text[d] for d in ids},
                               {(rank[int(a)], rank[int(b)]) for a, b in zip(src, dst)})
    return np.array([ids[by_rank[rank[int(n)]]] for n in nid])


@pytest.mark.parametrize("sequential_below", [0, 10**9])
def test_the_kernel_is_the_sequential_greedy(sequential_below):
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(2, 50))
        src, dst = rng.integers(0, n, n * 2), rng.integers(0, n, n * 2)
        nodes, comp = driver_components(src, dst)
        copies = rng.integers(0, max(2, n // 2), nodes.size)
        shuffle = rng.permutation(nodes.size)
        pos = np.empty(nodes.size, dtype=np.int64)
        text_pos = np.empty(nodes.size, dtype=np.int64)
        for c in np.unique(comp):
            members = np.flatnonzero(comp == c)
            members = members[np.argsort(shuffle[members])]
            pos[members] = np.arange(1, members.size + 1)
            for h in np.unique(copies[members]):
                same = members[copies[members] == h]
                text_pos[same] = pos[same].min()
        nid = nodes * 7 - 100  # ids need not be dense or positive (archived documents are negative)
        got = greedy_stars(comp, pos, text_pos, nid, src * 7 - 100, dst * 7 - 100, sequential_below)
        assert (got == _kernel_oracle(comp, pos, text_pos, nid, src * 7 - 100, dst * 7 - 100)).all()


def test_a_long_chain_in_keeper_order_takes_seconds_not_rounds():
    n = 200_000
    src = np.arange(n - 1)
    keeper = greedy_stars(np.zeros(n, np.int64), np.arange(1, n + 1), np.arange(1, n + 1), np.arange(n), src, src + 1)
    assert (keeper == np.arange(n) // 2 * 2).all()  # 0 takes 1, 2 takes 3, ...
