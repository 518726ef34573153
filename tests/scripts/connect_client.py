"""Client-side checks against a real Spark Connect server (sys.argv[1], sc://...).

    connect_client.py URL unshipped   # the library without addArtifacts: must fail on the server
    connect_client.py URL readme      # the README's library example, as written, on a shipped session
    connect_client.py URL serverless OUT NIGHT0 NIGHT1
                                      # as Databricks serverless: persist, checkpoints and most settings
                                      # refused; a run of the sample and two nights with scratch tables

Prints one JSON object."""

import json
import re
import sys
from pathlib import Path

from pyspark.sql import SparkSession

url, case = sys.argv[1], sys.argv[2]
spark = SparkSession.builder.remote(url).config("spark.sql.shuffle.partitions", "2").getOrCreate()
ROOT = Path(__file__).resolve().parents[2]

from neardup_spark import deduplicate, ship  # noqa: E402
from neardup_spark.api import SAMPLE  # noqa: E402

if case == "unshipped":
    try:
        deduplicate(spark.read.json(str(SAMPLE)), id_col="id", text_col="text").clusters.count()
    except Exception as exc:  # noqa: BLE001 - the server's error is the result
        text = str(exc)
        print(json.dumps({"failed": True, "no_package": "No module named 'neardup_spark'" in text,
                          "one_line": "\n" not in text and "neardup_spark.ship(spark)" in text, "error": text[:2000]}))
    else:
        print(json.dumps({"failed": False}))
elif case == "readme":
    ship(spark)  # what docs/deploying.md says a notebook does
    spark.sql("CREATE DATABASE IF NOT EXISTS news")
    (spark.read.json(str(SAMPLE)).withColumnRenamed("id", "url").withColumnRenamed("text", "body")
     .write.mode("overwrite").saveAsTable("news.articles"))
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## As a library\s+```python\n(.*?)```", text, re.S).group(1)
    scope = {"spark": spark}
    exec(compile(block, "README.md", "exec"), scope)  # noqa: S102 - the README's own example
    result = scope["result"]
    keepers = sorted(r["url"] for r in result.deduplicated.select("url").collect())
    print(json.dumps({"counts": dict(result.report["counts"]), "keepers": len(keepers), "keeper_ids": keepers}))
elif case == "serverless":
    from pyspark.sql.connect.conf import RuntimeConf
    from pyspark.sql.connect.dataframe import DataFrame

    from neardup_spark import Config, api

    def refuse(what):
        def refused(self, *args, **kwargs):
            raise RuntimeError(f"[NOT_SUPPORTED_WITH_SERVERLESS] {what} is not supported on serverless compute.")
        return refused

    for name in ("persist", "cache", "checkpoint", "localCheckpoint"):
        setattr(DataFrame, name, refuse(f"{name.upper()} TABLE"))
    allowed = {"spark.sql.shuffle.partitions", "spark.sql.session.timeZone", "spark.sql.ansi.enabled"}
    set_conf = RuntimeConf.set

    def set_allowed(self, key, value):
        if key not in allowed:
            raise RuntimeError(f"[CONFIG_NOT_AVAILABLE] Configuration {key} is not available.")
        return set_conf(self, key, value)

    RuntimeConf.set = set_allowed
    RuntimeConf.unset = lambda self, key: set_allowed(self, key, None)
    ship(spark)
    out, nights = Path(sys.argv[3]), sys.argv[4:6]
    try:
        deduplicate(spark.read.json(str(SAMPLE))).clusters.count()
        refusal = ""
    except Exception as exc:  # noqa: BLE001 - the refusal is the result
        refusal = str(exc)
    spark.sql("CREATE DATABASE IF NOT EXISTS scratch_ns")
    cfg = Config().with_overrides({"input.format": "jsonl", "cluster.scratch": "scratch_ns"})
    report = api.run(spark, cfg.with_overrides({"input.path": str(SAMPLE), "output.path": str(out / "run")}))
    index = str(out / "index")
    api.build_index(spark, cfg.with_overrides({"input.path": nights[0], "index.path": index}))
    api.run(spark, cfg.with_overrides({"input.path": nights[1], "index.path": index, "index.append": True,
                                       "output.path": str(out / "night1")}))
    api.export(spark, index, str(out / "export"))
    left = [r.tableName for r in spark.sql("SHOW TABLES IN scratch_ns").collect()]
    print(json.dumps({"refusal": refusal, "documents": report.counts["documents"], "left": left}))
spark.stop()
