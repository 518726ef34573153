"""Building sessions: settings, and the driver JVM's class-data archive."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark import SparkContext

from neardup_spark import api
from neardup_spark.runtime import jvm, session, sizing, tempdirs
from neardup_spark.config import SparkConfig

pytestmark = pytest.mark.compat  # also run on CI's pyspark 3.5 leg

ROOT = Path(__file__).resolve().parents[1]


def test_java_options_are_added_to_the_users_own():
    cfg = SparkConfig(master="local[2]", shuffle_partitions=3,
                      conf={"spark.driver.extraJavaOptions": "-Dmine=1", "spark.ui.enabled": "true"})
    master, settings = session.session_settings(cfg, "-Xfoo")
    assert master == "local[2]"
    assert settings["spark.driver.extraJavaOptions"] == "-Dmine=1 -Xfoo"
    assert settings["spark.ui.enabled"] == "true"  # the user's setting beats the local default
    assert settings["spark.sql.shuffle.partitions"] == "3"
    _, plain = session.session_settings(SparkConfig(master="local[2]"))
    assert "spark.driver.extraJavaOptions" not in plain


@pytest.fixture
def fake_java(tmp_path, monkeypatch):
    """A JAVA_HOME whose release file says what version it is; no JVM running in this process."""

    def make(version: str) -> Path:
        home = tmp_path / f"jdk-{version}"
        (home / "bin").mkdir(parents=True)
        (home / "bin" / "java").write_text("")
        (home / "release").write_text(f'IMPLEMENTOR="Test"\nJAVA_VERSION="{version}"\n')
        monkeypatch.setenv("JAVA_HOME", str(home))
        return home

    monkeypatch.setattr(SparkContext, "_gateway", None)
    monkeypatch.setenv("NEARDUP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    for var in ("PYSPARK_GATEWAY_PORT", "DATABRICKS_RUNTIME_VERSION"):
        monkeypatch.delenv(var, raising=False)
    return make


def test_class_archive_is_made_once_then_used(fake_java, tmp_path):
    fake_java("17.0.15")
    local = SparkConfig(master="local[2]")
    first = jvm.class_archive(local)
    assert first.making is not None and not first.path.exists()
    assert f"-XX:ArchiveClassesAtExit={first.making}" in first.java_options
    assert first.path.parent == tmp_path / "cache"
    first.path.write_bytes(b"archive")
    second = jvm.class_archive(local)
    assert second.path == first.path and second.making is None
    assert f"-XX:SharedArchiveFile={first.path}" in second.java_options
    fake_java("21.0.1")  # another runtime: another archive
    assert jvm.class_archive(local).path != first.path


@pytest.mark.parametrize("case", ["switched off", "cluster", "spark-submit", "java 11", "defaults set options",
                                  "jvm running"])
def test_no_class_archive_where_it_cannot_apply(fake_java, tmp_path, monkeypatch, case):
    fake_java("11.0.2" if case == "java 11" else "17.0.15")
    cfg = SparkConfig(master="local[2]", class_cache=case != "switched off")
    if case == "cluster":
        cfg = SparkConfig(master="spark://host:7077")
    if case == "spark-submit":
        monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "12345")
    if case == "defaults set options":
        (tmp_path / "conf").mkdir()
        (tmp_path / "conf" / "spark-defaults.conf").write_text("spark.driver.extraJavaOptions  -Dx=1\n")
    if case == "jvm running":
        monkeypatch.setattr(SparkContext, "_gateway", object())
    assert jvm.class_archive(cfg) is None


def test_stale_half_made_and_unused_archives_are_removed(fake_java, tmp_path):
    fake_java("17.0.15")
    cache = tmp_path / "cache"
    cache.mkdir()
    old, fresh = cache / "a.jsa.1.part", cache / "b.jsa.2.part"
    unused, recent = cache / "spark-old.jsa", cache / "spark-recent.jsa"
    for f in (old, fresh, unused, recent):
        f.write_bytes(b"x")
    os.utime(old, (0, 0))
    os.utime(unused, (0, 0))
    ours = jvm.class_archive(SparkConfig(master="local[2]")).path
    ours.write_bytes(b"archive")
    os.utime(ours, (0, 0))
    jvm.class_archive(SparkConfig(master="local[2]"))  # uses ours: touched, not removed
    assert not old.exists() and fresh.exists() and not unused.exists() and recent.exists()
    assert ours.exists() and ours.stat().st_mtime > 0


@pytest.mark.process
@pytest.mark.skipif(jvm._java_release() is None, reason="needs Java 13+ with a release file")
def test_cli_makes_the_archive_then_uses_it(tmp_path):
    # Two real `neardup run` processes, each starting its own JVM: the first
    # writes the archive as its JVM exits, the second maps it. Same results.
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "NEARDUP_CACHE_DIR": str(tmp_path / "cache"), "PYSPARK_PYTHON": sys.executable,
           "TMPDIR": str(temp)}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    reports = []
    for run in ("first", "second"):
        out = tmp_path / run
        proc = subprocess.run(
            [sys.executable, "-m", "neardup_spark.cli", "run", "--input", str(api.SAMPLE), "--format", "jsonl",
             "--output", str(out), "--master", "local[2]", "--shuffle-partitions", "2", "--quiet"],
            env=env, capture_output=True, text=True, timeout=600, cwd=ROOT,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert ("class-data archive" in proc.stderr) == (run == "first")
        reports.append(json.loads((out / "report.json").read_text())["counts"])
        made = [p for p in (tmp_path / "cache").iterdir() if p.name != "logs"]  # logs/: Spark's own log
        assert len(made) == 1 and made[0].suffix == ".jsa" and made[0].stat().st_size > 1_000_000
        assert not list(temp.glob("neardup-*")), "the run left its temporary directories behind"
    assert reports[0] == reports[1]


def test_a_process_temp_dir_is_gone_when_the_process_exits(tmp_path):
    code = "from neardup_spark.runtime.tempdirs import process_temp_dir as t; import os; p = t('neardup-x-'); " \
           "open(os.path.join(p, 'f'), 'w').write('x'); print(p)"
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TMPDIR": str(tmp_path)},
                          capture_output=True, text=True, timeout=60, check=True)
    made = Path(proc.stdout.strip())
    assert made.parent == tmp_path and made.name.startswith("neardup-x-")
    assert not made.exists()


@pytest.mark.compat
def test_the_temp_dirs_of_killed_processes_are_swept_by_the_next(tmp_path):
    code = "from neardup_spark.runtime.tempdirs import process_temp_dir as t; import os; p = t('neardup-x-'); " \
           "print(p, flush=True); os.kill(os.getpid(), 9)"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    killed = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    left = Path(killed.stdout.strip())
    assert killed.returncode == -9 and left.is_dir()  # no exit handler ran
    alive = tmp_path / f"neardup-x-{tempdirs._host()}-{os.getpid()}-abc"  # this process: running
    dead = int(left.name.split("-")[-2])
    other_host = tmp_path / f"neardup-x-elsewhere-{dead}-abc"  # a shared /tmp: not ours to judge
    old_style, other = tmp_path / "neardup-x-q1w2e3", tmp_path / f"neardup-y-{tempdirs._host()}-1-abc"
    for folder in (alive, other_host, old_style, other):
        folder.mkdir()
    assert tempdirs.sweep_temp_dirs("neardup-x-", str(tmp_path)) == [left.name]
    assert not left.exists() and all(f.is_dir() for f in (alive, other_host, old_style, other))


_STOP = r"""
import threading, time
from pyspark.sql import SparkSession
from neardup_spark.runtime.session import stop_without_waiting

