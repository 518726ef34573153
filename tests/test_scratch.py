"""A session that cannot cache, as Databricks serverless: persist, cache and both checkpoints
refused, and only a few of Spark's settings. With cluster.scratch naming a schema, runs keep
their stage boundaries as tables there: the same golden outputs, the same nightly index, and
no table left behind. Without it, one line that names the setting. (A nightly index with
scratch tables, from a Connect-only client: test_connect_server.)"""

from __future__ import annotations

import contextlib

import pytest

from neardup_spark import Config, api
from neardup_spark.errors import NeardupError

from .test_golden import _check, _hashes

SAMPLE = str(api.SAMPLE)
SCHEMA = "neardup_scratch_tests"
# The settings a serverless session lets a user change (Databricks documents these).
ALLOWED = {"spark.sql.shuffle.partitions", "spark.sql.session.timeZone", "spark.sql.ansi.enabled",
           "spark.sql.legacy.timeParserPolicy", "spark.sql.files.maxPartitionBytes"}


def _refused(what: str):
    def refuse(self, *args, **kwargs):
        raise RuntimeError(f"[NOT_SUPPORTED_WITH_SERVERLESS] {what} is not supported on serverless compute.")
    return refuse


@contextlib.contextmanager
def serverless(spark, monkeypatch):
    """The session's DataFrames refuse persist, cache and checkpoints, its conf all keys but ALLOWED."""
    with monkeypatch.context() as patch:
        frame = type(spark.range(1))
        for name in ("persist", "cache", "checkpoint", "localCheckpoint"):
            patch.setattr(frame, name, _refused(f"{name.upper()} TABLE"))
        conf = type(spark.conf)
        original = conf.set

        def set_allowed(self, key, value):
            if key not in ALLOWED:
                raise RuntimeError(f"[CONFIG_NOT_AVAILABLE] Configuration {key} is not available.")
            return original(self, key, value)

        patch.setattr(conf, "set", set_allowed)
        patch.setattr(conf, "unset", lambda self, key: set_allowed(self, key, None))
        yield


@pytest.fixture(scope="module")
def schema(spark):
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {SCHEMA}")
    return SCHEMA


def _left(spark, schema: str) -> list[str]:
    return [r.tableName for r in spark.sql(f"SHOW TABLES IN {schema} LIKE 'neardup_scratch_*'").collect()]


def _cfg(out, **more) -> Config:
    return Config().with_overrides({"input.path": SAMPLE, "input.format": "jsonl", "output.path": str(out),
                                    "output.mode": "overwrite", **more})


def test_a_run_without_scratch_is_one_line_naming_it(spark, monkeypatch, tmp_path):
    with serverless(spark, monkeypatch), pytest.raises(NeardupError) as err:
        api.run(spark, _cfg(tmp_path / "out"))
    message = str(err.value)
    assert "cluster.scratch" in message and "--scratch" in message and "\n" not in message
    assert not (tmp_path / "out" / "report.json").exists()


def test_a_run_with_scratch_gives_the_golden_outputs_and_leaves_no_table(spark, codegen, monkeypatch, schema,
                                                                          tmp_path):
    with serverless(spark, monkeypatch):
        report = api.run(spark, _cfg(tmp_path, **{"cluster.scratch": schema}))
    _check("sample", _hashes(tmp_path))
    assert report.counts["documents"] == 1000 and _left(spark, schema) == []


def test_deduplicate_holds_its_tables_until_unpersist(spark, monkeypatch, schema):
    with serverless(spark, monkeypatch):
        result = api.deduplicate(spark.read.json(SAMPLE), scratch=schema)
        held = _left(spark, schema)
        assert held and result.clusters.count() == 1000
        result.unpersist()
    assert _left(spark, schema) == []


def test_a_run_that_fails_drops_its_tables(spark, monkeypatch, schema, tmp_path):
    from neardup_spark.stages import pipeline

    def fail(*args):
        assert _left(spark, schema), "the stages before keepers kept nothing in the scratch schema"
        raise RuntimeError("a run that fails in its keepers stage")

    monkeypatch.setattr(pipeline, "verified_with_keeper", fail)
    with serverless(spark, monkeypatch), pytest.raises(RuntimeError, match="keepers stage"):
        api.run(spark, _cfg(tmp_path / "out", **{"cluster.scratch": schema}))
    assert _left(spark, schema) == []


def test_scratch_must_name_a_schema():
    for bad in ("/Volumes/main/x", "a.b.c", "a..b", " "):
        with pytest.raises(NeardupError, match="cluster.scratch"):
            Config().with_overrides({"cluster.scratch": bad})
