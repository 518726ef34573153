"""Client-side checks against a real Spark Connect server (sys.argv[1], sc://...).

    connect_client.py URL unshipped   # the library without addArtifacts: must fail on the server
    connect_client.py URL readme      # the README's library example, as written, on a shipped session

Prints one JSON object."""

import json
import re
import sys
from pathlib import Path

from pyspark.sql import SparkSession

url, case = sys.argv[1], sys.argv[2]
spark = SparkSession.builder.remote(url).config("spark.sql.shuffle.partitions", "4").getOrCreate()
ROOT = Path(__file__).resolve().parents[2]

from neardup_spark import deduplicate  # noqa: E402
from neardup_spark.api import SAMPLE  # noqa: E402
from neardup_spark.runtime.shipping import package_zip  # noqa: E402

if case == "unshipped":
    try:
        deduplicate(spark.read.json(str(SAMPLE)), id_col="id", text_col="text").clusters.count()
    except Exception as exc:  # noqa: BLE001 - the server's error is the result
        text = str(exc)
        print(json.dumps({"failed": True, "no_package": "No module named 'neardup_spark'" in text,
                          "one_line": "\n" not in text and "spark.addArtifacts(" in text, "error": text[:2000]}))
    else:
        print(json.dumps({"failed": False}))
elif case == "readme":
    spark.addArtifacts(package_zip(), pyfile=True)  # what docs/deploying.md says a notebook does
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
spark.stop()
