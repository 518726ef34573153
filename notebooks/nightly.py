# Databricks notebook source
# %% [markdown]
# # Nightly batches against an archive index
#
# An archive is indexed once; every night the day's documents are checked
# against it and against each other, then appended. The archive is never
# re-sketched or re-clustered. Here: a generated corpus of 800 articles split
# into an archive and two days, as DataFrames (an `Archive` takes DataFrames;
# `neardup index build` and `neardup run --append` do the same from files).
# On Databricks, put the index on a mounted path (`/Volumes/...`, `/dbfs/...`):
# its manifest is switched by an atomic rename.

# COMMAND ----------
# %%
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from neardup_spark import Archive, deduplicate, generate, session

spark = session(master="local[2]", shuffle_partitions=4)  # Databricks' own session where there is one

work = Path(tempfile.mkdtemp(prefix="neardup-nightly-"))
rows = pd.read_parquet(generate(str(work / "corpus"), 800, seed=5, words=200))
day = np.random.default_rng(5).integers(0, 3, len(rows))  # 0: the archive, 1 and 2: two nights
for k in range(3):
    rows[day == k].to_parquet(work / f"day{k}.parquet", coerce_timestamps="us")
print({f"day{k}": int((day == k).sum()) for k in range(3)})

# COMMAND ----------
# %% [markdown]
# ## 1. Create the index from the archive (once)

# COMMAND ----------
# %%
def day(k):
    return spark.read.parquet(str(work / f"day{k}.parquet"))


archive = Archive.create(spark, str(work / "index"), day(0))
print(archive.report["index"], archive.report["counts"]["clusters"], "clusters")

# COMMAND ----------
# %% [markdown]
# ## 2. Append each night's batch
# A newcomer that matches an archived story joins its cluster, whose id is
# kept; `in_batch = False` rows are archived documents whose cluster, keeper
# or status changed. `append(df, output=...)` also writes the night's tables
# and report to a folder, as `neardup run --append` does.

# COMMAND ----------
# %%
for k in (1, 2):
    night = archive.append(day(k))
    c = night.report["counts"]
    print(f"night {k}: {c['new_documents']} new, {c['verified_pairs']} verified pairs, "
          f"{c['archived_clusters_touched']} archived clusters touched, {c['archived_documents_changed']} changed")
night.clusters.groupBy("in_batch", "status").count().orderBy("in_batch", "status").show()

# COMMAND ----------
# %% [markdown]
# ## 3. Appending a night again changes nothing
# The batch's fingerprint (ids and texts) is in the manifest: its stored
# tables are returned and the index stays at its version. A Structured
# Streaming micro-batch that Spark runs again after a failure is such a replay.

# COMMAND ----------
# %%
version = archive.version  # the index after night 2
again = archive.append(day(2))
assert again.report["replayed"] and archive.version == version
print("replayed; index version still", version)

# COMMAND ----------
# %% [markdown]
# ## 4. The archive's clusters equal one run over everything

# COMMAND ----------
# %%
everything = spark.createDataFrame(rows)
full = deduplicate(everything)


def partition(clusters):
    return sorted(sorted(ids) for ids in clusters.groupby("cluster_id").doc_id.apply(list))


same = partition(archive.clusters().toPandas()) == partition(full.clusters.toPandas())
full.unpersist()
print("same clusters as one full run:", same)
assert same
