"""The Archive object: an index created from a DataFrame, batches appended as DataFrames (a
batch appended twice is a replay that changes nothing), and a Structured Streaming query
whose micro-batches are appended by foreachBatch, one of them failing after its commit and
run again by the restarted query: the archive ends as one full run over every document."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from neardup_spark import Archive, Config, NeardupError, api

from . import frames, oracles

SAMPLE = str(api.SAMPLE)


def _full(spark, tmp_path):
    return pd.read_parquet(frames.full_run(spark, SAMPLE, tmp_path, Config().with_overrides({"input.format": "jsonl"}))
                           / "clusters")


def test_batches_and_a_stream_with_a_failed_batch_end_as_one_full_run(spark, tmp_path):
    """An archive created from one DataFrame; the next batch appended as a DataFrame, then once
    more (a replay: nothing changes); the last two as a stream's micro-batches, whose
    foreachBatch appends each file's rows. The first micro-batch raises after its commit, which
    stops the query; restarted from its checkpoint, Spark runs it again (the same rows): a
    replay. Each micro-batch's clusters land in a folder per batch id."""
    rows = pd.read_json(SAMPLE, lines=True)
    paths = oracles.split_into_nights(rows, tmp_path, seed=1, nights=4)
    first = pd.read_json(paths[0], lines=True)
    archive = Archive.create(spark, str(tmp_path / "index"), spark.read.json(paths[0]))
    assert archive.report.counts["documents"] == archive.documents == len(first)

    night = archive.append(spark.read.json(paths[1]))
    got = night.clusters.toPandas()
    assert not night.report.replayed and set(pd.read_json(paths[1], lines=True).id) <= set(got.doc_id)
    assert len(got) == night.report.counts["new_documents"] + night.report.counts["archived_documents_changed"]
    version, pairs = archive.version, night.pairs.count()
    again = archive.append(spark.read.json(paths[1]))
    assert again.report.replayed and archive.version == version and again.pairs.count() == pairs

    incoming = tmp_path / "incoming"
    incoming.mkdir()
    for k, path in enumerate(paths[2:]):  # oldest first: the file source takes them in this order
        target = incoming / f"batch{k}.jsonl"
        os.replace(path, target)
        os.utime(target, (1_000_000 + k, 1_000_000 + k))
    schema = spark.read.json(str(incoming)).schema
    seen: list[tuple[int, bool]] = []
    fail_once = {0}

    def append(df, batch_id):
        done = archive.append(df, output=str(tmp_path / "out" / f"batch{batch_id}"), overwrite=True)
        seen.append((batch_id, bool(done.report.replayed)))
        if batch_id in fail_once:
            fail_once.discard(batch_id)
            raise RuntimeError("a failure after the commit")

    def start():
        return (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(incoming))
                .writeStream.foreachBatch(append).option("checkpointLocation", str(tmp_path / "checkpoint"))
                .trigger(availableNow=True).start())

    with pytest.raises(Exception, match="a failure after the commit"):
        start().awaitTermination()
    start().awaitTermination()
    assert seen == [(0, False), (0, True), (1, False)]
    frames.assert_same_clusters(archive.clusters().toPandas(), _full(spark, tmp_path))
    streamed = pd.concat([pd.read_parquet(tmp_path / "out" / f"batch{b}" / "clusters") for b in range(2)])
    batch_docs = streamed[streamed.in_batch]
    assert batch_docs.doc_id.is_unique
    assert set(batch_docs.doc_id) == set(pd.concat([pd.read_json(incoming / f"batch{k}.jsonl", lines=True)
                                                    for k in range(2)]).id)


def test_opening_a_path_without_an_index_is_one_line(spark, tmp_path):
    with pytest.raises(NeardupError, match="no index"):
        Archive.open(spark, str(tmp_path / "nothing"))
