import math

import pytest

from neardup_spark.kernels import lsh as P


def test_seed_figure_threshold_03():
    assert P.choose_bands_rows(0.3, 128) == (42, 3)
    lsh = P.resolve(0.3, 128)
    assert lsh.s_star == pytest.approx(0.2877, abs=1e-3)


def test_threshold_08_bends_below_the_threshold():
    b, r = P.choose_bands_rows(0.8, 128)
    assert (b, r) != (9, 13)
    assert P.s_star(b, r) < 0.8
    assert P.candidate_probability(0.8, b, r) >= 0.99
    # The choice a common library makes catches pairs at 0.8 only ~40% of the time.
    assert P.candidate_probability(0.8, 9, 13) < 0.5


@pytest.mark.parametrize("t", [0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 1.0])
@pytest.mark.parametrize("perm", [16, 64, 128, 256])
def test_choice_respects_the_budget_and_the_far_bound(t, perm):
    b, r = P.choose_bands_rows(t, perm)
    assert b * r <= perm
    assert P.candidate_probability(t / 3, b, r) <= 0.05 + 1e-12
    # No other admissible (b, r) catches pairs at t more often.
    best = P.candidate_probability(t, b, r)
    for rows in range(1, perm + 1):
        for bands in range(1, perm // rows + 1):
            if P.candidate_probability(t / 3, bands, rows) <= 0.05:
                assert P.candidate_probability(t, bands, rows) <= best + 1e-9


def test_s_curve_is_monotone_and_crosses_half_at_s_star():
    curve = P.s_curve(42, 3, step=0.01)
    probs = [p for _, p in curve]
    assert probs == sorted(probs) and probs[0] == 0.0 and probs[-1] == 1.0
    assert P.candidate_probability(P.s_star(42, 3), 42, 3) == pytest.approx(1 - (1 - 1 / 42) ** 42, abs=1e-12)
    assert 0.5 < P.candidate_probability(P.s_star(42, 3), 42, 3) < 0.65


def test_pinned_bands_rows_are_kept_and_checked():
    lsh = P.resolve(0.3, 128, bands=9, rows=13)
    assert (lsh.bands, lsh.rows, lsh.chosen) == (9, 13, False)
    with pytest.raises(ValueError):
        P.resolve(0.3, 128, bands=20, rows=8)


def test_advice_says_when_num_perm_is_too_small_and_what_would_do():
    lsh = P.resolve(0.3, 128)
    notes = P.advice(lsh, 1 / 3, 0.05)
    assert lsh.p_at_threshold < 0.9 and notes
    need = P.perm_needed(0.3)
    assert need is not None and str(need) in notes[0]
    b, r = P.choose_bands_rows(0.3, need)
    assert P.candidate_probability(0.3, b, r) >= 0.9
    assert not P.advice(P.resolve(0.8, 128), 1 / 3, 0.05)


def test_a_runs_advice_speaks_of_its_own_pairs():
    lsh = P.resolve(0.3, 128)
    few = P.advice(lsh, 1 / 3, 0.05, P.Caught(verified=10_000, near=40, missed=12.4))
    assert "40 of 10,000 verified pairs lie within 0.05" in few[0] and "estimated 12 pairs" in few[0]
    assert "Nothing to change" in few[0] and "num_perm=" not in few[0]
    many = P.advice(lsh, 1 / 3, 0.05, P.Caught(verified=1_000, near=600, missed=150.0))
    need = P.perm_needed(0.3)
    assert "(15.0% of those verified" in many[0] and f"num_perm={need}" in many[0]
    assert f"{need / 128:.1f}x the signature cost" in many[0]
    assert not P.advice(P.resolve(0.8, 128), 1 / 3, 0.05, P.Caught(10, 1, 0.0))  # caught well: silent


def test_the_estimated_miss_matches_a_simulated_lsh():
    # Pairs of known Jaccard, each caught with its banding probability: the estimate from the
    # caught ones (each counts for 1/p) lands near the number really missed.
    import numpy as np

    lsh = P.resolve(0.3, 128)
    rng = np.random.default_rng(3)
    s = rng.uniform(0.3, 0.6, 200_000)
    p = 1 - (1 - s ** lsh.rows) ** lsh.bands
    caught = rng.random(s.size) < p
    estimate = float(((1 - p[caught]) / p[caught]).sum())
    missed = int((~caught).sum())
    assert abs(estimate - missed) < 0.03 * missed


@pytest.mark.parametrize("t, far_fraction, bound, target, limit", [
    (0.3, 1 / 3, 0.05, 0.9, 256),   # 1136 would do: None below 256
    (0.5, 1 / 3, 0.05, 0.9, 512),
    (0.8, 0.5, 0.01, 0.99, 512),
    (0.2, 1 / 3, 0.05, 0.9, 128),   # none does: None
    (0.6, 0.9, 0.0, 0.9, 128),      # no (b, r) meets the far bound: the fallback decides
    (0.99, 0.9, 0.0, 0.9, 64),      # the fallback (1 x p, the lowest far probability) catches 0.99**8
])
def test_perm_needed_is_the_first_num_perm_whose_choice_catches(t, far_fraction, bound, target, limit):
    # The definition, one choose_bands_rows per p: perm_needed must give what it gives.
    want = next((p for p in range(8, limit + 1, 8)
                 if P.candidate_probability(t, *P.choose_bands_rows(t, p, far_fraction, bound)) >= target), None)
    assert P.perm_needed(t, target, far_fraction, bound, limit) == want


def test_a_far_jaccard_outside_0_1_is_refused():
    with pytest.raises(ValueError, match="jaccard must be in"):
        P.choose_bands_rows(0.5, 16, far_fraction=3.0)
    with pytest.raises(ValueError, match="jaccard must be in"):
        P.perm_needed(0.5, far_fraction=3.0)


def test_pinned_bend_above_threshold_is_flagged():
    notes = P.advice(P.resolve(0.8, 128, bands=9, rows=13), 1 / 3, 0.05)
    assert any("above the threshold" in n for n in notes)


def test_report_prints_the_choice_and_the_curve():
    text = P.format_report(P.resolve(0.3, 128), 1 / 3, 0.05)
    assert "42 x 3" in text and "<- threshold" in text and "warning:" in text
    assert len([l for l in text.splitlines() if l.strip().startswith(("0.", "1."))]) >= 21


def test_expected_recall_oracle():
    assert P.expected_recall([1.0, 1.0], 42, 3) == 1.0
    assert P.expected_recall([0.3], 42, 3) == pytest.approx(1 - (1 - 0.027) ** 42)
    assert math.isclose(P.expected_recall([], 42, 3), 1.0)
