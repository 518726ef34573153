"""A full run and a nightly build, two appends and an export, through Spark Connect (a local
Connect server). Usage: connect_nightly.py WORK BATCH0 BATCH1 BATCH2; outputs under WORK."""

import json
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from neardup_spark import Config
from neardup_spark import api
from neardup_spark.cli import SAMPLE
from neardup_spark.api import run

work, batches = Path(sys.argv[1]), sys.argv[2:5]
spark = SparkSession.builder.remote("local[2]").config("spark.sql.shuffle.partitions", "4").getOrCreate()
assert "connect" in type(spark).__module__, type(spark)
cfg = Config().with_overrides({"input.format": "jsonl"})
full = run(spark, cfg.with_overrides({"input.path": str(SAMPLE), "output.path": str(work / "full")}))
index = str(work / "index")
api.build_index(spark, cfg.with_overrides({"input.path": batches[0], "index.path": index}))
for k in (1, 2):
    run(spark, cfg.with_overrides({"input.path": batches[k], "index.path": index, "index.append": True,
                                   "output.path": str(work / f"night{k}")}))
api.export(spark, index, str(work / "export"))
json.dump({"counts": full["counts"]}, sys.stdout)
spark.stop()
