"""Keeper linkage in nightly batches: an index built and appended to with
`cluster.linkage = "keeper"` clusters as one full keeper run over everything
(stars, keepers and statuses), through appends, replacements and compaction."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from neardup_spark import Config, api
from neardup_spark.api import run
from neardup_spark.archive.housekeeping import compact
from neardup_spark.archive.index import IndexError_, open_index
from neardup_spark.kernels.normalise import normalise_text
from neardup_spark.tools import corpus

from . import frames, oracles

KEEPER = {"cluster.linkage": "keeper"}


def _cfg(**more) -> Config:
    return Config().with_overrides({"input.format": "jsonl", "output.mode": "overwrite", **KEEPER, **more})


@pytest.fixture(scope="module")
def rows():
    """The bundled sample, chains that components would merge (A~B~C, A!~C), and exact
    copies of some chain links: every path of keeper linkage within one corpus."""
    sample = pd.read_json(api.SAMPLE, lines=True)
    chains = pd.DataFrame(corpus.chains(n_chains=10, shift=35, unrelated=4))
    chains = chains.assign(id=chains.id + 10_000, edit="chain", source="wire",
                           published_at=sample.published_at.iloc[: len(chains)].to_numpy())
    copies = chains.iloc[::5].assign(id=lambda f: f.id + 1_000)
    return pd.concat([sample, chains, copies], ignore_index=True)


def _assert_is_a_full_run(spark, index: str, rows: pd.DataFrame, tmp_path: Path, **more) -> None:
    """The index's current clusters, keepers and statuses are those of one full run over rows
    (keeper linkage unless `more` says otherwise), and with keeper linkage every member
    matches its keeper (exact Jaccard of the run's sets)."""
    after = frames.assert_index_is_a_full_run(spark, index, rows, tmp_path, _cfg(**more))
    if more.get("cluster.linkage", "keeper") == "keeper":
        _assert_stars(after, rows)


def _assert_stars(clusters: pd.DataFrame, rows: pd.DataFrame, threshold: float = 0.3) -> None:
    """Every removed document resembles its own keeper (exact Jaccard of word 5-shingles)."""
    sets = {i: oracles.word_shingles(normalise_text(t), 5) for i, t in zip(rows.id, rows.text)}
    for doc, keeper in zip(clusters.doc_id, clusters.keeper_id):
        sa, sb = sets[doc], sets[keeper]
        assert sa == sb or len(sa & sb) / len(sa | sb) >= threshold, (doc, keeper)


def test_nightly_keeper_batches_give_one_full_keeper_run(spark, rows, tmp_path):
    paths = oracles.split_into_nights(rows, tmp_path, seed=3)
    index = str(tmp_path / "index")
    api.build_index(spark, _cfg(**{"input.path": paths[0], "index.path": index}))
    reports = []
    for k in (1, 2):
        reports.append(run(spark, _cfg(**{"input.path": paths[k], "index.path": index, "index.append": True,
                                          "output.path": str(tmp_path / f"out{k}")})))
    # The nights reached archived stories, and re-clustered whole components.
    assert all(r["counts"]["archived_components_touched"] > 0 for r in reports)
    assert all("linkage_on_driver" in r["work"] for r in reports)
    assert sum(r["work"]["linkage_reclustered"] for r in reports) > 0
    out = pd.read_parquet(tmp_path / "out2" / "clusters")
    assert out.in_batch.sum() == len(pd.read_json(paths[2], lines=True))
    _assert_is_a_full_run(spark, index, rows, tmp_path)
    # A compacted index appends the same (its assign table keeps the component ids).
    compact(spark, index)
    extra = rows.iloc[::7].assign(id=lambda f: f.id + 100_000)
    extra.to_json(tmp_path / "extra.jsonl", orient="records", lines=True, date_format="iso")
    run(spark, _cfg(**{"input.path": str(tmp_path / "extra.jsonl"), "index.path": index, "index.append": True,
                       "output.path": str(tmp_path / "out3")}))
    _assert_is_a_full_run(spark, index, pd.concat([rows, extra], ignore_index=True), tmp_path / "compacted")


def test_replaced_texts_recluster_their_components(spark, rows, tmp_path):
    archive = rows.sample(frac=0.7, random_state=4)
    archive.to_json(tmp_path / "archive.jsonl", orient="records", lines=True, date_format="iso")
    index = str(tmp_path / "index")
    api.build_index(spark, _cfg(**{"input.path": str(tmp_path / "archive.jsonl"), "index.path": index}))
    rng = np.random.default_rng(7)
    chain_ids = archive.id[archive.edit == "chain"].to_numpy()
    picked = set(rng.choice(chain_ids, 4, replace=False)) | set(rng.choice(archive.id, 4, replace=False))
    donors = rng.choice(archive.id[~archive.id.isin(picked)], len(picked), replace=False)
    text_of = archive.set_index("id").text
    new_text = {int(i): f"{text_of[d]} follow-up {n}" for n, (i, d) in enumerate(zip(sorted(picked), donors))}
    batch = archive[archive.id.isin(picked)].assign(text=lambda f: f.id.map(new_text))
    batch.to_json(tmp_path / "replace.jsonl", orient="records", lines=True, date_format="iso")
    report = run(spark, _cfg(**{"input.path": str(tmp_path / "replace.jsonl"), "index.path": index,
                                "index.append": True, "index.replace": True, "output.path": str(tmp_path / "out")}))
    assert report["counts"]["replaced"] == len(picked)
    edited = archive.assign(text=[new_text.get(i, t) for i, t in zip(archive.id, archive.text)])
    _assert_is_a_full_run(spark, index, edited, tmp_path)


@pytest.mark.parametrize("linkage", ["components", "keeper"])
def test_pairs_of_a_replaced_text_pass_to_its_copy_for_later_nights(spark, tmp_path, linkage):
    # Text T is stored once with its pairs (by its smallest id, 5001); 5002 is a copy, and
    # 5003 and 5004 are near T. Night 1 replaces 5001 and brings a new copy of T (5005):
    # 5002 inherits 5001's pairs. Night 2 replaces 5004: its story is re-clustered from the
    # stored pairs, which must hold what 5002 inherited, or 5003 falls out of it.
    words = [f"t{i}" for i in range(80)]
    near3 = " ".join([f"x{i}" for i in range(10)] + words[10:])
    near4 = " ".join(words[:70] + [f"y{i}" for i in range(10)])
    sample = pd.read_json(api.SAMPLE, lines=True).iloc[:300]
    story = sample.iloc[:4].assign(id=[5001, 5002, 5003, 5004], text=[" ".join(words)] * 2 + [near3, near4])
    archive = pd.concat([sample, story], ignore_index=True)
    archive.to_json(tmp_path / "archive.jsonl", orient="records", lines=True, date_format="iso")
    link = {"cluster.linkage": linkage}
    index = str(tmp_path / "index")
    api.build_index(spark, _cfg(**link, **{"input.path": str(tmp_path / "archive.jsonl"), "index.path": index}))
    nights = [
        story.iloc[:2].assign(id=[5001, 5005], text=[" ".join(f"u{i}" for i in range(80)), " ".join(words)]),
        story.iloc[3:4].assign(text=" ".join(f"v{i}" for i in range(80))),
    ]
    current = archive.set_index("id")
    for k, night in enumerate(nights):
        night.to_json(tmp_path / f"night{k}.jsonl", orient="records", lines=True, date_format="iso")
        run(spark, _cfg(**link, **{"input.path": str(tmp_path / f"night{k}.jsonl"), "index.path": index,
                                   "index.append": True, "index.replace": True,
                                   "output.path": str(tmp_path / f"out{k}")}))
        current = pd.concat([current.drop(night.id, errors="ignore"), night.set_index("id")])
        _assert_is_a_full_run(spark, index, current.reset_index(), tmp_path / f"check{k}", **link)
    clusters = pd.read_parquet(tmp_path / "check1" / "after" / "clusters").set_index("doc_id").cluster_id
    assert clusters[5002] == clusters[5003] == clusters[5005]


def test_a_replacement_s_moves_are_reported_when_the_night_changes_only_their_component(spark, tmp_path):
    # D (6000) keeps a star of Y (6001) and W (6002). The night replaces D, so Y keeps {Y, W};
    # its newcomer N (6003) matches the unrelated P (100) and Y and W, which merges their
    # components, and P (the smallest id) keeps a star of P and N. Y and W moved (the
    # replacement) and then changed only their component: the night must still list them.
    t = [f"t{i}" for i in range(80)]
    p = [f"p{i}" for i in range(80)]
    texts = {100: p, 6000: t[:70] + [f"d{i}" for i in range(10)], 6001: t, 6002: [f"x{i}" for i in range(10)] + t[10:]}
    sample = pd.read_json(api.SAMPLE, lines=True).iloc[:4]
    archive = sample.assign(id=list(texts), text=[" ".join(w) for w in texts.values()])
    archive.to_json(tmp_path / "archive.jsonl", orient="records", lines=True, date_format="iso")
    rules = {"keeper.rules": ["smallest_id"]}
    index = str(tmp_path / "index")
    api.build_index(spark, _cfg(**rules, **{"input.path": str(tmp_path / "archive.jsonl"), "index.path": index}))
    night = archive.iloc[1:3].assign(id=[6000, 6003], text=[" ".join(f"u{i}" for i in range(80)),
                                                              " ".join(p[:50] + t[20:])])
    night.to_json(tmp_path / "night.jsonl", orient="records", lines=True, date_format="iso")
    run(spark, _cfg(**rules, **{"input.path": str(tmp_path / "night.jsonl"), "index.path": index,
                                "index.append": True, "index.replace": True, "output.path": str(tmp_path / "out")}))
    out = pd.read_parquet(tmp_path / "out" / "clusters").set_index("doc_id")
    assert out.loc[6003, "keeper_id"] == 100 and out.loc[6000, "status"] == "unique"
    assert out.loc[[6001, 6002], "cluster_id"].tolist() == [6001, 6001]
    assert not out.loc[[6001, 6002], "in_batch"].any() and out.index.is_unique
    current = pd.concat([archive.set_index("id").drop([6000]), night.set_index("id")]).reset_index()
    _assert_is_a_full_run(spark, index, current, tmp_path / "check", **rules)


def test_sticky_keepers_stay_and_stars_still_hold(spark, tmp_path):
    # A longer newcomer would keep the story (rule "longest"); sticky, the archived keeper stays.
    base = " ".join(f"w{i}" for i in range(60))
    archive = pd.DataFrame({"id": [1, 2], "text": [base, base + " " + " ".join(f"a{i}" for i in range(12))]})
    batch = pd.DataFrame({"id": [3], "text": [base + " " + " ".join(f"b{i}" for i in range(40))]})
    for name, frame in (("a", archive), ("b", batch)):
        frame.to_json(tmp_path / f"{name}.jsonl", orient="records", lines=True)
    got = {}
    for sticky in (False, True):
        index = str(tmp_path / f"index{sticky}")
        common = {"keeper.rules": ["longest"], "index.path": index}
        api.build_index(spark, _cfg(**{"input.path": str(tmp_path / "a.jsonl"), **common}))
        run(spark, _cfg(**{"input.path": str(tmp_path / "b.jsonl"), "index.append": True,
                           "index.sticky_keeper": sticky, "output.path": str(tmp_path / f"out{sticky}"), **common}))
        api.export(spark, index, str(tmp_path / f"export{sticky}"))
        got[sticky] = pd.read_parquet(tmp_path / f"export{sticky}" / "clusters").set_index("doc_id")
        _assert_stars(got[sticky].reset_index(), pd.concat([archive, batch]))
    assert got[False].loc[3, "is_keeper"]  # the longest text keeps the story
    assert got[True].loc[2, "is_keeper"] and got[True].loc[1, "keeper_id"] == 2  # the archived keeper stays
    assert got[True].loc[3, "keeper_id"] == 2 and got[True].loc[3, "status"] == "duplicate"


def test_the_linkage_is_part_of_the_index_parameters(spark, tmp_path):
    rows = pd.read_json(api.SAMPLE, lines=True).iloc[:200]
    rows.to_json(tmp_path / "a.jsonl", orient="records", lines=True, date_format="iso")
    index = str(tmp_path / "index")
    api.build_index(spark, _cfg(**{"input.path": str(tmp_path / "a.jsonl"), "index.path": index}))
    assert open_index(index).manifest["params"]["cluster"] == {"linkage": "keeper"}
    with pytest.raises(IndexError_, match="cluster.linkage: index 'keeper', now 'components'"):
        run(spark, _cfg(**{"cluster.linkage": "components", "input.path": str(tmp_path / "a.jsonl"),
                           "index.path": index, "index.append": True, "output.path": str(tmp_path / "out")}))
