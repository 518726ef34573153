"""Calibration: random-pair Jaccards against a brute-force oracle, the recommendation's
promises, the labelling round trip, and the CLI's JSON keys."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from neardup_spark import Config, api, cli
from neardup_spark.tools import calibrate
from neardup_spark.tools import corpus, corpus_files
from neardup_spark.errors import InputError
from neardup_spark.kernels.lsh import candidate_probability, catching, choose_bands_rows

SAMPLE = str(api.SAMPLE)
SPARK = ["--master", "local[2]", "--shuffle-partitions", "2"]


def _blob(values) -> bytes:
    return np.array(sorted(set(values)), dtype="<u4").tobytes()


def test_pair_jaccards_match_python_sets():
    rng = np.random.default_rng(5)
    sets = [set(rng.integers(0, 60, size=rng.integers(0, 40)).tolist()) for _ in range(200)]
    left, right = sets[:100], sets[100:]
    got = calibrate.pair_jaccards([_blob(a) for a in left], [_blob(b) for b in right])
    want = [len(a & b) / len(a | b) if a | b else 0.0 for a, b in zip(left, right)]
    assert np.allclose(got, want)


@pytest.mark.parametrize("threshold", [0.2, 0.3, 0.5, 0.8])
def test_catching_reaches_the_probability_with_the_fewest_far_candidates(threshold):
    b, r = catching(threshold, 128, 0.95)
    assert b * r <= 128 and candidate_probability(threshold, b, r) >= 0.95
    far = threshold / 3
    best = min(
        candidate_probability(far, bb, rr)
        for rr in range(1, 129) for bb in range(1, 128 // rr + 1)
        if candidate_probability(threshold, bb, rr) >= 0.95
    )
    auto = choose_bands_rows(threshold, 128)
    if candidate_probability(threshold, *auto) < 0.95:  # else the automatic choice stands
        assert candidate_probability(far, b, r) == pytest.approx(best, abs=1e-9)


def test_recommendation_sits_above_the_noise_and_catches_at_it():
    cfg = Config()
    noisy = np.concatenate([np.full(9800, 0.01), np.linspace(0.2, 0.32, 200)])
    rec = calibrate.recommend(noisy, cfg, n_docs=1_000_000)
    dist = calibrate.distribution(noisy)
    assert rec["recommended_threshold"] >= dist["p99"] + 0.05 - 1e-9
    assert rec["recommended_threshold"] >= dist["p99_9"]
    assert rec["p_candidate_at_threshold"] >= 0.95
    assert rec["duplicate_looking_pairs"] == 0  # a tail of 2% of random pairs is noise, not duplicates
    assert rec["noise_p99_upper"] >= dist["p99"]
    noise = max(rec["noise_p99_upper"] + 0.05, dist["p99_9"])
    assert rec["recommended_threshold"] == pytest.approx(math.ceil(noise * 100) / 100)
    clean = calibrate.recommend(np.full(5000, 0.001), cfg, n_docs=1000)
    assert clean["recommended_threshold"] == 0.3 and "floor" in clean["why"]
    with pytest.raises(InputError):
        calibrate.distribution(np.zeros(0))


@pytest.mark.parametrize("share", [0.0005, 0.002, 0.008])
def test_duplicates_in_the_sample_are_set_aside_from_the_noise(share):
    """A duplicate-dense sample draws some duplicates (up to ~0.3% of random pairs when every
    document is in a story of 8 among 2,500): they are left out of the percentiles, so the
    recommendation sits between the noise and the weakest duplicate."""
    rng = np.random.default_rng(4)
    noise = rng.beta(2, 60, size=3000)  # unrelated pairs: mean ~0.03, p99 ~0.09
    dupes = rng.uniform(0.35, 1.0, size=max(1, round(share * 3000)))
    values = rng.permutation(np.concatenate([noise, dupes]))
    rec = calibrate.recommend(values, Config(), n_docs=2500, floor=0.0)
    assert rec["duplicate_looking_pairs"] == dupes.size and rec["noise_pairs"] == noise.size
    assert np.percentile(noise, 99) < rec["recommended_threshold"] < dupes.min()
    assert rec["noise_p99_9"] is None  # 3,000 pairs put 3 values above a p99.9: not used
    assert any("looked like duplicates" in w for w in rec["warnings"])
    assert "below the gap" in rec["why"]


def test_a_small_sample_is_warned_about():
    rec = calibrate.recommend(np.linspace(0.0, 0.1, 500), Config(), n_docs=1000)
    assert any("fewer than 10 values above their p99" in w for w in rec["warnings"])


def test_score_labels_weights_strata_and_finds_the_flip():
    labelled = pd.DataFrame({
        "jaccard": [0.32, 0.38, 0.45, 0.52, 0.61, 0.75, 0.9, 0.97],
        "label": ["no", "no", "No", "yes", "1", "TRUE", "y", ""],
        "weight": [10, 10, 10, 1, 1, 1, 1, 1],
    })
    scores = calibrate.score_labels(labelled)
    assert scores["labelled"] == 7 and scores["unlabelled"] == 1 and scores["duplicates"] == 4
    assert scores["flip"] == {"lowest_duplicate_jaccard": 0.52, "highest_non_duplicate_jaccard": 0.45}
    assert 0.45 < scores["recommended_threshold"] <= 0.52
    at = {row["threshold"]: row for row in scores["by_threshold"]}
    # At 0.30 everything is predicted: precision = 4 / (4 + 30) by weight.
    assert at[0.3]["precision"] == pytest.approx(4 / 34, abs=1e-4) and at[0.3]["recall"] == 1.0
    with pytest.raises(InputError, match="labels must be"):
        calibrate.score_labels(labelled.assign(label="maybe"))


@pytest.fixture(scope="module")
def site_corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("site") / "corpus"
    spec = corpus.CorpusSpec(n_docs=1500, seed=3, boilerplate_share=0.45, footer_share=1.0, words=200)
    corpus_files.write(spec, path, "parquet")
    return str(path)


def test_calibrate_json_sees_boilerplate_and_its_removal(spark, site_corpus, capsys):
    out = {}
    for extra in ([], ["--strip-boilerplate", "--boilerplate-min-docs", "50"]):
        rc = cli.main(["calibrate", "--input", site_corpus, "--pairs", "2000", "--json", *SPARK, *extra])
        assert rc == 0
        out[bool(extra)] = json.loads(capsys.readouterr().out)
    raw, stripped = out[False], out[True]
    # Same-site pairs share a 45% block: Jaccard ~0.45/1.55 = 0.29.
    assert 0.2 < raw["p99"] < 0.4 and raw["recommended_threshold"] > raw["p99"]
    assert stripped["p99"] < 0.05 and stripped["recommended_threshold"] == 0.3
    assert stripped["boilerplate"]["enabled"] and stripped["boilerplate"]["lines"] > 0
    for rep in out.values():
        assert rep["pairs"] == min(2000, rep["documents"] // 2)  # all 1,500 documents, paired up
        assert candidate_probability(rep["recommended_threshold"], rep["bands"], rep["rows"]) >= 0.95
    assert raw["frequent_lines"][0]["estimated_documents"] > 200 and raw["frequent_lines"][0]["example"]


def test_labelling_round_trip(spark, tmp_path, capsys):
    csv = tmp_path / "pairs.csv"
    rc = cli.main(["calibrate", "--input", SAMPLE, "--format", "jsonl", "--sample-for-labelling", "42",
                   "--output", str(csv), "--range", "0.3,1.0", "--json", *SPARK])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    frame = pd.read_csv(csv, dtype={"label": str}, keep_default_na=False)
    assert len(frame) == summary["pairs"] and 30 <= len(frame) <= 42
    assert frame["jaccard"].between(0.3, 1.0).all() and (frame["doc_a"] < frame["doc_b"]).all()
    assert (frame["weight"] >= 1).all() and (frame["label"] == "").all()
    assert frame["text_a"].str.len().gt(0).all() and frame["text_a"].str.len().le(600).all()
    assert frame["stratum"].nunique() >= 5  # spread over the range, not bunched at the top
    groups = pd.read_json(SAMPLE, lines=True).set_index("id")["group"]
    frame["label"] = ["yes" if groups[a] == groups[b] else "no" for a, b in zip(frame.doc_a, frame.doc_b)]
    frame.to_csv(csv, index=False)
    assert cli.main(["calibrate", "--labels", str(csv), "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["labelled"] == len(frame) and scores["at_recommended"]["precision"] == 1.0
    assert cli.main(["calibrate", "--labels", str(csv)]) == 0
    assert "recommended threshold" in capsys.readouterr().out


def test_calibrate_errors_are_one_line(spark, tmp_path, capsys):
    assert cli.main(["calibrate", "--input", SAMPLE, "--format", "jsonl", "--sample-for-labelling", "5"]) == 2
    assert "--output" in capsys.readouterr().err
    assert cli.main(["calibrate", "--input", SAMPLE, "--format", "jsonl", "--sample-for-labelling", "5",
                     "--output", str(tmp_path / "x.csv"), "--range", "0.9,0.2"]) == 2
    assert "--range" in capsys.readouterr().err
    assert cli.main(["calibrate", "--labels", str(tmp_path / "missing.csv")]) == 2
    assert "cannot read labels" in capsys.readouterr().err


@pytest.mark.parametrize("share", [0.01, 0.2, 0.8])
def test_calibrate_sits_between_the_noise_and_the_weakest_duplicate(spark, share):
    """1%, 20% and 80% of the documents in stories of 8: the recommendation (without the floor,
    which would hide the method) is above the unrelated pairs' p99 and below every duplicate."""
    from neardup_spark.kernels.sketch import shingle_sets

    rows = pd.DataFrame(corpus.generate(corpus.CorpusSpec(n_docs=2500, seed=11, dup_share=share, words=200)))
    cfg = Config()
    rec = calibrate.calibrate(spark.createDataFrame(rows[["id", "text"]]), cfg, pairs=5000, seed=2, floor=0.0,
                              top_lines=0).report
    sets = [set(s.tolist()) for s in shingle_sets(list(rows["text"]), cfg.normalise, cfg.shingle.unit,
                                                  cfg.shingle.k, cfg.minhash.seed)]
    jac = lambda i, j: len(sets[i] & sets[j]) / len(sets[i] | sets[j])  # noqa: E731
    stories = rows.index[rows["group"].str.startswith("s")].groupby(rows["group"][rows["group"].str.startswith("s")])
    weakest = min(jac(i, j) for members in stories.values() for a, i in enumerate(members) for j in members[a + 1:])
    rng = np.random.default_rng(0)
    left, right = rng.integers(0, len(rows), size=(2, 4000))
    unrelated = [jac(i, j) for i, j in zip(left, right) if rows["group"][i] != rows["group"][j]]
    assert np.percentile(unrelated, 99) < rec["recommended_threshold"] < weakest
