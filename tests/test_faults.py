"""Bad input from the command line, each case in a process of its own as a user meets it: one
line that names the cause and the fix, no JVM stack trace in the terminal, no input changed."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from neardup_spark import api
pytestmark = [pytest.mark.compat, pytest.mark.jvm]  # compat: also run on CI's pyspark 3.5 leg

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = Path(api.SAMPLE)


def _make(case: str, where: Path) -> tuple[Path, list[str]]:
    """(the input path, extra CLI arguments) of a bad-input case."""
    data = SAMPLE.read_bytes()
    if case == "truncated_gzip":
        (where / "a.jsonl.gz").write_bytes(data[: len(data) // 2])
    elif case == "corrupt_gzip":
        raw = bytearray(data)
        for i in range(len(raw) // 2, len(raw) // 2 + 4):
            raw[i] ^= 0xFF
        (where / "a.jsonl.gz").write_bytes(bytes(raw))
    elif case == "not_gzip":
        (where / "a.jsonl.gz").write_bytes(b'{"id": 1, "text": "plain text, not gzip"}\n' * 20)
    elif case == "empty_dir":
        (where / "empty").mkdir()
        return where / "empty", []
    elif case == "numeric_text":
        (where / "a.jsonl").write_text("".join(json.dumps({"id": i, "text": i * 7}) + "\n" for i in range(20)))
    elif case == "missing_metadata":
        return SAMPLE, ["--metadata-cols", "source,section"]
    elif case == "mixed_id_types":
        rows = [{"id": 683, "text": "one story about a thing"}, {"id": "683", "text": "another story entirely"}]
        (where / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif case == "delta_without_delta":
        (where / "table").mkdir()
        return where / "table", ["--format", "delta"]
    elif case == "binary_text":
        frame = pd.DataFrame({"id": [1, 2], "text": [b"\x00\x01", b"\x02"]})
        frame.to_parquet(where / "a.parquet")
        return where / "a.parquet", ["--format", "parquet"]
    return next(p for p in where.iterdir() if p.is_file()), []


CASES = {
    "truncated_gzip": "Unexpected end of input stream",
    "corrupt_gzip": "truncated or not valid gzip",
    "not_gzip": "not valid gzip",
    "empty_dir": "holds no jsonl data files",
    "numeric_text": "must be a string",
    "missing_metadata": "no column(s) section",
    "mixed_id_types": '683 and "683" are one id',
    "binary_text": "must be a string",
    "delta_without_delta": "Delta Lake is not on this session's classpath",
}


def _digests(root: Path) -> dict:
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_that_names_the_cause(tmp_path, case):
    inp, extra = _make(case, tmp_path)
    before = _digests(inp)
    argv = ["run", "--input", str(inp), "--format", "jsonl", "--output", str(tmp_path / "out"),
            "--master", "local[1]", "--shuffle-partitions", "2", *extra]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "NEARDUP_LOG_DIR": str(tmp_path / "logs")}
    proc = subprocess.run([sys.executable, "-m", "neardup_spark.cli", *argv], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("neardup: error:")]
    assert len(errors) == 1 and CASES[case] in errors[0], proc.stderr[-2000:]
    assert "\tat " not in proc.stderr and "Traceback" not in proc.stderr  # the JVM's traces stay in its log
    # Besides the progress lines (ours: "neardup: <stage> ..."), the error and at most two lines of JVM start-up.
    said = [line for line in proc.stderr.splitlines()
            if not line.startswith("neardup: ") or line.startswith("neardup: error:")]
    assert len(said) <= 3, proc.stderr
    assert _digests(inp) == before
    assert not (tmp_path / "out" / "clusters").exists()


def test_a_glob_input_and_overwrite_leave_the_earlier_output_intact(tmp_path):
    """The reported data loss: a glob over an earlier run's deduplicated/ as input, that run's
    directory as output, --overwrite. Refused before any work; not one input file changes."""
    prev = tmp_path / "prev"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "NEARDUP_LOG_DIR": str(tmp_path / "logs")}
    first = subprocess.run([sys.executable, "-m", "neardup_spark.cli", "run", "--input", str(SAMPLE), "--format",
                            "jsonl", "--output", str(prev), "--master", "local[1]", "--shuffle-partitions", "2",
                            "--quiet"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    before = _digests(prev)
    again = subprocess.run([sys.executable, "-m", "neardup_spark.cli", "run", "--input",
                            "prev/deduplicated/*.parquet", "--format", "parquet", "--output", "prev", "--overwrite",
                            "--master", "local[1]"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 2 and "overlaps input" in again.stderr, again.stderr[-2000:]
    assert _digests(prev) == before
