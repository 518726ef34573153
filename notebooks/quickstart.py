# Databricks notebook source
# %% [markdown]
# # neardup-spark quickstart
#
# Deduplicate the bundled 1,000-article sample: 62 stories, each published
# with seven kinds of edit, plus unrelated articles (some sharing a footer).
# Runs on Databricks (where `spark` exists) and in Jupyter/local mode.

# COMMAND ----------
# %%
from neardup_spark import SAMPLE, Config, deduplicate, params_text, progress, session

spark = session(master="local[2]", shuffle_partitions=4)  # Databricks' own session where there is one

# COMMAND ----------
# %% [markdown]
# ## 1. Look at the parameters before trusting them
# The S-curve shows how likely a pair of each Jaccard is to become a candidate.

# COMMAND ----------
# %%
cfg = Config().with_overrides(
    {
        "input.metadata_cols": ["source", "published_at", "group", "edit"],
        "verify.threshold": 0.3,
        "keeper.rules": ["earliest"],
    }
)
print(params_text(cfg, step=0.1))

# COMMAND ----------
# %% [markdown]
# ## 2. Deduplicate

# COMMAND ----------
# %%
articles = spark.read.json(str(SAMPLE))
with progress():  # a line per stage while it runs
    result = deduplicate(articles, cfg)
print(result.report)  # the summary; result.report["counts"] holds the figures
result.clusters.groupBy("status").count().orderBy("status").show()

# COMMAND ----------
# %% [markdown]
# ## 3. One story and its copies
# Every copy points at the keeper (the earliest published); the verified pairs
# say how similar each copy is.

# COMMAND ----------
# %%
from pyspark.sql import functions as F  # noqa: E402

biggest = result.clusters.groupBy("cluster_id").count().orderBy(F.desc("count"), "cluster_id").first()["cluster_id"]
story = result.clusters.where(F.col("cluster_id") == biggest).join(
    articles.select(F.col("id").alias("doc_id"), "edit", "source", "published_at"), "doc_id"
)
story.orderBy("published_at").show(truncate=False)
result.pairs.where(F.col("doc_a") == biggest).orderBy(F.desc("jaccard")).show()

# COMMAND ----------
# %%
kept = result.deduplicated.count()
assert kept == result.report["counts"]["clusters"]
print(f"{articles.count()} articles -> {kept} kept")
result.unpersist()

# COMMAND ----------
# %% [markdown]
# ## 4. Review what was merged
# A run written to a directory can be reviewed: `inspect` shows a cluster's
# members against its keeper word by word, and `review_page` is one
# self-contained HTML page (S-curve, Jaccard histograms, cluster sizes,
# sampled pairs side by side). On Databricks, `displayHTML` shows it inline.

# COMMAND ----------
# %%
import tempfile  # noqa: E402

from neardup_spark import cluster_text, inspect, review_page, run  # noqa: E402

out = tempfile.mkdtemp(prefix="neardup-quickstart-")
run(spark, cfg.with_overrides({"input.path": str(SAMPLE), "input.format": "jsonl", "output.path": out,
                               "output.mode": "overwrite"}))
print(cluster_text(inspect(spark, out, cluster=biggest, max_members=3)))
page = review_page(spark, out)
if "displayHTML" in globals():  # Databricks
    displayHTML(page)  # noqa: F821
else:
    print(f"review page: {len(page) / 1024:.0f} KiB of HTML")
