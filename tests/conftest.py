"""One Spark session per test run, created lazily, tuned for tiny data.

Tests that need no JVM (config, params, hashing kernels, the corpus) never
touch the `spark` fixture, so they run in milliseconds. Set
NEARDUP_GRAPHFRAMES_JAR to a GraphFrames jar to enable the GraphFrames tests, and
NEARDUP_ICEBERG_JAR to the jars of scripts/iceberg-jar.sh for the Iceberg table tests.
"""

from __future__ import annotations

import os
import sys

import pytest

GRAPHFRAMES_JAR = os.environ.get("NEARDUP_GRAPHFRAMES_JAR", "")
# An Iceberg Spark runtime jar (and what it needs beside it, comma-separated; see
# scripts/iceberg-jar.sh): the session then has an Iceberg Hadoop catalog named "ice".
ICEBERG_JAR = os.environ.get("NEARDUP_ICEBERG_JAR", "")
ICEBERG_CATALOG = "ice"


def pytest_collection_modifyitems(config, items):
    """`fast` (the tier `./scripts/test.sh -m fast` runs before each commit, in a few minutes):
    every test that needs no JVM, plus the few Spark tests marked `fast` by hand that cover
    a whole run end to end. Tests that start Spark themselves (`process`, `jvm`) never are."""
    for item in items:
        if any(item.get_closest_marker(m) for m in ("process", "jvm", "slow")):
            continue
        if "spark" not in item.fixturenames:
            item.add_marker(pytest.mark.fast)


@pytest.fixture(scope="session", autouse=True)
def _class_cache_in_tmp(tmp_path_factory):
    """CLI processes started by tests keep their JVM class-data archives in a
    temporary directory, never in the user's ~/.cache (a killed run leaves a
    half-made one behind)."""
    os.environ["NEARDUP_CACHE_DIR"] = str(tmp_path_factory.mktemp("neardup-cache"))


# The tests' data is tiny and their queries many: compiling each query to Java (whole-stage
# codegen) and HotSpot's optimising compiler (C2) cost more CPU than they save, about a
# third of the suite's time on 2 cores. Results do not depend on either: Spark runs its own
# tests both ways. The golden-output tests switch codegen on for themselves (`codegen`), so
# the pinned outputs are those of queries run as production runs them; NEARDUP_TEST_CODEGEN=1
# keeps it on for the whole session.
INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
COMPILED = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}  # Spark's defaults


# Two partitions per shuffle, one task per core of local[2]: the tests' data is tiny, a task
# costs more to schedule than to run, and every multi-partition path is still taken. About a
# fifth of the Spark tests' time against four. Tests that start `neardup` in-process or as a
# process pass the same number (an in-process run sets it on the shared session).
PARTITIONS = 2


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from neardup_spark.config import SparkConfig
    from neardup_spark.runtime.session import build_session

    os.environ["PYSPARK_PYTHON"] = sys.executable
    conf = {
        "spark.default.parallelism": str(PARTITIONS),
        "spark.sql.adaptive.enabled": "false",  # keep partition counts as the tests set them
        "spark.driver.memory": "6g",
        "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse")),
    }
    if not os.environ.get("NEARDUP_TEST_CODEGEN"):
        conf.update(INTERPRETED)
    jars = [jar for jar in (GRAPHFRAMES_JAR, ICEBERG_JAR) if jar]
    if jars:
        conf["spark.jars"] = ",".join(jars)
    if ICEBERG_JAR:
        conf[f"spark.sql.catalog.{ICEBERG_CATALOG}"] = "org.apache.iceberg.spark.SparkCatalog"
        conf[f"spark.sql.catalog.{ICEBERG_CATALOG}.type"] = "hadoop"
        conf[f"spark.sql.catalog.{ICEBERG_CATALOG}.warehouse"] = str(tmp_path_factory.mktemp("iceberg"))
    session = build_session(
        SparkConfig(master="local[2]", app_name="neardup-tests", shuffle_partitions=PARTITIONS, conf=conf, jit="c1"),
        checkpoint_dir=str(tmp_path_factory.mktemp("checkpoints")),
    )
    yield session
    session.stop()


@pytest.fixture()
def codegen(spark):
    """The session's queries compiled (whole-stage codegen, Spark's defaults) for one test."""
    before = {key: spark.conf.get(key) for key in COMPILED}
    for key, value in COMPILED.items():
        spark.conf.set(key, value)
    try:
        yield spark
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)


@pytest.fixture(scope="session")
def has_graphframes(spark) -> bool:
    if not GRAPHFRAMES_JAR:
        return False
    try:
        import graphframes  # noqa: F401
    except ImportError:
        return False
    return True
