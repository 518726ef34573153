"""Containment mode: short stories pasted into pages 5-10x longer are found (recall >= 0.95
at containment 0.8), with the direction reported, while Jaccard mode misses them."""

import numpy as np
import pandas as pd
import pytest

from neardup_spark import Config, deduplicate
from neardup_spark.config import ConfigError
from neardup_spark.kernels.containment import advice, size_classes
from neardup_spark.kernels.lsh import candidate_probability

VOCAB = [f"w{i}" for i in range(30_000)]


def _pages(n_stories: int = 60, n_unrelated: int = 150, seed: int = 2) -> tuple[pd.DataFrame, list]:
    rng = np.random.default_rng(seed)
    words = lambda n: " ".join(rng.choice(VOCAB, size=n))  # noqa: E731
    rows, pairs, next_id = [], [], 1
    for _ in range(n_stories):
        story_len = int(rng.integers(100, 301))
        story = words(story_len)
        total = int(story_len * rng.uniform(5, 10))
        filler = words(total - story_len).split(" ")
        cut = int(rng.integers(0, len(filler)))
        page = " ".join(filler[:cut]) + " " + story + " " + " ".join(filler[cut:])
        rows += [(next_id, story), (next_id + 1, page)]
        pairs.append((next_id, next_id + 1))
        next_id += 2
    for _ in range(n_unrelated):
        rows.append((next_id, words(int(rng.integers(100, 2500)))))
        next_id += 1
    return pd.DataFrame(rows, columns=["id", "text"]), pairs


def test_size_classes_catch_their_jaccard_floor():
    classes = size_classes(0.8, 128, 16)
    assert [c.k for c in classes] == [0, 1, 2, 3, 4]
    for c in classes:
        assert candidate_probability(c.jaccard_floor, c.bands, c.rows) >= 0.95
        # A pair at the class's largest size ratio with containment exactly 0.8 has that Jaccard.
        q, x = 100, 100 * 2**c.k
        assert c.jaccard_floor == pytest.approx(0.8 * q / (q + x - 0.8 * q))


def test_advice_speaks_of_the_size_classes_not_of_jaccard_bands():
    from neardup_spark.plan import resolve

    def run_advice(cfg):
        return resolve(cfg).advice

    cfg = Config().with_overrides({"match.mode": "containment"})
    assert run_advice(cfg) == []  # every class catches its floor at num_perm 128
    # The Jaccard bands' advice (threshold 0.3 catches 0.683) describes bands this mode never uses.
    assert run_advice(Config()) and "0.683" in run_advice(Config())[0]
    small = cfg.with_overrides({"minhash.num_perm": 32})
    notes = run_advice(small)
    weak = [c for c in size_classes(0.8, 32, 16) if candidate_probability(c.jaccard_floor, c.bands, c.rows) < 0.9]
    assert len(notes) == len(weak) == 1 and "size class 4" in notes[0] and "0.141" in notes[0]
    assert advice(size_classes(0.8, 8, 16), 0.8) and all("containment 0.8" in n for n in advice(size_classes(0.8, 8, 16), 0.8))
    # Only fixes that can help: no ratio to lower for like sizes, no num_perm above the maximum.
    like = advice(size_classes(0.8, 2, 1), 0.8, num_perm=2)
    assert like and "like size" in like[0] and "max_size_ratio" not in like[0] and "num_perm (now 2)" in like[0]
    top = advice(size_classes(0.5, 4096, 1024), 0.5, num_perm=4096)
    assert top and not any("num_perm" in n for n in top)
    pinned = run_advice(cfg.with_overrides({"lsh.bands": 4, "lsh.rows": 4}))
    assert len(pinned) == 1 and "set but unused" in pinned[0]


@pytest.fixture(scope="module")
def pages(spark):
    rows, pairs = _pages()
    return spark.createDataFrame(rows), rows, pairs


def _found(result, pairs) -> float:
    cluster = dict(result.clusters.select("doc_id", "cluster_id").toPandas().itertuples(index=False))
    return sum(cluster[a] == cluster[b] for a, b in pairs) / len(pairs)


def test_stories_inside_long_pages_are_found_and_pointed_at_their_page(pages):
    raw, rows, pairs = pages
    cfg = Config().with_overrides({"match.mode": "containment", "match.containment_threshold": 0.8})
    result = deduplicate(raw, cfg)
    recall = _found(result, pairs)
    found = result.pairs.toPandas()
    clusters = result.clusters.toPandas().set_index("doc_id")
    report = result.report
    result.unpersist()
    print(f"\ncontainment recall {recall:.3f}, {len(found)} pairs, candidates {report['counts']['candidate_pairs']}")
    assert recall >= 0.95
    story_of = dict(pairs)
    for row in found.itertuples():
        # Every verified pair is a story and its page; the story (doc_a) lies inside the page.
        assert story_of.get(row.doc_a) == row.doc_b and row.containment_a >= 0.8 and row.jaccard < 0.3
    for story, page in pairs:
        if clusters.loc[story, "cluster_id"] == clusters.loc[page, "cluster_id"]:
            assert clusters.loc[story, "keeper_id"] == page  # the contained document points at its container
    assert report["lsh"]["mode"] == "containment" and len(report["lsh"]["size_classes"]) == 5


def test_jaccard_mode_misses_them(pages):
    raw, rows, pairs = pages
    result = deduplicate(raw, Config().with_overrides({"verify.threshold": 0.3}))
    recall = _found(result, pairs)
    result.unpersist()
    assert recall <= 0.05


def test_containment_needs_minhash_and_no_index():
    with pytest.raises(ConfigError, match="minhash"):
        Config().with_overrides({"match.mode": "containment", "match.method": "simhash"})
    with pytest.raises(ConfigError, match="jaccard"):
        Config().with_overrides({"match.mode": "containment", "index.path": "/x", "index.append": True})
