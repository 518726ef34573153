"""Kernels against plain-Python oracles and MinHash theory; no JVM."""

import numpy as np
import pytest

from neardup_spark.kernels import hashing as H


def py_shingles(text: str, k: int) -> set[tuple[str, ...]]:
    words = text.split()
    if not words:
        return set()
    if len(words) < k:
        return {tuple(words)}
    return {tuple(words[i : i + k]) for i in range(len(words) - k + 1)}


def kernel_sets(texts, unit="word", k=5, seed=1):
    values, offsets = H.shingle_texts(texts, unit, k, seed)
    return [set(s.tolist()) for s in np.split(values, offsets[1:-1])]


def random_texts(rng, n, vocab=200, lo=0, hi=60):
    words = [f"w{i}" for i in range(vocab)] + ["ünï", "日本", "नमस्ते"]
    return [" ".join(rng.choice(words, size=rng.integers(lo, hi))) for _ in range(n)]


@pytest.mark.parametrize("k", [1, 3, 5])
def test_word_shingle_sets_match_python_oracle(k):
    rng = np.random.default_rng(k)
    texts = random_texts(rng, 300)
    got = kernel_sets(texts, k=k)
    for text, s in zip(texts, got):
        assert len(s) == len(py_shingles(text, k))  # distinct, one value per distinct shingle
    # Jaccard equals the oracle's exactly (32-bit collisions are ~1e-5 per pair here).
    for i in range(0, 300, 7):
        for j in range(1, 300, 11):
            a, b = py_shingles(texts[i], k), py_shingles(texts[j], k)
            if a | b:
                want = len(a & b) / len(a | b)
                have = len(got[i] & got[j]) / len(got[i] | got[j])
                assert have == pytest.approx(want, abs=1e-12)


def test_short_and_empty_texts():
    sets = kernel_sets(["", "one", "one two", "two one", "one two three four five six"])
    assert [len(s) for s in sets] == [0, 1, 1, 1, 2]
    assert sets[2] != sets[3]  # order matters within the short-text shingle


def test_same_text_same_values_in_any_batch():
    texts = ["alpha beta gamma delta epsilon zeta", "x y", "eta theta iota kappa lambda mu nu"]
    alone = [kernel_sets([t])[0] for t in texts]
    assert kernel_sets(texts) == alone
    assert kernel_sets(texts[::-1]) == alone[::-1]


def test_seed_changes_values_not_sets():
    a, b = kernel_sets(["a b c d e f g h"], seed=1)[0], kernel_sets(["a b c d e f g h"], seed=2)[0]
    assert a != b and len(a) == len(b) == 4


def test_char_ngrams():
    sets = kernel_sets(["abcde", "ab", "", "aaaa"], unit="char", k=3)
    assert [len(s) for s in sets] == [3, 1, 0, 1]


def test_minhash_matches_a_direct_computation():
    rng = np.random.default_rng(0)
    a, b = H.permutations(16, 3)
    sets = [rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32) for n in (5, 0, 1, 40)]
    offsets = np.cumsum([0] + [s.size for s in sets])
    sig = H.minhash(np.concatenate(sets), offsets, a, b)
    for row, s in zip(sig, sets):
        if s.size == 0:
            assert (row == H.EMPTY_SLOT).all()
            continue
        direct = [min(((int(ai) * int(x) + int(bi)) % 2**32) for x in s) for ai, bi in zip(a, b)]
        assert row.tolist() == direct


@pytest.mark.parametrize("jaccard", [0.3, 0.6, 0.9])
def test_minhash_is_unbiased_with_theoretical_spread(jaccard):
    """1,000 seeds at P=128: |bias| < 0.005 and RMSE within 15% of sqrt(J(1-J)/P)."""
    union, perm = 1000, 128
    inter = int(round(jaccard * union))
    only = (union - inter) // 2
    units = np.arange(union, dtype=np.uint64) * np.uint64(2654435761) + np.uint64(12345)
    a_idx, b_idx = np.arange(0, only + inter), np.arange(only, union)
    assert len(set(a_idx) & set(b_idx)) / union == pytest.approx(jaccard)
    estimates = []
    for seed in range(1000):
        # k=1 shingles of distinct units: the seed re-hashes every value.
        vals, offs = H.shingle_hashes(np.concatenate([units[a_idx], units[b_idx]]),
                                      np.array([0, a_idx.size, a_idx.size + b_idx.size]), 1, seed)
        pa, pb = H.permutations(perm, seed)
        sig = H.minhash(vals, offs, pa, pb)
        estimates.append(np.mean(sig[0] == sig[1]))
    est = np.array(estimates)
    theory = np.sqrt(jaccard * (1 - jaccard) / perm)
    rmse = np.sqrt(np.mean((est - jaccard) ** 2))
    assert abs(est.mean() - jaccard) < 0.005
    assert abs(rmse / theory - 1) < 0.15


