"""The public API's keywords and the plan resolved from a config."""

import dataclasses

import pytest

from neardup_spark import Config, ConfigError
from neardup_spark.api import options
from neardup_spark.kernels.lsh import lsh_params
from neardup_spark.plan import NO_BUCKET_LIMIT, resolve

pytestmark = pytest.mark.compat  # also run on CI's pyspark 3.5 leg


def test_keywords_set_the_keys_they_name():
    cfg = options(id_col="url", text_col="body", threshold=0.5, keep="earliest")
    assert (cfg.input.id_col, cfg.input.text_col, cfg.verify.threshold) == ("url", "body", 0.5)
    assert cfg.keeper.rules == ("earliest",)
    assert options(keep=["source_priority", "earliest"],
                   config=Config().with_overrides({"keeper.source_priority": ["a"]})).keeper.rules == (
        "source_priority", "earliest")


def test_keywords_win_over_the_config_and_leave_the_rest():
    base = Config().with_overrides({"minhash.num_perm": 256, "verify.threshold": 0.7, "input.id_col": "x"})
    cfg = options(base, threshold=0.4)
    assert (cfg.verify.threshold, cfg.minhash.num_perm, cfg.input.id_col) == (0.4, 256, "x")
    assert options(base) == base and options() == Config()


def test_threshold_follows_the_mode():
    cfg = options(mode="containment", threshold=0.7)
    assert cfg.match.containment_threshold == 0.7 and cfg.verify.threshold == Config().verify.threshold
    with pytest.raises(ConfigError, match="Hamming distance"):
        options(method="simhash", threshold=0.5)
    on = Config().with_overrides({"simhash.verify_jaccard": True})
    assert options(on, method="simhash", threshold=0.5).verify.threshold == 0.5


@pytest.mark.parametrize("bad, message", [
    ({"keep": "newest"}, "keeper.rules"),
    ({"threshold": 1.5}, "verify.threshold"),
    ({"method": "cosine"}, "match.method"),
    ({"id_col": ""}, "input.id_col"),
])
def test_bad_keywords_are_config_errors(bad, message):
    with pytest.raises(ConfigError, match=message):
        options(**bad)


def test_a_config_must_be_a_config():
    with pytest.raises(ConfigError, match="must be a neardup_spark.Config"):
        options({"verify.threshold": 0.5})


def test_plan_resolves_what_stages_used_to_derive():
    cfg = Config().with_overrides({"verify.threshold": 0.5})
    plan = resolve(cfg)
    assert plan.lsh == lsh_params(cfg) and plan.matcher.kind == "minhash"
    assert plan.matcher.keys_per_doc == plan.lsh.bands and plan.matcher.bucket_limit == cfg.lsh.all_pairs_bucket_limit
    assert plan.keeper == cfg.keeper and plan.cfg is cfg
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.cfg = Config()  # type: ignore[misc]


def test_plan_of_each_matcher():
    sim = resolve(Config().with_overrides({"match.method": "simhash", "simhash.hamming_distance": 3}))
    assert sim.matcher.kind == "simhash" and sim.matcher.bucket_limit == NO_BUCKET_LIMIT
    assert sim.matcher.keys_per_doc == 4 and sim.advice == []  # one table per block, hamming + 1 blocks
    con = resolve(Config().with_overrides({"match.mode": "containment", "keeper.rules": ["earliest"]}))
    assert con.matcher.kind == "containment" and con.matcher.classes
    assert con.keeper.rules == ("longest", "earliest")  # a contained document points at its container
    assert con.cfg.keeper.rules == ("earliest",)  # the config itself is left as given


def test_advice_is_the_jaccard_s_curve_in_jaccard_mode():
    assert any("0.683" in note for note in resolve(Config()).advice)


def test_deduplicate_with_keywords_is_deduplicate_with_the_config(spark):
    from neardup_spark import deduplicate

    story = "the council approved the new budget for schools and roads after a long debate on tuesday night"
    rows = [("a", story, "2026-01-02"), ("b", story + " more", "2026-01-01"), ("c", "something else entirely here", None)]
    df = spark.createDataFrame(rows, "url string, body string, published_at string")
    by_keywords = deduplicate(df, id_col="url", text_col="body", threshold=0.5, keep="earliest")
    cfg = Config().with_overrides({"input.id_col": "url", "input.text_col": "body", "verify.threshold": 0.5,
                                   "keeper.rules": ["earliest"]})
    by_config = deduplicate(df, cfg)
    try:
        got = sorted(tuple(r) for r in by_keywords.clusters.collect())
        assert got == sorted(tuple(r) for r in by_config.clusters.collect())
        assert {r["url"] for r in by_keywords.deduplicated.collect()} == {"b", "c"}  # b is the earliest
        assert by_keywords.report["config"]["keeper"]["rules"] == ["earliest"]
    finally:
        by_keywords.unpersist()
        by_config.unpersist()
