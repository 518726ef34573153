"""The fused sketch kernel (no JVM): digests, stored shingle sets, band keys, intersections."""

import hashlib

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from neardup_spark.kernels import hashing as H
from neardup_spark.config import Config
from neardup_spark.kernels.normalise import normalise_text
from neardup_spark.kernels.lsh import lsh_params
from neardup_spark.kernels.sketch import band_keys, digest, sketch_frame
from neardup_spark.stages.verify import pair_sizes, set_arrays

CFG = Config()
LSH = lsh_params(CFG)
A, B = H.permutations(CFG.minhash.num_perm, CFG.minhash.seed)


def frame(texts):
    return sketch_frame(pd.Series(texts, dtype=object), CFG.normalise, "word", 5, CFG.minhash.seed, A, B, LSH)


def test_sketch_matches_the_kernels_it_fuses():
    texts = ["The cat sat on the mat, again and again.", "Another text  entirely here today friends", None, " ... "]
    out = frame(texts)
    for i in (0, 1):
        norm = normalise_text(texts[i])
        values, offsets = H.shingle_texts([norm], "word", 5, CFG.minhash.seed)
        assert np.array_equal(H.unpack_set(out.iloc[i]["shingles"]), values)
        sig = H.minhash(values, offsets, A, B)
        assert np.array_equal(out.iloc[i]["bands"], band_keys(sig, LSH.bands, LSH.rows)[0])
        assert out.iloc[i]["exact_hash"] == digest(norm)
    for i in (2, 3):  # null and punctuation-only: empty, no shingles, no bands
        assert out.iloc[i]["exact_hash"] is None and out.iloc[i]["shingles"] == b"" and len(out.iloc[i]["bands"]) == 0


def test_same_normalised_text_same_sketch_in_any_batch():
    a = frame(["Hello, World! " * 20, "x y z"]).iloc[0]
    b = frame(["q"] * 700 + ["hello world " * 20]).iloc[-1]  # crosses a sub-batch boundary
    assert a["exact_hash"] == b["exact_hash"] and a["shingles"] == b["shingles"]
    assert np.array_equal(a["bands"], b["bands"])


def test_band_keys_share_exactly_the_equal_bands():
    rng = np.random.default_rng(3)
    sig = rng.integers(0, 2**32, size=(2, 12), dtype=np.uint64).astype(np.uint32)
    sig[1, 3:6] = sig[0, 3:6]  # band 1 of (4 bands x 3 rows) equal
    keys = band_keys(sig, 4, 3)
    assert keys.shape == (2, 4) and keys.dtype == np.int64
    assert [keys[0, i] == keys[1, i] for i in range(4)] == [False, True, False, False]
    same = np.tile(sig[0, :3], 4).reshape(1, 12)  # equal values in every band: keys still differ by band
    assert len(set(band_keys(same, 4, 3)[0])) == 4


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_intersection_sizes_match_python_sets(seed):
    rng = np.random.default_rng(seed)
    sets = [np.unique(rng.integers(0, 2**32, size=rng.integers(0, 60), dtype=np.uint64)).astype("<u4") for _ in range(40)]
    sets += [sets[0][::2].copy(), np.zeros(0, "<u4")]
    blobs = [s.tobytes() for s in sets]
    pairs = [(i, j) for i in range(len(sets)) for j in range(len(sets))]
    got = H.intersection_sizes([blobs[i] for i, _ in pairs], [blobs[j] for _, j in pairs])
    want = [len(set(sets[i].tolist()) & set(sets[j].tolist())) for i, j in pairs]
    assert got.tolist() == want