def test_permutations_are_seeded_and_odd():
    a1, b1 = H.permutations(128, 5)
    a2, b2 = H.permutations(128, 5)
    assert (a1 == a2).all() and (b1 == b2).all()
    assert (a1 % 2 == 1).all()
    assert not (H.permutations(128, 6)[0] == a1).all()


def test_mix64_is_a_bijection_on_a_sample():
    x = np.arange(100_000, dtype=np.uint64)
    assert np.unique(H.mix64(x)).size == x.size


def test_ranges_under_cover_every_item_once_within_the_cap():
    from neardup_spark.kernels.hashing import ranges_under

    weights = np.array([3, 1, 1, 9, 0, 2, 2, 2, 5])
    got = list(ranges_under(weights, 4))
    assert got == [(0, 2), (2, 3), (3, 4), (4, 7), (7, 8), (8, 9)]  # the 9 alone: heavier than the cap
    for lo, hi in got:
        assert hi - lo == 1 or weights[lo:hi].sum() <= 4
    assert list(ranges_under(np.array([], dtype=np.int64), 4)) == []


@pytest.mark.parametrize("punctuation", [True, False])
def test_utf8_word_units_hash_every_token_as_the_code_point_path_does(punctuation):
    # The sketch finds words in UTF-8 with Arrow's dictionary encoding; the hashes must be
    # the code-point path's, token for token, or signatures (and archive indexes) change.
    from neardup_spark.config import NormaliseConfig
    from neardup_spark.kernels.normalise import normalised_codepoints, normalised_utf8

    opts = NormaliseConfig(punctuation=punctuation)
    rng = np.random.default_rng(5)
    texts = random_texts(rng, 200, lo=0, hi=40)
    texts += ["", "   ", "one", "  lead and trail  ", "a,b;;c  --  d\te\nf", "\U0001f600 x \U0001f600", "é" * 30]
    data, offsets = normalised_utf8(texts, opts)
    got, got_offsets = H.utf8_word_units(data, offsets)
    want, want_offsets = H.word_units(*normalised_codepoints(texts, opts))
    assert np.array_equal(got_offsets, want_offsets)
    assert np.array_equal(got, want)
    # Each non-empty text is its normalised UTF-8 and one space; an empty one has no bytes.
    cps, cp_offsets = normalised_codepoints(texts, opts)
    for i in range(len(texts)):
        text = cps[cp_offsets[i] : cp_offsets[i + 1]].astype("<u4").tobytes().decode("utf-32-le")
        assert bytes(data[offsets[i] : offsets[i + 1]]) == (text + " " if text else "").encode("utf-8")


def test_utf8_word_units_of_nothing():
    got, offsets = H.utf8_word_units(np.zeros(0, np.uint8), np.zeros(3, np.int64))
    assert got.size == 0 and offsets.tolist() == [0, 0, 0]


def _unspaced_char(ch: str) -> bool:
    return any(lo <= ord(ch) <= hi for lo, hi in H.UNSPACED_BLOCKS)


def py_script_words(text: str) -> list[str]:
    """The oracle of `script_units`: space-separated words, each character of a script
    written without spaces split off as a word of its own."""
    out = []
    for word in text.split():
        run = ""
        for ch in word:
            if _unspaced_char(ch):
                if run:
                    out.append(run)
                    run = ""
                out.append(ch)
            else:
                run += ch
        if run:
            out.append(run)
    return out


def test_unspaced_scripts_are_found_by_block():
    samples = {"新": True, "の": True, "カ": True, "ไ": True, "ລ": True, "ក": True, "က": True, "ཀ": False,
               "𠀀": True, "한": False, "a": False, "é": False, "я": False, "ا": False, "न": False, "1": False,
               "€": False, "。": False}
    cps = np.array([ord(c) for c in samples], dtype=np.uint32)
    assert H.unspaced(cps).tolist() == list(samples.values())


