"""Settings a run sizes for itself: shuffle partitions and the local driver heap."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neardup_spark.config import SparkConfig
from neardup_spark.runtime import session, sizing
from neardup_spark.runtime.routing import shuffle_partitions

SAMPLE = Path(__file__).resolve().parents[1] / "neardup_spark" / "data" / "sample.jsonl.gz"
GIB = 2**30


@pytest.mark.parametrize("master, cores", [("local", 1), ("local[3]", 3), ("local[2, 4]", 2),
                                           ("local[*]", os.cpu_count()), ("spark://h:7077", None),
                                           ("yarn", None), ("local-cluster[2,1,1024]", None)])
def test_local_cores(master, cores):
    assert sizing.local_cores(master) == cores


def test_partitions_grow_with_cores_then_with_input():
    assert sizing.partitions_for(2) == 8
    assert sizing.partitions_for(2, 100 * 2**20) == 8
    assert sizing.partitions_for(2, 12 * GIB) == 48  # one a 256 MiB of input beyond 4 a core
    assert sizing.partitions_for(64, 12 * GIB) == 256


def test_driver_heap_grows_with_input_and_leaves_most_of_the_machine_to_the_rest():
    assert sizing.driver_memory_for(None, 24 * GIB) == "4g"
    assert sizing.driver_memory_for(120 * 2**20, 24 * GIB) == "4g"
    assert sizing.driver_memory_for(int(1.2 * GIB), 24 * GIB) == "5g"
    assert sizing.driver_memory_for(12 * GIB, 24 * GIB) == "9g"  # 40% of 24 GiB
    assert sizing.driver_memory_for(12 * GIB, 64 * GIB) == "25g"
    assert sizing.driver_memory_for(None, 4 * GIB) == "1638m"  # 40%, not rounded down to 1g
    assert sizing.driver_memory_for(None, 1 * GIB) == "512m"  # Spark's minimum
    assert sizing.driver_memory_for(None, None) == "4g"


def test_a_new_local_session_is_sized_unless_the_user_says(monkeypatch):
    monkeypatch.delenv("SPARK_DRIVER_MEMORY", raising=False)
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    for var in ("PYSPARK_GATEWAY_PORT", "DATABRICKS_RUNTIME_VERSION"):
        monkeypatch.delenv(var, raising=False)
    _, plain = session.session_settings(SparkConfig(master="local[2]"), input_bytes=3 * GIB)
    assert plain[sizing.SHUFFLE_PARTITIONS] == "12"
    assert plain[sizing.DRIVER_MEMORY] == sizing.driver_memory_for(3 * GIB, sizing.physical_memory())
    assert "local[2]: 2 cores" in plain[sizing.SIZED_PARTITIONS]
    _, given = session.session_settings(SparkConfig(master="local[2]", shuffle_partitions=3,
                                                    conf={"spark.driver.memory": "7g"}))
    assert given[sizing.SHUFFLE_PARTITIONS] == "3" and given[sizing.DRIVER_MEMORY] == "7g"
    assert sizing.SIZED_PARTITIONS not in given and sizing.SIZED_MEMORY not in given
    _, running = session.session_settings(SparkConfig(master="local[2]"), fresh=False)
    assert sizing.SHUFFLE_PARTITIONS not in running  # getOrCreate would override the running session's
    _, cluster = session.session_settings(SparkConfig(master="spark://h:7077"))
    assert sizing.SHUFFLE_PARTITIONS not in cluster and sizing.DRIVER_MEMORY not in cluster
    monkeypatch.setenv("SPARK_DRIVER_MEMORY", "9g")
    _, env = session.session_settings(SparkConfig(master="local[2]"))
    assert sizing.DRIVER_MEMORY not in env


def test_a_session_whose_partitions_were_chosen_keeps_them(spark):
    before = spark.conf.get(sizing.SHUFFLE_PARTITIONS)
    with sizing.sized(spark, 10 * GIB) as used:
        assert spark.conf.get(sizing.SHUFFLE_PARTITIONS) == before
    assert used.shuffle_partitions == int(before) and used.partitions_from == "set"


def test_an_unchosen_setting_is_sized_for_the_run_and_set_back(spark, monkeypatch):
    monkeypatch.setattr(sizing, "explicit_partitions", lambda s: False)
    before = spark.conf.get(sizing.SHUFFLE_PARTITIONS)
    cores = sizing.local_cores(spark.sparkContext.master)
    with sizing.sized(spark, 3 * GIB) as used:
        assert shuffle_partitions(spark) == used.shuffle_partitions == sizing.partitions_for(cores, 3 * GIB)
        assert used.partitions_from.startswith("sized for local[")
    assert spark.conf.get(sizing.SHUFFLE_PARTITIONS) == before
    assert spark.conf.get(sizing.SIZED_PARTITIONS, "") == ""


class _Conf:
    def __init__(self, values):
        self.values = dict(values)

    def get(self, key, default=None):
        return self.values.get(key, default)

    def set(self, key, value):
        self.values[key] = value

    def unset(self, key):
        self.values.pop(key, None)

    def contains(self, key):
        return key in self.values


class _Session:
    """A session as `sizing` sees one: runtime conf, launch conf, master, default parallelism."""

    def __init__(self, runtime=(), launch=(), master="local[2]", parallelism=2, connect=False):
        self.conf, self._launch, self._connect = _Conf(runtime), _Conf(launch), connect
        self.master, self.defaultParallelism = master, parallelism

    @property
    def sparkContext(self):
        if self._connect:
            raise RuntimeError("no SparkContext under Spark Connect")
        return self

    def getConf(self):
        return self._launch


def test_explicit_means_launch_conf_or_not_spark_default(spark):
    assert sizing.explicit_partitions(spark)  # the tests' session sets it at launch
    assert sizing.explicit_partitions(_Session(launch={sizing.SHUFFLE_PARTITIONS: "200"}))  # spark-submit --conf
    assert sizing.explicit_partitions(_Session(runtime={sizing.SHUFFLE_PARTITIONS: "32"}))
    assert not sizing.explicit_partitions(_Session(runtime={sizing.SHUFFLE_PARTITIONS: "200"}))
    assert not sizing.explicit_partitions(_Session())
    assert sizing.session_partitions(_Session(connect=True)) is None  # the server's setting stands


def test_a_cluster_is_never_sized_below_spark_default():
    few = sizing.session_partitions(_Session(master="yarn", parallelism=2))
    many = sizing.session_partitions(_Session(master="spark://h:7077", parallelism=400))
    assert few[0] == 200 and many[0] == 1600 and "default parallelism" in many[1]


def test_sized_sets_back_after_an_error_and_nests(monkeypatch):
    monkeypatch.setattr(sizing, "_was_set", lambda s, k: False)
    session = _Session()
    with pytest.raises(ValueError):
        with sizing.sized(session) as used:
            assert session.conf.get(sizing.SHUFFLE_PARTITIONS) == "8" and used.shuffle_partitions == 8
            with sizing.sized(session, 100 * GIB) as inner:  # inside a run: nothing changes
                assert inner.shuffle_partitions == 8 and session.conf.get(sizing.SIZED_PARTITIONS)
            assert session.conf.get(sizing.SIZED_PARTITIONS)
            raise ValueError("a failed run")
    assert session.conf.values == {}  # unset again, as it was
    user = _Session(runtime={sizing.SHUFFLE_PARTITIONS: "200"})
    monkeypatch.setattr(sizing, "_was_set", lambda s, k: True)
    with sizing.sized(user):
        assert user.conf.get(sizing.SHUFFLE_PARTITIONS) == "8"
    assert user.conf.values == {sizing.SHUFFLE_PARTITIONS: "200"}


def test_settings_spark_submit_reads_are_not_overridden(monkeypatch, tmp_path):
    for var in ("SPARK_DRIVER_MEMORY", "PYSPARK_SUBMIT_ARGS", "SPARK_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert sizing.local_settings("local[2]", {}, None).keys() >= {sizing.SHUFFLE_PARTITIONS, sizing.DRIVER_MEMORY}
    (tmp_path / "spark-defaults.conf").write_text("spark.sql.shuffle.partitions   64\n")
    assert sizing.SHUFFLE_PARTITIONS not in sizing.local_settings("local[2]", {}, None)
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--conf spark.driver.memory=8g pyspark-shell")
    assert sizing.DRIVER_MEMORY not in sizing.local_settings("local[2]", {}, None)
    assert sizing.DRIVER_MEMORY not in sizing.local_settings("local[2]", {}, None, heap=False)


@pytest.mark.process
def test_a_run_without_config_sizes_itself_and_says_so(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "NEARDUP_LOG_DIR": str(tmp_path / "logs")}
    for var in ("SPARK_DRIVER_MEMORY", "PYSPARK_SUBMIT_ARGS"):
        env.pop(var, None)
    proc = subprocess.run([sys.executable, "-m", "neardup_spark.cli", "run", "--input", str(SAMPLE), "--format",
                           "jsonl", "--output", str(out), "--master", "local[2]"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    used = json.loads((out / "report.json").read_text())["sizing"]
    assert used["shuffle_partitions"] == 8 and used["shuffle_partitions_from"].startswith("sized for local[2]")
    want = sizing.driver_memory_for(SAMPLE.stat().st_size, sizing.physical_memory())
    assert used["driver_memory"] == want and used["driver_memory_from"].startswith("sized for")
    assert "spark     8 shuffle partitions (sized for local[2]: 2 cores" in proc.stdout


class _Refusing(_Conf):
    """A serverless session's conf: only some of Spark's keys may be set."""

    def __init__(self, values, allowed):
        super().__init__(values)
        self.allowed = allowed

    def set(self, key, value):
        if key not in self.allowed:
            raise RuntimeError(f"[CONFIG_NOT_AVAILABLE] Configuration {key} is not available.")
        super().set(key, value)

    def unset(self, key):
        self.set(key, None)
        self.values.pop(key, None)


@pytest.mark.parametrize("allowed", [{sizing.SHUFFLE_PARTITIONS}, set()], ids=["partitions", "nothing"])
def test_a_session_that_refuses_settings_is_sized_in_the_report_only(monkeypatch, allowed):
    """No conf key is set that the session refuses, none is left behind, no error escapes, and
    the report says what sizing chose (or would have chosen)."""
    monkeypatch.setattr(sizing, "_was_set", lambda s, k: False)
    session = _Session()
    session.conf = _Refusing({}, allowed)
    with pytest.raises(ValueError, match="a failed run"):
        with sizing.sized(session) as used:
            if allowed:
                assert used.shuffle_partitions == 8 and used.partitions_from.startswith("sized for local[2]")
            else:
                assert "refused spark.sql.shuffle.partitions=8" in used.partitions_from
            with sizing.sized(session) as inner:  # nested: nothing more is tried
                assert inner.partitions_from == used.partitions_from
            raise ValueError("a failed run")
    assert session.conf.values == {} and sizing.describe(session).partitions_from == "set"
