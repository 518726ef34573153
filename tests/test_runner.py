"""The runner: one materialising policy, stage times, figures, and the frozen report."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from neardup_spark.runtime.report import Report
from neardup_spark.runtime.runner import KEEP, LOCAL, Runner, materialise


def test_a_report_is_frozen_and_reads_as_its_json():
    report = Report(counts={"documents": 3}, stage_seconds={"read": 0.5}, lsh={"bands": [1, 2]}, wall_seconds=1.0)
    assert report.counts["documents"] == 3
    assert report["counts"] == {"documents": 3} and "advice" not in report and report.get("index") is None
    with pytest.raises(TypeError):
        report.counts["documents"] = 4  # the figures of a finished run do not change
    with pytest.raises(AttributeError):
        report.wall_seconds = 2.0  # type: ignore[misc]
    data = json.loads(report.to_json())
    assert data == {"lsh": {"bands": [1, 2]}, "counts": {"documents": 3}, "work": {},
                    "stage_seconds": {"read": 0.5}, "wall_seconds": 1.0}
    assert report.as_dict() == data and dict(report) == data


def test_with_adds_sections_and_stage_times():
    first = Report(counts={"documents": 3}, stage_seconds={"read": 0.5})
    later = first.with_(stage_seconds={"write": 0.25}, output="out", index={"version": 2})
    assert later.stage_seconds == {"read": 0.5, "write": 0.25}
    assert later["output"] == "out" and later["index"] == {"version": 2}
    assert first.as_dict().keys() == {"counts", "work", "stage_seconds"}  # unchanged


def test_the_runner_times_counts_and_releases(spark):
    run = Runner(spark)
    with run.stage("read"):
        df, n = run.counted(spark.range(10), "documents")
    with run.stage("read"):  # a stage entered twice adds up
        run.keep(spark.range(3), now=True)
    assert n == 10 and run.counts == {"documents": 10}
    assert set(run.seconds) == {"read"} and run.seconds["read"] >= 0
    assert len(run.kept) == 2 and df.is_cached
    report = run.report(output="x")
    run.counts["later"] = 1
    assert "later" not in report.counts  # the report is a snapshot
    run.release()
    assert run.kept == [] and not df.is_cached


def _stored_rdds(spark) -> set[int]:
    return {info.id() for info in spark.sparkContext._jsc.sc().getRDDStorageInfo()}


def test_a_cutting_runner_checkpoints_and_releases_the_blocks(spark):
    before = _stored_rdds(spark)
    run = Runner(spark, cut=True)
    df, n = run.counted(spark.range(5).selectExpr("id * 2 AS x"))
    assert n == 5 and "LogicalRDD" in df._jdf.queryExecution().logical().toString()  # the lineage is cut
    assert _stored_rdds(spark) - before  # its blocks are stored
    run.release()
    assert not (_stored_rdds(spark) - before) and run.kept == []  # and dropped on release


def test_materialise_follows_the_checkpoint_setting(spark):
    df = spark.range(4)
    assert materialise(df, KEEP).is_cached
    cut = materialise(spark.range(4), LOCAL)
    assert cut.count() == 4 and "LogicalRDD" in cut._jdf.queryExecution().logical().toString()
    assert materialise(spark.range(4), "none").is_cached  # cluster.checkpoint = "none": kept only


def _stage_lines(progress_stream, fake_tty: bool, monkeypatch, seconds: float = 0.0, fail: bool = False):
    import time

    from neardup_spark.runtime import progress as pg

    monkeypatch.setattr(pg, "QUIET_SECONDS", 0.0)
    shown = pg.Progress(progress_stream, every=0.0, poll=0.05)
    shown.tty = fake_tty
    figures: dict[str, int] = {"documents": 10}
    calls = []

    def tasks():
        calls.append(1)
        return (3, 8)

    try:
        with shown.stage("sketch", tasks, figures):
            time.sleep(seconds)
            figures["empty"] = 2
            if fail:
                raise RuntimeError("boom")
    except RuntimeError:
        pass
    return progress_stream.getvalue(), calls


def test_progress_lines_around_a_stage(monkeypatch):
    import io

    text, calls = _stage_lines(io.StringIO(), False, monkeypatch, seconds=0.3)
    lines = text.splitlines()
    assert lines[0] == "neardup: sketch ..."
    assert lines[-1].startswith("neardup: sketch done in ") and lines[-1].endswith("s (empty 2)")
    assert calls and any(line.endswith("tasks 3/8") for line in lines[1:-1])  # the running lines


def test_progress_in_place_on_a_terminal_and_failures_said(monkeypatch):
    import io

    text, _ = _stage_lines(io.StringIO(), True, monkeypatch, seconds=0.2, fail=True)
    assert "\r\033[K" in text and text.count("\n") == 1  # one line left: the end line
    assert "neardup: sketch failed after " in text


def test_progress_is_off_unless_asked(spark):
    import io

    from neardup_spark.api import progress

    assert Runner(spark).progress is None
    stream = io.StringIO()
    with progress(stream):
        run = Runner(spark)
        with run.stage("read"):
            run.counted(spark.range(7), "documents")
    assert "neardup: read done in" in stream.getvalue() and "(documents 7)" in stream.getvalue()


@pytest.mark.parametrize("report, first, has", [
    ({"mode": "append", "replayed": False, "counts": {"documents": 10, "new_documents": 8, "already_indexed": 2,
                                                       "replaced": 0, "exact_duplicates": 1,
                                                       "exact_archive_matches": 3, "candidate_pairs": 5,
                                                       "verified_pairs": 4, "archived_documents_met": 6,
                                                       "archived_documents_changed": 2},
      "lsh": {"bands": 9, "rows": 13, "num_perm": 128, "threshold": 0.8, "p_candidate_at_threshold": 0.95},
      "index": {"path": "idx", "version": 3, "documents": 108}, "output": "out"},
     "neardup: batch of 10 documents appended: index version 3, 108 documents", "6 met, 2 changed"),
    ({"mode": "append", "replayed": True, "counts": {"documents": 10}, "index": {"version": 3}},
     "neardup: batch of 10 documents applied before", "unchanged"),
    ({"counts": {"documents": 5, "clusters": 4, "removed": 1},
      "lsh": {"method": "simhash", "bits": 64, "hamming_distance": 3, "tables": 4}},
     "neardup: 5 documents -> 4 kept, 1 removed", "SimHash, 64 bits, Hamming distance <= 3, 4 block tables"),
    ({"counts": {"documents": 5, "clusters": 4, "removed": 1},
      "lsh": {"mode": "containment", "containment_threshold": 0.8, "num_perm": 128,
              "size_classes": [{"p_candidate_at_floor": 0.97}, {"p_candidate_at_floor": 0.91}]}},
     "neardup: 5 documents -> 4 kept, 1 removed", "weakest catch at its floor p = 0.910"),
])
def test_the_summary_of_each_kind_of_run(report, first, has):
    from neardup_spark.runtime.report import summary_lines

    lines = summary_lines(report)
    assert lines[0].startswith(first) and has in "\n".join(lines) and len(lines) <= 30


def test_a_report_pickles_and_copies():
    import copy
    import pickle

    report = Report(counts={"documents": 3}, stage_seconds={"read": 0.5}, advice=["a note"], mode="append")
    for again in (pickle.loads(pickle.dumps(report)), copy.deepcopy(report)):
        assert again.as_dict() == report.as_dict() and again.advice == ("a note",)


def test_a_dropped_frame_is_released_and_the_next_stage_collects_garbage(spark, monkeypatch):
    # Whether Spark's cleaner then deletes the shuffle files is up to the JVM's references;
    # the 10M benchmark watched verify's go (docs/scaling.md). This checks the runner's part.
    run = Runner(spark)
    with run.stage("up"):
        up, _ = run.counted(spark.range(200).repartition(3, "id"))
        down, n = run.counted(up.groupBy((F.col("id") % 7).alias("k")).count(), how=LOCAL)
    assert n == 7 and up.is_cached
    collected = []
    monkeypatch.setattr(run, "_collect_garbage", lambda: collected.append(run._collect))
    run.drop(up)
    assert not up.is_cached and [how for _, how in run.kept] == [LOCAL]
    with run.stage("later"):
        pass
    assert collected == [True]  # the stage after a drop asks for a collection first
    assert sorted(r["count"] for r in down.collect()) == sorted(200 // 7 + (k < 200 % 7) for k in range(7))
    run.release()
