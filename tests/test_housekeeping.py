"""Index housekeeping: compaction keeps every assignment and later batch the same, vacuum removes only
what no reader needs, and neither harms the index when it loses a race or is killed."""

import os
import shutil
import time
from pathlib import Path

import pandas as pd
import pytest

from neardup_spark import api
from neardup_spark.api import run
from neardup_spark.archive import housekeeping, setfiles
from neardup_spark.archive.index import open_index
from neardup_spark.archive.versions import ConcurrentCommitError

from . import frames, oracles
from .test_nightly import SPARK, _cfg, _cli


def _exported(spark, index: str, where: Path) -> pd.DataFrame:
    api.export(spark, index, str(where))
    return frames.in_order(pd.read_parquet(where / "clusters"))


def _append(spark, index: str, batch: str, out: Path):
    return run(spark, _cfg(**{"input.path": batch, "index.path": index, "index.append": True,
                              "output.path": str(out)}))


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    work = tmp_path_factory.mktemp("housekeeping")
    rows = pd.read_json(api.SAMPLE, lines=True)
    return work, rows, oracles.split_into_nights(rows, work, seed=2)


@pytest.fixture(scope="module")
def two_nights_built(spark, nights) -> Path:
    """An index built from night 0 with night 1 appended (two parts), and night 1's output."""
    work, rows, paths = nights
    index = str(work / "two-nights" / "index")
    api.build_index(spark, _cfg(**{"input.path": paths[0], "index.path": index}))
    _append(spark, index, paths[1], work / "two-nights" / "out1")
    return work / "two-nights"


@pytest.fixture()
def two_nights(two_nights_built, tmp_path) -> str:
    """A copy of two_nights_built's index (and night 1's output, out1) for one test."""
    for name in ("index", "out1"):
        shutil.copytree(two_nights_built / name, tmp_path / name)
    return str(tmp_path / "index")


def test_compaction_keeps_the_assignments_and_the_next_batch_lands_as_in_a_full_run(spark, nights, two_nights,
                                                                                  tmp_path):
    _, rows, paths = nights
    index = two_nights
    before = open_index(index).manifest
    assignments = _exported(spark, index, tmp_path / "compacting")
    done = api.compact_index(spark, index)
    after = open_index(index).manifest
    assert done.parts_replaced == before["parts"] and after["parts"] == [done.part]
    assert after["version"] == before["version"] + 1 and after["documents"] == before["documents"]
    assert after["batches"] == before["batches"] and after["compacted"]["parts"] == before["parts"]
    assert _exported(spark, index, tmp_path / "compacted").equals(assignments)
    assert api.compact_index(spark, index).part is None  # one part: nothing to do
    # A night after the compaction: the index then clusters as one full run over all three nights.
    report = _append(spark, index, paths[2], tmp_path / "out2")
    assert not report["replayed"]
    frames.assert_index_is_a_full_run(spark, index, rows, tmp_path, _cfg())


def test_vacuum_keeps_what_readers_need_and_a_landed_batch_still_replays(spark, nights, two_nights, tmp_path):
    _, rows, paths = nights
    index = two_nights
    old = open_index(index).manifest
    batch_part = old["batches"][next(iter(old["batches"]))]
    # Killed runs' parts: one named after a version already committed (it can never be), one
    # after a version to come (an append may still be writing it: it waits a day).
    doomed, future = (Path(index) / "parts" / name for name in ("part-00001-deadbeef", "part-99999-cafef00d"))
    for orphan in (doomed, future):
        (orphan / "docs").mkdir(parents=True)
        (orphan / "docs" / "part-0.parquet").write_bytes(b"")
    api.compact_index(spark, index)
    # A task attempt that failed while the compaction wrote: its set file no document names.
    sets = Path(index) / "parts" / open_index(index).parts[0] / setfiles.SETS
    written = sorted(p.name for p in sets.iterdir())
    (sets / "0badf00d.bin").write_bytes(b"\x01" * 40)
    stray = f"parts/{open_index(index).parts[0]}/{setfiles.SETS}/0badf00d.bin"
    assignments = _exported(spark, index, tmp_path / "before")
    recent = api.vacuum_index(spark, index, retain_days=7)
    assert recent.removed == recent.trimmed == recent.set_files == []
    assert sorted(recent.kept) == sorted([*old["parts"], doomed.name, future.name])
    dry = api.vacuum_index(spark, index, retain_days=0, dry_run=True)
    assert dry.removed and dry.set_files == [stray] and doomed.exists() and (sets / "0badf00d.bin").exists()
    done = api.vacuum_index(spark, index, retain_days=0)
    assert done.trimmed == [batch_part] and done.kept == [future.name] and done.set_files == [stray]
    assert sorted(p.name for p in sets.iterdir()) == written
    assert sorted(done.removed) == sorted({*old["parts"], doomed.name} - {batch_part})
    later = housekeeping.vacuum(spark, index, retain_days=0, now=time.time() + 1.5 * housekeeping.DAY)
    assert later.removed == [future.name] and not future.exists()
    parts = sorted(p.name for p in (Path(index) / "parts").iterdir())
    assert parts == sorted([open_index(index).parts[0], batch_part])
    assert [p.name for p in (Path(index) / "parts" / batch_part).iterdir()] == ["output"]
    assert _exported(spark, index, tmp_path / "after").equals(assignments)
    # The landed batch, run again, re-emits its stored output and changes nothing.
    again = _append(spark, index, paths[1], tmp_path / "again1")
    assert again["replayed"] and open_index(index).manifest["version"] == old["version"] + 1
    for name in ("clusters", "pairs"):
        first = frames.in_order(pd.read_parquet(tmp_path / "out1" / name))
        assert first.equals(frames.in_order(pd.read_parquet(tmp_path / "again1" / name)))


