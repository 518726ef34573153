"""A real Spark Connect server (its own JVM, started from pyspark's SparkConnectServer class)
whose Python workers cannot import this checkout: the CLI's `--remote sc://...` ships the
package itself, `run` (with plots), a nightly build/append/export with catalog tables and
`calibrate` give what a classic session gives, and the README's library example runs as
written on a session that shipped the package as docs/deploying.md says."""

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from neardup_spark import Config, api, cli
from neardup_spark.api import run

from . import frames, oracles
from .conftest import INTERPRETED, PARTITIONS

pytestmark = pytest.mark.process  # every test here starts Spark in processes of its own

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = str(api.SAMPLE)


def readme_library_example() -> str:
    """The code block under the README's "As a library"."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.search(r"## As a library\s+```python\n(.*?)```", text, re.S).group(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    pytest.importorskip("grpc", reason="Spark Connect client needs grpcio (test extra 'connect')")
    import pyspark

    if int(pyspark.__version__.split(".")[0]) < 4:
        pytest.skip("the Connect server in the pip package needs pyspark 4")
    work = tmp_path_factory.mktemp("connect-server")
    worker = work / "python-without-neardup"
    worker.write_text(f"#!/bin/sh\nexec {sys.executable} {ROOT / 'tests' / 'scripts' / 'hidden_package.py'} "
                      f"{ROOT} \"$@\"\n")
    worker.chmod(0o755)
    port = _free_port()
    home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "PYSPARK_PYTHON": str(worker)}
    env.pop("SPARK_REMOTE", None)
    log = open(work / "server.log", "w")
    proc = subprocess.Popen(
        [str(home / "bin" / "spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
         "--master", "local[2]", "--driver-memory", "2g", "--driver-java-options", "-XX:TieredStopAtLevel=1",
         "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.ui.enabled=false", "--conf", f"spark.sql.shuffle.partitions={PARTITIONS}",
         *[arg for key, value in INTERPRETED.items() for arg in ("--conf", f"{key}={value}")],
         "--conf", f"spark.sql.warehouse.dir={work / 'warehouse'}"],
        cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, (work / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the Connect server did not listen within 180 s"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}", work
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def client_only(tmp_path_factory) -> Path:
    """A venv holding the package's wheel with its connect-client extra: pyspark-client, no JVM,
    no classic pyspark. Returns its python."""
    work = tmp_path_factory.mktemp("client-only")
    subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True, timeout=120)
    python = work / "venv" / "bin" / "python"
    def pip(*argv: str) -> None:
        done = subprocess.run([str(python), "-m", "pip", *argv, "-q", "--disable-pip-version-check"], cwd=work,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]

    pip("wheel", "--no-deps", "-w", str(work / "dist"), str(ROOT))
    (wheel,) = (work / "dist").glob("neardup_spark-*.whl")
    pip("install", f"{wheel}[connect-client]")
    probe = subprocess.run([str(python), "-c", "import pyspark, neardup_spark; from pyspark import SparkContext"],
                           cwd=work, capture_output=True, text=True)
    assert probe.returncode == 1 and "cannot import name 'SparkContext'" in probe.stderr, probe.stderr
    return python


def _client(args: list[str], cwd: Path, python: str = sys.executable) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
    return subprocess.run([str(python), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def _cli(url: str, args: list[str], cwd: Path, python: str = sys.executable) -> subprocess.CompletedProcess:
    return _client(["-m", "neardup_spark", *args, "--remote", url], cwd, python)


def test_the_servers_workers_cannot_import_the_package_unshipped(server):
    """The control: without addArtifacts the sketch UDFs fail on the server, and the library says
    so in one line that names the fix."""
    url, work = server
    proc = _client([str(ROOT / "tests" / "scripts" / "connect_client.py"), url, "unshipped"], work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["failed"] and got["no_package"] and got["one_line"], got["error"]


def test_the_cli_ships_the_package_and_runs_with_plots(spark, server, tmp_path):
    url, _ = server
    out = tmp_path / "remote"
    proc = _cli(url, ["run", "--input", SAMPLE, "--format", "jsonl", "--output", str(out), "--plots", "--quiet"],
                tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    classic_run = frames.full_run(spark, SAMPLE, tmp_path, Config().with_overrides({"input.format": "jsonl"}))
    for name, key in (("clusters", ["doc_id"]), ("pairs", ["doc_a", "doc_b"])):
        classic = frames.in_order(pd.read_parquet(classic_run / name), key)
        pd.testing.assert_frame_equal(frames.in_order(pd.read_parquet(out / name)[list(classic.columns)], key), classic)
    report = json.loads((out / "report.json").read_text())
    assert report["plots"] and all((out / Path(p).name).stat().st_size > 0 for p in report["plots"])


def test_nightly_tables_and_calibrate_through_the_server(spark, server, client_only, tmp_path, capsys):
    """index build -> append with catalog tables (the server's catalog) -> export from a
    Connect-only client (pyspark-client, no JVM), and calibrate."""
    url, work = server
    paths = oracles.split_into_nights(pd.read_json(SAMPLE, lines=True), tmp_path, seed=5)
    index = str(tmp_path / "index")
    steps = [
        ["index", "build", "--input", paths[0], "--format", "jsonl", "--index", index, "--quiet"],
        ["run", "--input", paths[1], "--format", "jsonl", "--index", index, "--append",
         "--output", str(tmp_path / "night1"), "--output-table", "nd_connect_night1", "--quiet"],
        ["index", "export", "--index", index, "--output", str(tmp_path / "export")],
    ]
    for argv in steps:
        proc = _cli(url, argv, tmp_path, client_only)
        assert proc.returncode == 0, (argv, proc.stderr[-3000:])
    # The export is the clusters of one classic run over both nights' documents (the index names
    # a cluster by its archived id: compare groups, keepers and statuses).
    both = tmp_path / "both.jsonl"
    pd.concat([pd.read_json(p, lines=True) for p in paths[:2]]).to_json(both, orient="records", lines=True,
                                                                         date_format="iso")
    run(spark, Config().with_overrides({"input.path": str(both), "input.format": "jsonl",
                                        "output.path": str(tmp_path / "classic")}))
    frames.assert_same_clusters(pd.read_parquet(tmp_path / "export" / "clusters"),
                                pd.read_parquet(tmp_path / "classic" / "clusters"))
    # The night's tables are in the server's catalog (its warehouse directory, as Parquet).
    report = json.loads((tmp_path / "night1" / "report.json").read_text())
    assert report["tables"] == {"clusters": "nd_connect_night1_clusters", "pairs": "nd_connect_night1_pairs"}
    night = pd.read_parquet(work / "warehouse" / "nd_connect_night1_clusters")
    assert night.doc_id.is_unique and set(pd.read_json(paths[1], lines=True).id) <= set(night.doc_id)
    assert len(night) == report["counts"]["new_documents"] + report["counts"]["archived_documents_changed"]
    # calibrate (with its plots), against a classic session
    argv = ["calibrate", "--input", SAMPLE, "--format", "jsonl", "--pairs", "2000", "--json"]
    proc = _cli(url, [*argv, "--plots", str(tmp_path / "calibration")], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    remote = json.loads(proc.stdout)
    assert remote.pop("plots") and all(Path(p).stat().st_size > 0 for p in (tmp_path / "calibration").iterdir())
    capsys.readouterr()
    assert cli.main([*argv, "--shuffle-partitions", str(PARTITIONS)]) == 0  # the same command on the classic session
    classic = json.loads(capsys.readouterr().out)
    # The random pairs are drawn per partition, and the server partitions the input its own way:
    # the same figures up to that sample's noise.
    for key in ("documents", "pairs", "bands", "rows", "num_perm", "recommended_threshold"):
        assert remote[key] == classic[key], key
    assert abs(remote["noise_p99"] - classic["noise_p99"]) < 0.02


def test_a_serverless_like_client_runs_with_scratch_tables(spark, server, client_only, tmp_path):
    """A Connect-only client whose session refuses persist, checkpoints and all but a few settings,
    as Databricks serverless does: without cluster.scratch one line naming it; with it, the
    golden outputs of the sample, a nightly index equal to one full run, and no table left."""
    from .test_golden import _check, _hashes

    url, work = server
    paths = oracles.split_into_nights(pd.read_json(SAMPLE, lines=True), tmp_path, seed=1, nights=2)
    proc = _client([str(ROOT / "tests" / "scripts" / "connect_client.py"), url, "serverless", str(tmp_path), *paths],
                   work, client_only)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "cluster.scratch" in got["refusal"] and "\n" not in got["refusal"], got["refusal"]
    assert got["documents"] == 1000 and got["left"] == []
    _check("sample", _hashes(tmp_path / "run"))
    full = frames.full_run(spark, SAMPLE, tmp_path, Config().with_overrides({"input.format": "jsonl"}))
    frames.assert_same_clusters(pd.read_parquet(tmp_path / "export" / "clusters"), pd.read_parquet(full / "clusters"))


def test_the_readme_library_example_runs_on_the_server(spark, server, client_only):
    """The README's `deduplicate` example, from the Connect-only client: the counts and keepers
    of the same example on a classic session."""
    url, work = server
    proc = _client([str(ROOT / "tests" / "scripts" / "connect_client.py"), url, "readme"], work, client_only)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["counts"]["documents"] == 1000 and 0 < got["keepers"] == got["counts"]["clusters"] < 1000
    spark.sql("CREATE DATABASE IF NOT EXISTS news")
    (spark.read.json(SAMPLE).withColumnRenamed("id", "url").withColumnRenamed("text", "body")
     .write.mode("overwrite").saveAsTable("news.articles"))
    scope = {"spark": spark}
    exec(compile(readme_library_example(), "README.md", "exec"), scope)  # noqa: S102 - the README's own example
    classic = scope["result"]
    try:
        assert got["counts"] == json.loads(json.dumps(dict(classic.report["counts"])))
        assert got["keeper_ids"] == sorted(r["url"] for r in classic.deduplicated.select("url").collect())
    finally:
        classic.unpersist()
        spark.sql("DROP DATABASE news CASCADE")
