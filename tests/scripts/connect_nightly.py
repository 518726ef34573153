"""Through Spark Connect (a local Connect server): the library call on a DataFrame, a full
run, and a nightly build, an append and an export. Usage: connect_nightly.py WORK BATCH0
BATCH1; outputs under WORK, and the library call's counts printed as JSON."""

import json
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from neardup_spark import Config, deduplicate
from neardup_spark import api
from neardup_spark.api import SAMPLE
from neardup_spark.api import run

work, batches = Path(sys.argv[1]), sys.argv[2:4]
spark = SparkSession.builder.remote("local[2]").config("spark.sql.shuffle.partitions", "4").getOrCreate()
assert "connect" in type(spark).__module__, type(spark)
result = deduplicate(spark.read.json(str(SAMPLE)), Config())
statuses = {r["status"]: r["count"] for r in result.clusters.groupBy("status").count().collect()}
cfg = Config().with_overrides({"input.format": "jsonl"})
full = run(spark, cfg.with_overrides({"input.path": str(SAMPLE), "output.path": str(work / "full")}))
index = str(work / "index")
api.build_index(spark, cfg.with_overrides({"input.path": batches[0], "index.path": index}))
run(spark, cfg.with_overrides({"input.path": batches[1], "index.path": index, "index.append": True,
                               "output.path": str(work / "night")}))
api.export(spark, index, str(work / "export"))
json.dump({"counts": result.report["counts"], "statuses": statuses, "full_counts": full["counts"]}, sys.stdout)
spark.stop()
