"""SimHash: the fingerprint against a per-document loop, and the block tables' promise:
every fingerprint within k bits of a stored one shares a bucket with it, none beyond k is kept."""

import itertools

import numpy as np
import pytest

from neardup_spark import simhash
from neardup_spark.hashing import mix64


def _loop_fingerprint(values: np.ndarray, seed: int) -> int:
    if values.size == 0:
        return 0
    h = mix64(values.astype(np.uint64) ^ np.uint64((seed * 0xD6E8FEB86659FD93) & (2**64 - 1)))
    out = 0
    for j in range(64):
        ones = int(((h >> np.uint64(j)) & np.uint64(1)).sum())
        if 2 * ones > values.size:
            out |= 1 << j
    return out - (1 << 64) if out >= 1 << 63 else out


def test_fingerprints_match_a_plain_loop():
    rng = np.random.default_rng(3)
    sets = [np.unique(rng.integers(0, 2**32, size=rng.integers(0, 300), dtype=np.uint64)).astype(np.uint32)
            for _ in range(60)]
    offsets = np.concatenate([[0], np.cumsum([s.size for s in sets])]).astype(np.int64)
    got = simhash.fingerprints(np.concatenate(sets), offsets, seed=5)
    assert got.tolist() == [_loop_fingerprint(s, 5) for s in sets]


def test_near_sets_have_near_fingerprints():
    rng = np.random.default_rng(4)
    base = np.unique(rng.integers(0, 2**32, size=400, dtype=np.uint64)).astype(np.uint32)
    edited = base.copy()
    edited[:4] = rng.integers(0, 2**32, size=4, dtype=np.uint64).astype(np.uint32)  # 1% of shingles changed
    other = np.unique(rng.integers(0, 2**32, size=400, dtype=np.uint64)).astype(np.uint32)
    prints = simhash.fingerprints(np.concatenate([base, edited, other]), np.array([0, 400, 800, 1200]), seed=1)
    d = simhash.hamming(prints[[0, 0]], prints[[1, 2]])
    assert d[0] <= 6 and 20 <= d[1] <= 44  # unrelated sets: ~32 bits apart


def _flip(prints: np.ndarray, bits) -> np.ndarray:
    mask = np.uint64(sum(1 << b for b in bits))
    return (prints.view(np.uint64) ^ mask).view(np.int64)


@pytest.mark.parametrize("distance, blocks", [(3, 4), (3, 6), (2, 3), (1, 2), (0, 1)])
def test_block_tables_find_every_planted_match_within_k(distance, blocks):
    rng = np.random.default_rng(distance * 10 + blocks)
    stored = rng.integers(-(2**63), 2**63 - 1, size=40, dtype=np.int64)
    keys = simhash.table_keys(stored, distance, blocks)
    assert keys.shape == (40, len(list(itertools.combinations(range(blocks), blocks - distance))))
    for i in range(stored.size):
        for flips in range(distance + 2):
            bits = rng.choice(64, size=flips, replace=False)
            planted = _flip(stored[i : i + 1], bits)
            shares = bool(np.intersect1d(simhash.table_keys(planted, distance, blocks)[0], keys[i]).size)
            within = int(simhash.hamming(planted, stored[i : i + 1])[0]) <= distance
            if flips <= distance:
                assert shares and within  # found, and kept by verification
            else:
                assert not within  # one bit beyond: verification drops it, whatever the tables say


def test_adversarial_spread_of_k_flips_still_shares_a_block():
    # k flips in k different blocks: exactly blocks-k blocks stay intact.
    stored = np.array([0x0123456789ABCDEF], dtype=np.uint64).view(np.int64)
    masks = simhash.block_masks(6)
    first_bits = [next(b for b in range(64) if m >> b & 1) for m in masks]
    for chosen in itertools.combinations(first_bits, 3):
        planted = _flip(stored, chosen)
        assert np.intersect1d(simhash.table_keys(planted, 3, 6)[0], simhash.table_keys(stored, 3, 6)[0]).size


def test_bad_layouts_are_refused():
    with pytest.raises(ValueError):
        simhash.table_masks(3, 3)
    with pytest.raises(ValueError):
        simhash.block_masks(0)


def test_pipeline_clusters_are_the_components_of_all_pairs_within_k(spark):
    import pandas as pd

    from neardup_spark import Config, cli, deduplicate, hashing
    from neardup_spark.params import lsh_params
    from neardup_spark.sketch import SimHashLayout, sketch_frame

    from . import oracles

    rows = pd.read_json(cli.SAMPLE, lines=True)
    cfg = Config().with_overrides({"match.method": "simhash", "simhash.hamming_distance": 4})
    result = deduplicate(spark.createDataFrame(rows[["id", "text"]]), cfg)
    got = result.clusters.toPandas()
    assert result.report["lsh"]["tables"] == 5
    result.unpersist()
    # Oracle: every fingerprint against every other, within 4 bits, plus exact copies; union-find.
    a, b = hashing.permutations(cfg.minhash.num_perm, cfg.minhash.seed)
    frame = sketch_frame(rows["text"], cfg.normalise, "word", 5, cfg.minhash.seed, a, b, lsh_params(cfg),
                         sim=SimHashLayout.of(cfg))
    prints = frame["simhash"].to_numpy()
    ids = rows["id"].to_numpy()
    edges = []
    for i in range(len(ids)):
        d = simhash.hamming(np.full(len(ids) - i - 1, prints[i]), prints[i + 1 :])
        edges += [(ids[i], ids[j]) for j in np.flatnonzero(d <= 4) + i + 1]
    reps = oracles.exact_groups(rows.to_dict("records"))
    edges += [(i, r) for i, r in reps.items() if r is not None and r != i]
    want = oracles.union_find_clusters(list(ids), edges)
    assert dict(zip(got.doc_id, got.cluster_id)) == want