@pytest.mark.parametrize("k", [1, 3, 5])
def test_script_units_split_unspaced_characters_and_keep_words(k):
    rng = np.random.default_rng(10 + k)
    han = [chr(c) for c in rng.integers(0x4E00, 0x9FFF, size=300)]
    thai = [chr(c) for c in rng.integers(0x0E01, 0x0E2E, size=40)]
    latin = [f"w{i}" for i in range(100)]
    pieces = han + thai + latin + ["日本語", "ünï", "x新y"]
    texts = ["".join(rng.choice(pieces, size=rng.integers(0, 50))) if i % 3 else
             " ".join(rng.choice(pieces, size=rng.integers(0, 50))) for i in range(300)]
    got = kernel_sets(texts, unit="auto", k=k)
    for text, s in zip(texts, got):
        words = py_script_words(text)
        oracle = {tuple(words[i:i + k]) for i in range(len(words) - k + 1)} if len(words) >= k else (
            {tuple(words)} if words else set())
        assert len(s) == len(oracle)
    # A unit is the same word wherever it stands: the kernel's Jaccard is the oracle's.
    for i in range(0, 300, 13):
        for j in range(1, 300, 17):
            a, b = [py_script_words(texts[x]) for x in (i, j)]
            sa = {tuple(a[p:p + k]) for p in range(len(a) - k + 1)} if len(a) >= k else ({tuple(a)} if a else set())
            sb = {tuple(b[p:p + k]) for p in range(len(b) - k + 1)} if len(b) >= k else ({tuple(b)} if b else set())
            if sa | sb:
                assert len(got[i] & got[j]) / len(got[i] | got[j]) == pytest.approx(
                    len(sa & sb) / len(sa | sb), abs=1e-12)


def test_auto_units_of_space_written_text_are_its_words():
    rng = np.random.default_rng(3)
    texts = [t.replace("日本", "nihon") for t in random_texts(rng, 200)] + ["naïve café € 3 — done", "", "x",
                                                                          "Привет мир", "नमस्ते दुनिया", "한국어 문장"]
    assert kernel_sets(texts, unit="auto") == kernel_sets(texts, unit="word")


@pytest.mark.parametrize("unit", ["word", "auto"])
def test_the_sketch_gives_auto_the_code_point_paths_sets(unit):
    """The sketch reads words from UTF-8 and takes the code-point path only for a group with
    unspaced characters; either way the sets are the oracle path's (hashing.shingle_codepoints)."""
    from neardup_spark.config import NormaliseConfig
    from neardup_spark.kernels.normalise import normalised_codepoints
    from neardup_spark.kernels.sketch import shingle_sets

    opts = NormaliseConfig()
    texts = ["Plain English text, with words and more words.", "新华社北京电 今天发布了新的规定。", "",
             "Mixed 日本語のテキスト and English", "ภาษาไทยไม่มีช่องว่าง ระหว่างคำ"]
    got = shingle_sets(texts, opts, unit, 5, 1)
    values, offsets = H.shingle_codepoints(*normalised_codepoints(texts, opts), unit, 5, 1)
    want = [values[offsets[i]:offsets[i + 1]] for i in range(len(texts))]
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    alone = shingle_sets(texts[:1], opts, unit, 5, 1)  # a group without unspaced text: the UTF-8 path
    assert np.array_equal(alone[0], got[0])
    # English beside Chinese in one group: the same sets under "auto" as under "word".
    worded = shingle_sets(texts, opts, "word", 5, 1)
    assert np.array_equal(got[0], worded[0]) and np.array_equal(got[2], worded[2])


def test_only_unspaced_scripts_take_the_code_point_path():
    from neardup_spark.kernels.normalise import normalised_utf8
    from neardup_spark.config import NormaliseConfig

    def may(text):
        return H.maybe_unspaced(normalised_utf8([text], NormaliseConfig())[0])

    assert may("新华社") and may("ภาษาไทย") and may("カタカナ") and may("ລາວ") and may("ខ្មែរ") and may("မြန်မာ")
    assert not any(may(t) for t in ("한국어 문장", "नमस्ते दुनिया", "Tiếng Việt", "Привет мир", "plain text"))
