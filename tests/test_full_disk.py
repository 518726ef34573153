"""Storage failures are one line: a full disk under a nightly append and under `run
--overwrite`, on a small tmpfs (root only; skipped with the reason elsewhere). The index keeps
its version with no orphan part, the earlier output stays whole, and the trace goes to a log."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pandas as pd
import pytest

from neardup_spark import Config, api, cli
from neardup_spark.archive.index import open_index
from neardup_spark.errors import io_failure

SPARK = ["--shuffle-partitions", "2"]


@pytest.fixture
def small_disk(tmp_path):
    """A 24 MB tmpfs, unmounted afterwards."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", f"nd-{uuid.uuid4().hex[:6]}", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(disk: Path, leave: int = 64_000) -> None:
    """Fill the disk but `leave` bytes."""
    free = shutil.disk_usage(disk).free
    with open(disk / "filler", "wb") as fh:
        fh.truncate(0)
        chunk = b"\0" * (1 << 20)
        todo = free - leave
        while todo > 0:
            fh.write(chunk[: min(len(chunk), todo)])
            todo -= len(chunk)


def _halves(tmp_path: Path) -> tuple[str, str]:
    rows = pd.read_json(api.SAMPLE, lines=True)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    rows.iloc[:600].to_json(a, orient="records", lines=True)
    rows.iloc[600:].to_json(b, orient="records", lines=True)
    return str(a), str(b)


def test_a_full_disk_is_one_line_and_leaves_the_index_and_the_output_as_they_were(spark, small_disk, tmp_path,
                                                                                   capsys, monkeypatch):
    monkeypatch.setenv("NEARDUP_LOG_DIR", str(tmp_path / "logs"))
    a, b = _halves(tmp_path)
    index, out = small_disk / "index", small_disk / "out"
    api.build_index(spark, Config().with_overrides({"input.path": a, "input.format": "jsonl",
                                                    "index.path": str(index)}))
    assert cli.main(["run", "--input", a, "--format", "jsonl", "--output", str(out), "--quiet", *SPARK]) == 0
    before = open_index(str(index)).manifest
    parts = sorted(p.name for p in (index / "parts").iterdir())
    _fill(small_disk)

    assert cli.main(["run", "--input", b, "--format", "jsonl", "--index", str(index), "--append",
                     "--output", str(tmp_path / "night"), "--quiet", *SPARK]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("neardup: error: no space left on the device at "), err
    assert str(index) in err[0] and "the full trace is in" in err[0]
    log = Path(err[0].rsplit("the full trace is in ", 1)[1].rstrip(")"))
    assert "No space left on device" in log.read_text()
    assert open_index(str(index)).manifest == before
    assert sorted(p.name for p in (index / "parts").iterdir()) == parts  # no orphan part

    assert cli.main(["run", "--input", b, "--format", "jsonl", "--output", str(out), "--overwrite", "--quiet",
                     *SPARK]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no space left on the device at " + str(out) in err[0], err
    assert json.loads((out / "report.json").read_text())["counts"]["documents"] == 600
    assert len(pd.read_parquet(out / "clusters")) == 600
    assert sorted(p.name for p in out.iterdir()) == ["clusters", "deduplicated", "pairs", "report.json"]

    (small_disk / "filler").unlink()  # space again: the same night lands
    assert cli.main(["run", "--input", b, "--format", "jsonl", "--index", str(index), "--append",
                     "--output", str(tmp_path / "night"), "--quiet", *SPARK]) == 0
    assert open_index(str(index)).manifest["version"] == before["version"] + 1


def test_storage_failures_are_told_apart_from_other_errors():
    assert io_failure(OSError(28, "No space left on device", "/data/out/x"))[:2] == \
        ("no space left on the device", "/data/out/x")
    assert io_failure(RuntimeError("org.apache.hadoop.security.AccessControlException: Permission denied: "
                                   "user=etl, access=WRITE, inode=\"/archive/index\""))[:2] == \
        ("no permission", "/archive/index")
    assert io_failure(RuntimeError("[PATH_NOT_FOUND] Path does not exist: file:/a/b/parts."))[0] == "a file is missing"
    assert io_failure(ValueError("a bug of ours")) is None