def test_a_replaced_part_waits_for_the_retention_from_its_replacement(spark, two_nights):
    index = two_nights
    old = open_index(index).parts
    done = api.compact_index(spark, index)
    replaced = time.time()
    for hours, gone in ((23, False), (25, True)):
        seen = housekeeping.vacuum(spark, index, retain_days=1, dry_run=True, now=replaced + hours * 3600)
        assert (set(seen.removed) | set(seen.trimmed) == set(old)) is gone, (hours, seen)
    assert open_index(index).parts == [done.part]


def test_a_compaction_that_loses_to_an_append_changes_nothing(spark, nights, two_nights, tmp_path, monkeypatch):
    _, rows, paths = nights
    index = two_nights

    def append_meanwhile(name: str) -> None:
        if name == "before_compaction_commit":
            _append(spark, index, paths[2], tmp_path / "out2")

    monkeypatch.setattr(housekeeping, "kill_point", append_meanwhile)
    with pytest.raises(ConcurrentCommitError, match="run again"):
        api.compact_index(spark, index)
    monkeypatch.undo()
    manifest = open_index(index).manifest
    assert len(manifest["parts"]) == 3 and "compacted" not in manifest  # the append's version, whole
    # The compaction that lost removed its own part: nothing is left for vacuum.
    assert sorted(os.listdir(os.path.join(index, "parts"))) == sorted(manifest["parts"])
    assert api.vacuum_index(spark, index, retain_days=0).removed == []
    frames.assert_index_is_a_full_run(spark, index, rows, tmp_path, _cfg())


@pytest.mark.process
def test_a_compaction_killed_before_its_commit_leaves_the_index_as_it_was(spark, two_nights, tmp_path):
    index = two_nights
    before = open_index(index).manifest
    killed = _cli(["index", "compact", "--index", index, *SPARK], kill_at="before_compaction_commit")
    assert killed.returncode == 137, killed.stderr[-2000:]
    assert open_index(index).manifest == before
    done = _cli(["index", "compact", "--index", index, *SPARK])
    assert done.returncode == 0 and "compacted 2 parts" in done.stdout, done.stderr[-2000:]
    vac = _cli(["index", "vacuum", "--index", index, "--retain-days", "0", *SPARK])
    assert vac.returncode == 0 and "removed 2 parts" in vac.stdout, vac.stdout + vac.stderr[-2000:]
    assert len(list((Path(index) / "parts").iterdir())) == 2  # the compacted part and the batch's output


def test_vacuum_refuses_a_negative_retention(two_nights):
    with pytest.raises(Exception, match="retain-days"):
        api.vacuum_index(None, two_nights, retain_days=-1)


@pytest.mark.parametrize("case", ["boilerplate", "replace"])
def test_a_compacted_index_takes_the_next_night_as_its_parts_would(spark, nights, tmp_path, case):
    """Two copies of one two-part index, one compacted: the next night (with boilerplate
    stripping on, or replacing archived texts) gives both the same output and the same index."""
    _, rows, paths = nights
    more = {"boilerplate.enabled": True, "boilerplate.min_docs": 8} if case == "boilerplate" else {}
    index = str(tmp_path / "index")
    api.build_index(spark, _cfg(**{"input.path": paths[0], "index.path": index, **more}))
    run(spark, _cfg(**{"input.path": paths[1], "index.path": index, "index.append": True,
                       "output.path": str(tmp_path / "out1"), **more}))
    copy = str(tmp_path / "copy")
    shutil.copytree(index, copy)
    assert api.compact_index(spark, copy).part is not None
    if case == "boilerplate":  # the compacted part carries the build's stripped lines
        keys = open_index(index).boilerplate_keys(spark)
        assert keys and open_index(copy).boilerplate_keys(spark) == keys
    night = paths[2]
    if case == "replace":  # night 2 also brings new texts for archived ids of both parts
        archived = pd.concat([pd.read_json(p, lines=True) for p in paths[:2]])
        donors = archived.sample(6, random_state=4)
        edited = donors.iloc[:3].assign(text=donors.iloc[3:].text.to_numpy())
        night = str(tmp_path / "night2.jsonl")
        pd.concat([pd.read_json(paths[2], lines=True), edited]).to_json(night, orient="records", lines=True,
                                                                         date_format="iso")
        more = {**more, "index.replace": True}
    reports = {}
    for name, where in (("parts", index), ("compacted", copy)):
        reports[name] = run(spark, _cfg(**{"input.path": night, "index.path": where, "index.append": True,
                                           "output.path": str(tmp_path / f"out2-{name}"), **more}))
    if case == "replace":
        assert reports["parts"]["counts"]["replaced"] == reports["compacted"]["counts"]["replaced"] == 3
    assert dict(reports["parts"]["counts"]) == dict(reports["compacted"]["counts"])
    for table in ("clusters", "pairs"):
        assert frames.in_order(pd.read_parquet(tmp_path / "out2-parts" / table)).equals(
            frames.in_order(pd.read_parquet(tmp_path / "out2-compacted" / table)))
    assert _exported(spark, index, tmp_path / "e-parts").equals(_exported(spark, copy, tmp_path / "e-compacted"))