def session():
    return SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()

spark = session()
acc = spark.sparkContext.accumulator(0)
spark.sparkContext.parallelize(range(10), 2).foreach(lambda x: acc.add(x))
assert acc.value == 45  # the accumulator server worked
server = spark.sparkContext._accumulatorServer
stop_without_waiting(spark)
assert SparkSession.getActiveSession() is None and spark.sparkContext._jsc is None
deadline = time.time() + 5
while any(t.name == "neardup-accumulator-shutdown" for t in threading.enumerate()) or not server.server_shutdown:
    assert time.time() < deadline, "the accumulator server did not shut down"
    time.sleep(0.05)
assert session().range(3).count() == 3  # a new session starts after it
print("stopped")
"""


@pytest.mark.jvm
def test_stop_without_waiting_stops_spark_and_then_its_accumulator_server():
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    proc = subprocess.run([sys.executable, "-c", _STOP], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0 and "stopped" in proc.stdout, proc.stderr[-3000:]


def test_short_local_runs_compile_with_c1_only(tmp_path, monkeypatch):
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    local = SparkConfig(master="local[2]")
    small, big = jvm.SHORT_RUN_BYTES - 1, jvm.SHORT_RUN_BYTES
    assert jvm.jit_options(local, small) == "-XX:TieredStopAtLevel=1"
    assert jvm.jit_options(local, big) == ""
    assert jvm.jit_options(local, None) == ""  # unknown size (a table, a URL): the JVM's default
    assert jvm.jit_options(SparkConfig(master="local[2]", jit="c1"), big) == "-XX:TieredStopAtLevel=1"
    assert jvm.jit_options(SparkConfig(master="local[2]", jit="default"), small) == ""
    assert jvm.jit_options(SparkConfig(master="yarn"), small) == ""
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")
    assert jvm.jit_options(local, small) == ""


def test_local_input_bytes(tmp_path):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "a.parquet").write_bytes(b"x" * 10)
    (tmp_path / "d" / "sub" / "b.parquet").write_bytes(b"x" * 5)
    assert sizing.local_input_bytes(str(tmp_path / "d")) == 15
    assert sizing.local_input_bytes(str(tmp_path / "d" / "a.parquet")) == 10
    assert sizing.local_input_bytes(f"file://{tmp_path / 'd'}") == 15
    assert sizing.local_input_bytes(str(tmp_path / "missing")) is None
    assert sizing.local_input_bytes("s3://bucket/news") is None
    assert sizing.local_input_bytes(str(tmp_path / "d" / "*.parquet")) is None


def test_jit_mode_is_validated():
    from neardup_spark.config import Config, ConfigError

    with pytest.raises(ConfigError, match="spark.jit"):
        Config().with_overrides({"spark.jit": "c2"})


def test_local_workers_fork_with_the_kernels_loaded(spark):
    # Checked inside a worker: the daemon (spark.python.daemon.module) built both
    # translate tables before forking; no pipeline function builds the second one.
    def probe(batches):
        import sys

        import pyarrow as pa

        normalise = sys.modules.get("neardup_spark.kernels.normalise")
        built = normalise._translation.cache_info().currsize if normalise else -1
        for _ in batches:
            yield pa.RecordBatch.from_pydict({"built": [built]})

    assert spark.conf.get("spark.python.daemon.module") == "neardup_spark.worker_daemon"
    assert {r["built"] for r in spark.range(2, numPartitions=2).mapInArrow(probe, "built long").collect()} == {2}


def test_worker_daemon_freezes_what_it_loaded():
    # In a fresh interpreter, as Spark starts the daemon: after prepare() the imported
    # modules sit in the permanent generation, so a worker's per-task gc.collect()
    # no longer walks them.
    code = ("import gc; from neardup_spark import worker_daemon; worker_daemon.prepare(); "
            "import sys; print(gc.get_freeze_count(), 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert int(out[0]) > 10_000 and out[1] == "True"


def test_local_workers_run_with_the_daemons_objects_frozen(spark):
    def probe(batches):
        import gc

        import pyarrow as pa

        for _ in batches:
            yield pa.RecordBatch.from_pydict({"frozen": [gc.get_freeze_count()]})

    counts = [r["frozen"] for r in spark.range(2, numPartitions=2).mapInArrow(probe, "frozen long").collect()]
    assert min(counts) > 10_000
