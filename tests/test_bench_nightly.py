"""The nightly benchmark's targets and per-stage table (pure functions; nothing is run)."""

import argparse
import shutil
from types import SimpleNamespace

import pytest

from benchmarks import nightly
from benchmarks.nightly import ratio, targets_of
from benchmarks.per_stage import markdown, rows

ARGS = argparse.Namespace(scale_target=2.0, rerun_target=0.1, growth_target=1.1, memory_target_gb=20.0)


def _run(docs, seconds, candidates, verified=None, pss=5000, ok=True):
    return {"process_seconds": seconds, "pipeline_seconds": seconds - 5, "peak_pss_mb": pss,
            "counts": {"documents": docs, "candidate_pairs": candidates,
                       "verified_pairs": candidates if verified is None else verified},
            "accounted": {"ok": ok}, "task_seconds": {"sketch": docs / 1000, "verify": candidates / 500},
            "shuffle_mb": {"verify": candidates / 2**20 * 900}, "stage_seconds": {"sketch": 1.0, "verify": 2.0},
            "spill_disk_mb": {"verify": 12.0}}


def _size(docs, batch, seconds, cands_per_doc, **kw):
    archived = docs - batch
    return {"docs": docs, "archive_documents": archived,
            "build": _run(archived, seconds * archived / docs, int(cands_per_doc * archived), **kw),
            "append": _run(batch, seconds / 20, int(cands_per_doc * batch)),
            "rerun": _run(docs, seconds, int(cands_per_doc * docs), **kw)}


def test_targets_between_the_smallest_and_largest_size():
    small, large = _size(1_200, 200, 100.0, 1.3), _size(10_200, 200, 900.0, 1.3, pss=21_000)
    t = targets_of(ARGS, small, large)
    assert t["rerun_scale"]["ratio"] == 9.0 and t["rerun_scale"]["target"] == 9.35 and t["rerun_scale"]["met"]
    assert t["append_vs_rerun"]["ratio"] == 0.05 and t["append_vs_rerun"]["met"]
    assert t["flat_candidate_pairs"]["ratio"] == 1.0 and t["flat_candidate_pairs"]["met"]
    assert t["peak_memory"]["ratio"] == 20.51 and t["peak_memory"]["met"] is False  # 21,000 MB > 20 GB
    assert t["accounted"] == {**t["accounted"], "ratio": 0, "met": True}


def test_quadratic_growth_and_a_lost_document_are_misses():
    small, large = _size(1_200, 200, 100.0, 1.3), _size(10_200, 200, 1200.0, 2.6, ok=False)
    t = targets_of(ARGS, small, large)
    assert t["flat_candidate_pairs"]["ratio"] == 2.0 and not t["flat_candidate_pairs"]["met"]
    assert not t["rerun_scale"]["met"] and t["accounted"]["ratio"] == 2 and not t["accounted"]["met"]


def test_builds_of_archives_that_are_different_shares_of_their_corpora_are_not_compared():
    small, large = _size(1_200, 200, 100.0, 1.3), _size(10_200, 200, 900.0, 1.3)
    del small["rerun"]
    t = targets_of(ARGS, small, large)
    assert t["flat_verified_pairs"]["ratio"] is None and t["flat_verified_pairs"]["met"] is None
    assert "--rerun-every-size" in t["flat_verified_pairs"]["why_not"]
    same_share = _size(12_000, 2_000, 1000.0, 1.3)
    del same_share["rerun"]
    assert targets_of(ARGS, small, same_share)["flat_verified_pairs"]["ratio"] == 1.0


def test_one_size_and_empty_counts_give_no_ratio():
    one = _size(1_000, 100, 50.0, 0.0, verified=0)
    t = targets_of(ARGS, one, one)
    assert t["append_scale"]["ratio"] is None and t["append_scale"]["met"] is None
    assert "rerun_scale" not in t and "flat_candidate_pairs" not in t
    assert ratio(3.0, 0) is None and ratio(None, 2.0) is None


def test_per_stage_figures_per_document_and_candidate():
    record = {"sizes": [_size(1_200, 200, 100.0, 1.5), {"docs": 5, "archive_documents": 4}]}
    got = {r["stage"]: r for r in rows(record)}
    assert got["sketch"]["core_ms_per_doc"] == 1.0  # docs / 1000 task seconds over docs documents
    assert got["verify"]["core_ms_per_candidate"] == 2.0 and round(got["verify"]["shuffle_b_per_doc"]) == 1350
    assert got["exact"]["core_ms_per_doc"] == 0 and got["exact"]["wall_s"] is None
    text = markdown(record)
    assert "| verify | 2.0 | 3.000 (2.000 / candidate) | 1350 | 12 |" in text
    scale = {"runs": [record["sizes"][0]["rerun"]]}  # a scale record lists its runs
    assert markdown(scale) == text


def test_the_disk_estimate_counts_what_is_made_kept_and_freed(tmp_path):
    C, I, P = nightly.CORPUS_BYTES_PER_DOC, nightly.INDEX_BYTES_PER_DOC, nightly.RUN_PEAK_BYTES_PER_DOC
    disk_needed = nightly.disk_needed
    sizes, batch = [1_200_000, 10_200_000], 200_000
    freed = disk_needed(sizes, batch, True, set(), tmp_path, 7)
    # The largest corpus, its split (the batch and about a shard copied), and its re-run's peak.
    assert freed == 10_200_000 * C + (batch + 1_000_000) * C + 10_200_000 * P
    kept = disk_needed(sizes, batch, False, set(), tmp_path, 7)
    # Without freeing: the 1.2M corpus, its split (a one-stream corpus is copied whole) and index,
    # and the 10M index during the re-run.
    assert kept - freed == 1_200_000 * C * 2 + 1_000_000 * I + 10_000_000 * I
    made = {nightly.corpus_path(tmp_path, 10_200_000, 7), nightly.split_path(tmp_path, 10_200_000, batch, 7)}
    assert freed - disk_needed(sizes, batch, True, made, tmp_path, 7) == (10_200_000 + batch + 1_000_000) * C


def test_a_benchmark_that_would_fill_the_disk_is_refused_before_it_starts(tmp_path, monkeypatch):
    sizes, work = [1_200_000, 10_200_000], tmp_path / "work"
    monkeypatch.setattr(shutil, "disk_usage", lambda path: SimpleNamespace(free=75e9))
    with pytest.raises(SystemExit, match=r"needs ~96 GB free .* 75 GB are free; --free-index deletes"):
        nightly.check_disk(sizes, 200_000, False, work, 7)
    nightly.check_disk(sizes, 200_000, True, work, 7)  # ~72 GB with --free-index
    monkeypatch.setattr(shutil, "disk_usage", lambda path: SimpleNamespace(free=70e9))
    with pytest.raises(SystemExit, match=r"needs ~72 GB free .* 70 GB are free; --no-disk-check"):
        nightly.check_disk(sizes, 200_000, True, work, 7)
