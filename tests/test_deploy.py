"""Deployed as users deploy: spark-submit against a real standalone cluster (Master and
Workers in JVMs of their own), with the README's cluster config."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from neardup_spark import api
from .cluster import can_make_private_mounts, standalone_cluster

pytestmark = pytest.mark.process  # every test here starts Spark in processes of its own

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = str(api.SAMPLE)
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two 1-core Workers; where the machine allows private mounts, each sees its own empty
    tmpfs over `private` (driver-only storage), else `private` is None."""
    if not SPARK_SUBMIT.exists():
        pytest.skip("spark-submit is not installed beside this interpreter")
    work = tmp_path_factory.mktemp("standalone")
    private = work / "private" if can_make_private_mounts() else None
    with standalone_cluster(work / "daemons", workers=2, cores=1, memory="1g", private_dir=private) as url:
        yield url, private


def _submit(master: str, args: list[str], cwd: Path, job: str = "") -> subprocess.CompletedProcess:
    """spark-submit of `job` (default: the README's "$(neardup job-file)") with `args`."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    job = job or subprocess.run([sys.executable, "-m", "neardup_spark", "job-file"], capture_output=True, text=True,
                                check=True).stdout.strip()
    c1 = "-XX:TieredStopAtLevel=1"  # short jobs: as the tests' own session (see conftest)
    cmd = [str(SPARK_SUBMIT), "--master", master, "--conf", "spark.ui.enabled=false",
           "--conf", "spark.executor.memory=768m", "--driver-java-options", c1,
           "--conf", f"spark.executor.extraJavaOptions={c1}", "--conf", "spark.sql.shuffle.partitions=2", job, *args]
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)


def test_readme_spark_submit_with_the_cluster_preset(cluster, tmp_path):
    """Separate executor JVMs and Python workers (closures and UDFs must serialise). The cluster
    preset asks for reliable checkpoints: the run finds a checkpoint directory itself."""
    url, _ = cluster
    out = tmp_path / "out"
    proc = _submit(url, ["run", "--input", SAMPLE, "--format", "jsonl", "--output", str(out),
                         "--preset", "cluster", "--shuffle-partitions", "2", "--quiet"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    clusters = pd.read_parquet(out / "clusters")
    assert len(clusters) == 1000 and clusters.doc_id.is_unique
    report = json.loads((out / "report.json").read_text())
    assert len(pd.read_parquet(out / "deduplicated")) == report["counts"]["clusters"]
    assert report["counts"]["removed"] == int((~clusters.is_keeper).sum()) > 0
    assert len(pd.read_parquet(out / "pairs")) == report["counts"]["verified_pairs"] + report["counts"]["exact_duplicates"]
    assert not [p for p in out.iterdir() if p.name.startswith("_neardup")]  # probe and checkpoints removed


@pytest.mark.parametrize("command", ["run", "index"])
def test_storage_the_executors_do_not_share_is_refused_before_work(cluster, tmp_path, command):
    url, private = cluster
    if private is None:
        pytest.skip("needs unshare -m (a private mount namespace) to simulate driver-only storage")
    out = private / f"out-{command}"
    if command == "run":
        args = ["run", "--input", SAMPLE, "--format", "jsonl", "--output", str(out), "--shuffle-partitions", "2"]
    else:
        args = ["index", "build", "--input", SAMPLE, "--format", "jsonl", "--index", str(out),
                "--shuffle-partitions", "2"]
    start = time.perf_counter()
    proc = _submit(url, args, tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    said = proc.stdout + proc.stderr  # spark-submit's Python runner sends the driver's stderr to stdout
    errors = [line for line in said.splitlines() if line.startswith("neardup: error:")]
    assert len(errors) == 1 and "is not shared storage" in errors[0], said[-3000:]
    assert "Traceback" not in said
    assert time.perf_counter() - start < 120


def test_a_night_appended_on_the_cluster_equals_one_full_run(cluster, spark, tmp_path):
    """The index at a file:// URI (the Hadoop filesystem path that hdfs:// takes), built and
    appended to by one spark-submit application (the library's build_index and run, which the
    CLI calls; the CLI's own job file on the cluster: the README test above) whose executors
    run in the Workers' JVMs. Compaction, vacuum and export at a URI are the same writers
    in-process (test_filestore)."""
    from neardup_spark.api import export

    from . import oracles
    from . import frames
    from .test_nightly import _cfg

    url, _ = cluster
    rows = pd.read_json(SAMPLE, lines=True)
    archive, night = oracles.split_into_nights(rows, tmp_path, seed=3, nights=2)
    index = (tmp_path / "index").as_uri()
    proc = _submit(url, [archive, night, index, str(tmp_path / "night")], tmp_path,
                   job=str(ROOT / "tests" / "scripts" / "cluster_night.py"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "night" / "report.json").exists()
    manifest = json.loads((tmp_path / "index" / "manifest.json").read_text())
    assert manifest["version"] == 2 and manifest["documents"] == len(rows)
    export(spark, index, str(tmp_path / "export"))
    nightly = pd.read_parquet(tmp_path / "export" / "clusters")
    full = pd.read_parquet(frames.full_run(spark, SAMPLE, tmp_path, _cfg()) / "clusters")
    assert len(nightly) == len(rows)
    frames.assert_same_clusters(nightly, full)
