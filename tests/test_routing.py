"""Routing groups to partitions of their own: Spark's own hash is the oracle."""

import pytest
from pyspark.sql import functions as F

from neardup_spark.runtime.routing import DEFAULT_PARTITIONS, route, route_keys, shuffle_partitions, spark_hash_long


def test_hash_matches_spark_on_any_long(spark):
    values = [0, 1, -1, 42, 2**31 - 1, -(2**31), 2**32, 2**63 - 1, -(2**63), 123456789012345, -987654321098]
    df = spark.createDataFrame([(v,) for v in values], "v long")
    assert [r[0] for r in df.select(F.hash("v")).collect()] == [spark_hash_long(v) for v in values]


@pytest.mark.parametrize("parts", [1, 3, 8, 200])
def test_each_group_gets_a_partition_of_its_own(spark, parts):
    groups = spark.range(0, parts * 5).select((F.col("id") % parts).alias("g"))
    routed = groups.repartition(parts, route(F.col("g"), parts))
    seen = routed.select("g", F.spark_partition_id().alias("p")).distinct().collect()
    assert sorted((r["g"], r["p"]) for r in seen) == [(g, g) for g in range(parts)]
    assert len(set(route_keys(parts))) == parts


def test_shuffle_partitions_that_are_not_a_number_count_as_the_default(spark):
    # Databricks accepts spark.sql.shuffle.partitions = "auto"; the stages need a number.
    class Conf:
        def __init__(self, value):
            self.value = value

        def get(self, key, default=None):
            return self.value

    class Session:
        def __init__(self, value):
            self.conf = Conf(value)

    assert shuffle_partitions(spark) == int(spark.conf.get("spark.sql.shuffle.partitions"))
    assert shuffle_partitions(Session("auto")) == shuffle_partitions(Session("0")) == DEFAULT_PARTITIONS
    assert shuffle_partitions(Session(" 12 ")) == 12
