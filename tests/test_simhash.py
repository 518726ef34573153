"""SimHash: the fingerprint against a per-document loop, and the block tables' promise:
every fingerprint within k bits of a stored one shares a bucket with it, none beyond k is kept."""

import itertools

import numpy as np
import pytest

from neardup_spark.kernels import simhash
from neardup_spark.kernels.hashing import mix64

_SALTS = (0xD6E8FEB86659FD93, 0xA0761D6478BD642F)


def _signed(word: int) -> int:
    return word - (1 << 64) if word >= 1 << 63 else word


def _loop_fingerprint(values: np.ndarray, seed: int, bits: int = 64, weights=None) -> list[int]:
    """Charikar's definition, one shingle and one bit at a time: +w if the bit is set, -w if not."""
    weights = [1] * values.size if weights is None else list(weights)
    out = []
    for w in range(bits // 64):
        h = mix64(values.astype(np.uint64) ^ np.uint64((seed * _SALTS[w]) & (2**64 - 1)))
        word = 0
        for j in range(64):
            score = sum(wt if (int(x) >> j) & 1 else -wt for x, wt in zip(h, weights))
            if score > 0:
                word |= 1 << j
        out.append(_signed(word))
    return out


def _random_sets(seed: int, n: int = 60):
    rng = np.random.default_rng(seed)
    sets = [np.unique(rng.integers(0, 2**32, size=rng.integers(0, 300), dtype=np.uint64)).astype(np.uint32)
            for _ in range(n)]
    offsets = np.concatenate([[0], np.cumsum([s.size for s in sets])]).astype(np.int64)
    return sets, np.concatenate(sets), offsets


@pytest.mark.parametrize("bits", [64, 128])
def test_fingerprints_match_a_plain_loop(bits):
    sets, values, offsets = _random_sets(3, 40)
    got = simhash.fingerprints(values, offsets, seed=5, bits=bits)
    assert got.shape == (len(sets), bits // 64)
    assert got.tolist() == [_loop_fingerprint(s, 5, bits) for s in sets]


def test_tf_weights_count_each_occurrence():
    sets, values, offsets = _random_sets(8, 30)
    counts = np.random.default_rng(9).integers(1, 6, size=values.size).astype(np.int32)
    got = simhash.fingerprints(values, offsets, seed=2, bits=128, counts=counts)
    want = [_loop_fingerprint(s, 2, 128, counts[offsets[i] : offsets[i + 1]]) for i, s in enumerate(sets)]
    assert got.tolist() == want
    # All-ones counts are the unweighted fingerprint.
    ones = simhash.fingerprints(values, offsets, 2, 128, np.ones(values.size, np.int32))
    assert (ones == simhash.fingerprints(values, offsets, 2, 128)).all()


def test_shingle_counts_are_occurrences_in_the_text():
    from neardup_spark.kernels import hashing

    texts = ["a b c a b c a b c", "x y", "", "p q r s"]
    values, offsets, counts = hashing.shingle_texts(texts, "word", 3, 1, with_counts=True)
    plain, plain_offsets = hashing.shingle_texts(texts, "word", 3, 1)
    assert (values == plain).all() and (offsets == plain_offsets).all()
    # text 0 windows: abc bca cab abc bca cab abc -> abc x3, bca x2, cab x2.
    assert sorted(counts[offsets[0] : offsets[1]].tolist()) == [2, 2, 3]
    assert counts[offsets[1] : offsets[2]].tolist() == [1]  # shorter than k: one shingle
    assert counts[offsets[3] : offsets[4]].tolist() == [1, 1]


def test_128_bits_separate_unrelated_sets_more_sharply():
    # The distance of unrelated sets is Binomial(bits, 1/2): relative spread 1/sqrt(bits).
    _, values, offsets = _random_sets(11, 200)
    for bits, lo, hi in ((64, 0.3, 0.7), (128, 0.36, 0.64)):
        prints = simhash.fingerprints(values, offsets, 1, bits)
        d = simhash.hamming(prints[:-1], prints[1:]) / bits
        nonempty = (np.diff(offsets)[:-1] > 0) & (np.diff(offsets)[1:] > 0)
        assert abs(d[nonempty].mean() - 0.5) < 0.03
        assert (np.std(d[nonempty]) - 0.5 / np.sqrt(bits)) < 0.02


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
    """Flip the given bit positions of [n, words] fingerprints."""
    out = prints.copy().view(np.uint64)
    for b in bits:
        out[:, b // 64] ^= np.uint64(1 << (b % 64))
    return out.view(np.int64)


@pytest.mark.parametrize("distance, blocks, bits", [(3, 4, 64), (3, 6, 64), (2, 3, 64), (1, 2, 64), (0, 1, 64),
                                                    (3, 4, 128), (6, 8, 128)])
def test_block_tables_find_every_planted_match_within_k(distance, blocks, bits):
    rng = np.random.default_rng(distance * 10 + blocks + bits)
    stored = rng.integers(-(2**63), 2**63 - 1, size=(40, bits // 64), dtype=np.int64)
    keys = simhash.table_keys(stored, distance, blocks)
    assert keys.shape == (40, len(list(itertools.combinations(range(blocks), blocks - distance))))
    for i in range(len(stored)):
        for flips in range(distance + 2):
            bits_ = rng.choice(bits, size=flips, replace=False)
            planted = _flip(stored[i : i + 1], bits_)
            shares = bool(np.intersect1d(simhash.table_keys(planted, distance, blocks)[0], keys[i]).size)
            within = int(simhash.hamming(planted, stored[i : i + 1])[0]) <= distance
            if flips <= distance:
                assert shares and within  # found, and kept by verification
            else:
                assert not within  # one bit beyond: verification drops it, whatever the tables say


def test_adversarial_spread_of_k_flips_still_shares_a_block():
    # k flips in k different blocks: exactly blocks-k blocks stay intact.
    for bits in (64, 128):
        stored = np.array([[0x0123456789ABCDEF, 0x0F1E2D3C4B5A6978][: bits // 64]], dtype=np.uint64).view(np.int64)
        masks = simhash.block_masks(6, bits)
        first_bits = [next(b for b in range(bits) if m >> b & 1) for m in masks]
        for chosen in itertools.combinations(first_bits, 3):
            planted = _flip(stored, chosen)
            assert np.intersect1d(simhash.table_keys(planted, 3, 6)[0], simhash.table_keys(stored, 3, 6)[0]).size
        # Four flips in four blocks leave only two intact: no table of three blocks matches.
        planted = _flip(stored, first_bits[:4])
        assert not np.intersect1d(simhash.table_keys(planted, 3, 6)[0], simhash.table_keys(stored, 3, 6)[0]).size


def test_128_bit_blocks_straddle_the_word_boundary():
    masks = simhash.block_masks(3, 128)
    assert sum(bin(m).count("1") for m in masks) == 128 and masks[1] >> 64 and masks[1] & (2**64 - 1)


def test_bad_layouts_are_refused():
    with pytest.raises(ValueError):
        simhash.table_masks(3, 3)
    with pytest.raises(ValueError):
        simhash.block_masks(0)


@pytest.mark.parametrize("bits, weighting, k", [(64, "none", 4), (128, "tf", 9)])
def test_pipeline_clusters_are_the_components_of_all_pairs_within_k(spark, bits, weighting, k):
    import pandas as pd

    from neardup_spark import Config, api, deduplicate
    from neardup_spark.kernels import hashing
    from neardup_spark.kernels.lsh import lsh_params
    from neardup_spark.kernels.sketch import SimHashLayout
    from neardup_spark.kernels.sketch import sketch_frame

    from . import oracles

    rows = pd.read_json(api.SAMPLE, lines=True)
    cfg = Config().with_overrides({"match.method": "simhash", "simhash.hamming_distance": k,
                                   "simhash.bits": bits, "simhash.weighting": weighting,
                                   "cluster.linkage": "components"})  # components: the union-find oracle
    result = deduplicate(spark.createDataFrame(rows[["id", "text"]]), cfg)
    got = result.clusters.toPandas()
    assert result.report["lsh"]["tables"] == k + 1
    assert result.report["lsh"]["fingerprint_bytes"] == bits // 8
    assert result.report["counts"]["verified_pairs"] > 100
    result.unpersist()
    # Oracle: every fingerprint against every other, within k bits, plus exact copies; union-find.
    a, b = hashing.permutations(cfg.minhash.num_perm, cfg.minhash.seed)
    frame = sketch_frame(rows["text"], cfg.normalise, "word", 5, cfg.minhash.seed, a, b, lsh_params(cfg),
                         sim=SimHashLayout.of(cfg))
    prints = frame[simhash.columns(bits)].to_numpy()
    ids = rows["id"].to_numpy()
    edges = []
    for i in range(len(ids)):
        d = simhash.hamming(np.repeat(prints[i : i + 1], len(ids) - i - 1, axis=0), prints[i + 1 :])
        edges += [(ids[i], ids[j]) for j in np.flatnonzero(d <= k) + i + 1]
    reps = oracles.exact_groups(rows.to_dict("records"))
    edges += [(i, r) for i, r in reps.items() if r is not None and r != i]
    want = oracles.union_find_clusters(list(ids), edges)
    assert dict(zip(got.doc_id, got.cluster_id)) == want
