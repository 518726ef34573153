"""The index's commit step through the Hadoop FileSystem (a file:// URI takes the code path of
hdfs:// and s3a://): committers in separate JVM processes, and a nightly sequence end to end."""

import json

import pandas as pd
import pytest

from neardup_spark import Config, api
from neardup_spark.archive import index as ix
from neardup_spark.runtime.filestore import HadoopStore, LocalStore, store_for
from neardup_spark.api import run

from . import frames
from .commit_race import race

pytestmark = pytest.mark.compat  # also run on CI's pyspark 3.5 leg

ROUNDS = 150
COMMITTERS = 3


def _hadoop_store(uri: str) -> HadoopStore:
    from pyspark.java_gateway import launch_gateway

    jvm = launch_gateway().jvm
    return HadoopStore(jvm, jvm.org.apache.hadoop.conf.Configuration(), uri)


@pytest.mark.jvm
def test_concurrent_committers_through_hadoop_in_separate_processes(tmp_path):
    landed = race(_hadoop_store, f"file://{tmp_path}/index", COMMITTERS, ROUNDS)
    final = ix.open_index(str(tmp_path / "index")).manifest  # the local reader sees the same versions
    assert final["version"] == ROUNDS + 1 and len(landed) == ROUNDS and sorted(final["parts"][1:]) == landed


def test_stores_read_and_write_the_same_layout(spark, tmp_path):
    hadoop = store_for(spark, f"file://{tmp_path}")
    local = store_for(spark, str(tmp_path))
    assert isinstance(hadoop, HadoopStore) and isinstance(local, LocalStore)
    assert hadoop.put_if_absent("manifests/v00001.json", "{\"a\": 1}\n")
    assert not hadoop.put_if_absent("manifests/v00001.json", "{\"a\": 2}\n")
    assert local.read_text("manifests/v00001.json") == "{\"a\": 1}\n"
    assert not local.put_if_absent("manifests/v00001.json", "x")
    hadoop.put("manifest.json", "one")
    hadoop.put("manifest.json", "two")
    assert local.read_text("manifest.json") == "two" and hadoop.read_text("missing") is None
    assert hadoop.list("manifests") == local.list("manifests") == ["v00001.json"]
    spark.range(3).write.parquet(str(tmp_path / "t"))
    assert hadoop.spark_schema("t") == local.spark_schema("t") and "\"id\"" in hadoop.spark_schema("t")
    assert hadoop.spark_schema("nothing") is None
    assert local.spark_schema("manifests") is None


def test_a_nightly_sequence_with_the_index_at_a_uri(spark, tmp_path):
    """Build, two appends, compaction, vacuum and an export with the index at file://...: the
    Hadoop code path."""
    rows = pd.read_json(api.SAMPLE, lines=True)
    paths = []
    for k in range(3):
        path = tmp_path / f"b{k}.jsonl"
        rows.iloc[k::3].to_json(path, orient="records", lines=True, date_format="iso")
        paths.append(str(path))
    uri = f"file://{tmp_path}/index"
    cfg = Config().with_overrides({"input.format": "jsonl", "output.mode": "overwrite"})
    api.build_index(spark, cfg.with_overrides({"input.path": paths[0], "index.path": uri}))
    assert isinstance(ix.open_index(uri, spark).store, HadoopStore)
    scan = {"input.path": paths[1], "index.path": uri, "index.append": True, "index.band_probe": "scan",
            "output.path": str(tmp_path / "o1")}
    with pytest.raises(ix.IndexError_, match="index.band_probe = 'scan' reads the band files"):
        run(spark, cfg.with_overrides(scan))  # pyarrow would have neither the Hadoop conf nor credentials
    assert not (tmp_path / "o1").exists()
    for k in (1, 2):
        run(spark, cfg.with_overrides({"input.path": paths[k], "index.path": uri, "index.append": True,
                                       "output.path": str(tmp_path / f"o{k}")}))
    done = api.compact_index(spark, uri)
    assert len(done.parts_replaced) == 3 and done.version == 4
    gone = api.vacuum_index(spark, uri, retain_days=0)
    manifest = ix.open_index(uri, spark).manifest
    left = {p.name: sorted(q.name for q in p.iterdir()) for p in (tmp_path / "index" / "parts").iterdir()}
    nights = set(manifest["batches"].values())  # the build's part went; the nights' keep their output only
    assert gone.removed and sorted(gone.trimmed) == sorted(nights)
    assert set(left) == {manifest["parts"][0], *nights} and all(left[n] == ["output"] for n in nights)
    api.export(spark, uri, str(tmp_path / "export"))
    exported = pd.read_parquet(tmp_path / "export" / "clusters")
    full = pd.read_parquet(frames.full_run(spark, api.SAMPLE, tmp_path, cfg) / "clusters")
    assert sorted(exported.doc_id) == sorted(rows.id) and frames.partition(exported) == frames.partition(full)
    assert ix.open_index(str(tmp_path / "index")).manifest["version"] == 4
    assert {json.loads(p.read_text())["format"] for p in (tmp_path / "index" / "manifests").iterdir()} == {2}
