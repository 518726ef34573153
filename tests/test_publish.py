"""An output is whole or absent: the publication protocol (`runtime.publish`) killed at every
step, in processes of its own, against what a reader sees.

The protocol moves folders and files only, so these runs need no JVM: a child process
stages run B's tables (each a folder whose file names its run) over run A's output and
commits, killed (os._exit) at one step. The test then checks what a reader would find,
settles the output as the next command does, and checks again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from neardup_spark.runtime import publish

ROOT = Path(__file__).resolve().parents[1]
# Run A wrote stripping's table and plots; run B does not: they must not survive under B's report.
A_NAMES = ("clusters", "pairs", "deduplicated", "boilerplate", "s_curve.png")
B_NAMES = ("clusters", "pairs", "deduplicated")
STEPS = ["publish:staged", "publish:marked", "publish:withdrawn", "publish:clusters", "publish:deduplicated",
         "publish:pairs", "publish:reported", "publish:unmarked", None]

CHILD = textwrap.dedent("""
    import json, os, sys
    from neardup_spark.runtime.publish import publishing
    out, mode = sys.argv[1], sys.argv[2]
    with publishing(None, out, mode) as pub:
        for name in {names!r}:
            os.makedirs(os.path.join(pub.local_stage, name))
            open(os.path.join(pub.local_stage, name, "part-B.parquet"), "w").write("B")
        pub.commit({{"run": "B", "tables": {names!r}}}, expect={names!r})
""").format(names=list(B_NAMES))


def _write_a(out: Path) -> None:
    out.mkdir(parents=True)
    for name in A_NAMES:
        if name.endswith(".png"):
            (out / name).write_text("A")
        else:
            (out / name).mkdir()
            (out / name / "part-A.parquet").write_text("A")
    (out / "report.json").write_text(json.dumps({"run": "A", "tables": list(A_NAMES)}))


def _run_of(out: Path, name: str) -> str:
    path = out / name
    return path.read_text() if path.is_file() else "".join(sorted(p.read_text() for p in path.iterdir()))


def _reader_view(out: Path) -> tuple[str | None, dict[str, str]]:
    """What a reader finds: the run report.json names (None: no finished run) and each output's run."""
    report = json.loads((out / "report.json").read_text())["run"] if (out / "report.json").exists() else None
    seen = {p.name: _run_of(out, p.name) for p in out.iterdir() if not p.name.startswith("_neardup")
            and p.name != "report.json"}
    return report, seen


def _assert_whole(out: Path, run: str) -> None:
    report, seen = _reader_view(out)
    names = A_NAMES if run == "A" else B_NAMES
    assert report == run and seen == {name: run for name in names}, (report, seen)


