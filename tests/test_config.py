from pathlib import Path

import pytest

from neardup_spark.config import Config, ConfigError, from_dict, load_config, to_dict

CONF = Path(__file__).resolve().parents[1] / "conf"


def test_default_toml_matches_the_package_defaults():
    assert to_dict(load_config(CONF / "default.toml")) == to_dict(Config())


@pytest.mark.parametrize("name", ["default.toml", "local.toml", "cluster.toml"])
def test_shipped_configs_load(name):
    load_config(CONF / name)


def test_overrides_win_and_are_validated():
    cfg = load_config(CONF / "default.toml", overrides={"verify.threshold": 0.5, "lsh.bands": 10, "lsh.rows": 5})
    assert (cfg.verify.threshold, cfg.lsh.bands, cfg.lsh.rows) == (0.5, 10, 5)
    assert Config().with_overrides({"keeper.rules": "earliest,longest"}).keeper.rules == ("earliest", "longest")


@pytest.mark.parametrize(
    "data, message",
    [
        ({"verfy": {}}, "unknown config section"),
        ({"verify": {"treshold": 0.3}}, "unknown key(s) in [verify]: treshold"),
        ({"verify": {"threshold": 0.0}}, "verify.threshold must be in (0, 1]"),
        ({"verify": {"threshold": 1.5}}, "verify.threshold must be in (0, 1]"),
        ({"verify": {"threshold": "high"}}, "verify.threshold must be a number"),
        ({"shingle": {"k": 0}}, "shingle.k must be >= 1"),
        ({"shingle": {"unit": "sentence"}}, "shingle.unit must be one of"),
        ({"lsh": {"bands": 20, "rows": 8}}, "exceeds minhash.num_perm = 128"),
        ({"lsh": {"bands": 20}}, "give both or neither"),
        ({"minhash": {"num_perm": 0}}, "minhash.num_perm"),
        ({"keeper": {"rules": ["newest"]}}, "keeper.rules entries must be one of"),
        ({"keeper": {"rules": ["source_priority"]}}, "needs keeper.source_priority"),
        ({"keeper": {"rules": ["source_priority"], "source_priority": ["a", "a"]}}, "must not repeat a source"),
        ({"cluster": {"backend": "networkx"}}, "cluster.backend must be one of"),
        ({"input": {"format": "csv"}}, "input.format must be one of"),
        ({"output": {"mode": "append"}}, "output.mode must be one of"),
        ({"index": {"band_probe": "broadcast"}}, "index.band_probe must be one of"),
        ({"minhash": {"num_perm": True}}, "must be an integer"),
        ({"simhash": {"bits": 96}}, "simhash.bits must be 64 or 128"),
        ({"simhash": {"weighting": "idf"}}, "simhash.weighting must be one of"),
        ({"simhash": {"hamming_distance": 64}}, "simhash.hamming_distance must be in [0, 63]"),
        ({"simhash": {"hamming_distance": 10, "bits": 128, "blocks": 30}}, "needs 30045015 tables"),
    ],
)
def test_bad_values_are_one_line_errors(data, message):
    with pytest.raises(ConfigError) as err:
        from_dict(data)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_or_broken_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[verify\nthreshold = 0.3\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)


def test_config_is_immutable():
    with pytest.raises(Exception):
        Config().verify.threshold = 0.9  # type: ignore[misc]


def test_spark_conf_overrides_add_to_the_file_settings(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[spark]\nconf = { "spark.driver.memory" = "4g", "spark.a" = "1" }\n')
    cfg = load_config(path, overrides={"spark.conf": {"spark.a": "2", "spark.b": "3"}})
    assert dict(cfg.spark.conf) == {"spark.driver.memory": "4g", "spark.a": "2", "spark.b": "3"}
