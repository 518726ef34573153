"""Run the library call through Spark Connect (a local Connect server); print the counts as JSON."""

import json
import sys

from pyspark.sql import SparkSession

from neardup_spark import Config, deduplicate
from neardup_spark.cli import SAMPLE

spark = SparkSession.builder.remote("local[2]").config("spark.sql.shuffle.partitions", "4").getOrCreate()
assert "connect" in type(spark).__module__, type(spark)
result = deduplicate(spark.read.json(str(SAMPLE)), Config())
counts = result.report["counts"]
statuses = {r["status"]: r["count"] for r in result.clusters.groupBy("status").count().collect()}
json.dump({"counts": counts, "statuses": statuses}, sys.stdout)
spark.stop()