def test_set_arrays_join_chunks_of_either_offset_width():
    sets = [[1, 5, 9], [], [2**32 - 1], [3, 4]]
    blobs = [np.array(x, "<u4").tobytes() for x in sets]
    for kind in (pa.binary(), pa.large_binary()):
        column = pa.chunked_array([
            pa.array(blobs[:3], kind).slice(1),  # a sliced chunk: its offsets start past 0
            pa.array(blobs[3:], kind),
            pa.array(blobs, kind),
        ])
        offsets, values = set_arrays(column)
        got = [values[offsets[i]:offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]
        assert got == sets[1:3] + sets[3:] + sets
    with pytest.raises(ValueError, match="whole number"):
        set_arrays(pa.chunked_array([pa.array([b"abc"], pa.binary())]))


def test_pair_sizes_find_each_set_once_and_refuse_a_missing_one():
    sets = {7: [1, 2, 3], -4: [2, 3, 4, 5], 9: [], 2: [9]}
    ids = np.array([7, -4, 9, 2, 7], np.int64)  # 7 given twice: its first set counts
    rows = [sets[i] for i in ids[:4].tolist()] + [[100, 200]]
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int64)
    values = np.array([v for r in rows for v in r], np.uint32)
    a, b = np.array([7, 7, -4, 2], np.int64), np.array([-4, 9, 2, 7], np.int64)
    inter, na, nb = pair_sizes(ids, offsets, values, a, b)
    assert inter.tolist() == [len(set(sets[x]) & set(sets[y])) for x, y in zip(a.tolist(), b.tolist())]
    assert na.tolist() == [len(sets[x]) for x in a.tolist()] and nb.tolist() == [len(sets[y]) for y in b.tolist()]
    with pytest.raises(AssertionError, match=r"ids \[5\]"):
        pair_sizes(ids, offsets, values, np.array([7], np.int64), np.array([5], np.int64))


def test_digests_and_sets_do_not_depend_on_script_or_chunking(monkeypatch):
    # ASCII chunks take a shortcut to UTF-8; others are decoded. Chunks of any size agree.
    texts = ["plain ascii words here and there " * 3, "naïve café — “quoted” words, here", "\U0001f600 emoji  text",
             "\ud800 lone surrogate text", "...", None] * 5
    whole = frame(texts)
    monkeypatch.setattr(H, "CHUNK_CHARS", 7)
    monkeypatch.setattr(H, "TOKEN_CHARS", 7)
    cut = frame(texts)
    for i, t in enumerate(texts):
        want = digest(normalise_text(t)) if t is not None and normalise_text(t) else None
        assert whole.iloc[i]["exact_hash"] == cut.iloc[i]["exact_hash"] == want
        assert whole.iloc[i]["shingles"] == cut.iloc[i]["shingles"]
        assert np.array_equal(whole.iloc[i]["bands"], cut.iloc[i]["bands"])


GOLDEN_TEXTS = ["The cat sat on the mat, again and again, while the dog slept by the door.",
                "naïve café — “quoted” words, ünï 日本 नमस्ते \U0001f600 and so on", "two words", "one",
                "Ünïcode   SPACING\tand\nlines\u00a0here, ﬁne Ⅻ " * 3]


@pytest.mark.parametrize("unit, k, want", [("word", 5, "72a55b5787861f41"), ("word", 1, "536908170c4efaba"),
                                           ("char", 4, "84300aabde183b80")])
def test_sketch_values_do_not_drift_between_versions(unit, k, want):
    # An archive index keeps exact hashes, shingle sets and band keys from earlier runs,
    # so a faster kernel must give the very same bytes: these were written by 7386e16.
    out = sketch_frame(pd.Series(GOLDEN_TEXTS, dtype=object), CFG.normalise, unit, k, CFG.minhash.seed, A, B, LSH)
    h = hashlib.sha256()
    for _, row in out.iterrows():
        h.update(row["exact_hash"])
        h.update(row["shingles"])
        h.update(np.asarray(row["bands"], np.int64).tobytes())
    assert h.hexdigest()[:16] == want


def test_shingle_counts_do_not_drift_between_versions():
    values, offsets, counts = H.shingle_texts(["a b a b a b c", "x x x x", "solo"], "word", 2, 7, with_counts=True)
    assert values.tolist() == [1955032401, 3232589655, 3720613817, 1839558010, 2070111271]
    assert offsets.tolist() == [0, 3, 4, 5] and counts.tolist() == [1, 2, 3, 3, 1]