def _publish(out: Path, kill_at: str | None, mode: str = "overwrite") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("NEARDUP_KILL_AT", None)
    if kill_at:
        env["NEARDUP_KILL_AT"] = kill_at
    return subprocess.run([sys.executable, "-c", CHILD, str(out), mode], env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("kill_at", STEPS)
def test_a_kill_at_any_step_leaves_one_run_whole_or_none_with_a_marker(tmp_path, kill_at):
    out = tmp_path / "out"
    _write_a(out)
    done = _publish(out, kill_at)
    assert done.returncode == (137 if kill_at else 0), done.stderr
    report, seen = _reader_view(out)
    marker = (out / publish.MARKER).exists()
    if report is not None:
        # A report is there: every table present is its run's, and all of them are.
        _assert_whole(out, report)
    else:
        assert marker, f"no report.json and no marker after a kill at {kill_at}"
    if kill_at == "publish:staged":
        _assert_whole(out, "A")  # nothing had moved yet
    # A reader says so and moves nothing; the next writer settles it: B whole, nothing of ours left.
    if marker:
        assert "stopped while publishing its output" in publish.pending(None, str(out))
        assert _reader_view(out) == (report, seen)
    publish.settle(None, str(out))
    publish.remove_leftovers(None, str(out), (publish.STAGING_PREFIX,))
    _assert_whole(out, "A" if kill_at == "publish:staged" else "B")
    assert not [p.name for p in out.iterdir() if p.name.startswith("_neardup")]


def test_settling_twice_and_a_new_run_over_a_stopped_one(tmp_path):
    out = tmp_path / "out"
    _write_a(out)
    assert _publish(out, "publish:deduplicated").returncode == 137
    publish.settle(None, str(out))
    publish.settle(None, str(out))
    _assert_whole(out, "B")
    assert publish.pending(None, str(out)) is None
    # A run over an output another run stopped in: it is settled first, then replaced.
    assert _publish(out, "publish:withdrawn").returncode == 137
    assert _publish(out, None).returncode == 0
    _assert_whole(out, "B")


def test_without_overwrite_an_existing_table_is_refused_and_nothing_moves(tmp_path):
    out = tmp_path / "out"
    _write_a(out)
    done = _publish(out, None, mode="error")
    assert done.returncode == 1 and "already exists; pass --overwrite" in done.stderr
    _assert_whole(out, "A")
    assert not [p.name for p in out.iterdir() if p.name.startswith("_neardup")]


def test_a_publication_in_progress_is_not_taken_over(tmp_path):
    """A marker whose process is alive on this host: readers and writers wait their turn."""
    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (out / publish.MARKER).write_text(json.dumps({"staging": "_neardup_staging-x", "names": [], "tables": [],
                                                      "host": os.uname().nodename, "pid": holder.pid}))
        with pytest.raises(publish.PublishError, match="is publishing its output"):
            publish.settle(None, str(out))
        with pytest.raises(publish.PublishError, match="is publishing its output"):
            publish.pending(None, str(out))
    finally:
        holder.kill()
        holder.wait()


def test_a_damaged_marker_is_reported_then_cleared_by_the_next_writer(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / publish.MARKER).write_text('{"staging": "_neardup_sta')
    assert "its marker _neardup_publishing.json is damaged" in publish.pending(None, str(out))
    publish.settle(None, str(out))
    assert not (out / publish.MARKER).exists()


def test_a_stopped_catalog_publication_is_reported_then_cleared_by_the_next_writer(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / publish.MARKER).write_text(json.dumps({"staging": "_neardup_staging-y", "names": [],
                                                  "tables": ["cat.db.p_clusters"], "host": "elsewhere", "pid": 1}))
    note = publish.pending(None, str(out))
    assert "stopped while saving its catalog tables (cat.db.p_clusters)" in note
    publish.settle(None, str(out))
    assert not (out / publish.MARKER).exists()


@pytest.mark.parametrize("cut", ["copied", "partly_copied", "partly_removed"])
def test_a_move_cut_short_on_an_object_store_is_completed_whole(tmp_path, cut):
    """Object stores move a folder by copying it, then removing the source: a stop can leave a
    partial copy (all files still staged) or a whole copy with some staged files left."""
    out = tmp_path / "out"
    _write_a(out)
    staging = out / "_neardup_staging-s"
    (staging / publish.ASIDE).mkdir(parents=True)
    files = [f"part-{i}-B.parquet" for i in range(4)]
    for name in B_NAMES:
        (staging / name).mkdir()
        for f in files:
            (staging / name / f).write_text("B")
    (staging / "report.json").write_text(json.dumps({"run": "B"}))
    (out / "report.json").rename(staging / publish.ASIDE / "report.json")  # withdrawn
    # clusters: the old table was moved aside, then the new one's move was cut short.
    (out / "clusters").rename(staging / publish.ASIDE / "clusters")
    (staging / publish.ASIDE / f"clusters{publish.CLEARED}").write_text("")
    (out / "clusters").mkdir()
    copied = files[:2] if cut == "partly_copied" else files
    for f in copied:
        (out / "clusters" / f).write_text("B")
    if cut == "partly_removed":
        for f in files[:3]:
            (staging / "clusters" / f).unlink()
    (out / publish.MARKER).write_text(json.dumps({"staging": staging.name, "names": list(B_NAMES), "tables": [],
                                                  "host": "elsewhere", "pid": 1}))
    publish.settle(None, str(out))
    assert _reader_view(out) == ("B", {name: "B" * len(files) for name in B_NAMES})
    assert sorted(p.name for p in (out / "clusters").iterdir()) == files
    assert not staging.exists() and not (out / publish.MARKER).exists()


def test_without_a_filesystem_at_hand_the_report_is_withdrawn_first(spark, tmp_path, monkeypatch):
    """Spark Connect with an output at a URI: nothing can be moved, so report/ holds a marker
    line while the tables are replaced in place, and the report is written last."""
    from neardup_spark import Config, api
    from neardup_spark.errors import InputError
    from neardup_spark.stages.write import finished_report
    from neardup_spark.tools.inspect import open_output

    monkeypatch.setattr(publish, "output_store", lambda spark, root: None)
    out = str(tmp_path / "out")
    cfg = Config().with_overrides({"input.path": str(ROOT / "neardup_spark" / "data" / "sample.jsonl.gz"),
                                   "input.format": "jsonl", "output.path": out, "output.mode": "overwrite"})
    api.run(spark, cfg)
    assert finished_report(spark, out)["counts"]["documents"] == 1000
    assert not (tmp_path / "out" / "report.json").exists()

    def stop(*args, **kwargs):
        raise KeyboardInterrupt("stopped while writing")

    monkeypatch.setattr(api, "write_outputs", lambda spark, result, cfg, pub: (pub.tables_root(), stop()))
    with pytest.raises(KeyboardInterrupt):
        api.run(spark, cfg)
    assert finished_report(spark, out) is None
    with pytest.raises(InputError, match="stopped before it finished: its tables may come from two runs"):
        open_output(spark, out)
    # Without --overwrite Spark refuses the existing tables before anything is touched.
    monkeypatch.undo()
    monkeypatch.setattr(publish, "output_store", lambda spark, root: None)
    api.run(spark, cfg)
    with pytest.raises(Exception, match="already exists"):
        api.run(spark, cfg.with_overrides({"output.mode": "errorifexists"}))
    assert finished_report(spark, out)["counts"]["documents"] == 1000
