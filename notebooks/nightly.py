# Databricks notebook source
# %% [markdown]
# # Nightly batches against an archive index
#
# An archive is indexed once; every night the day's documents are checked
# against it and against each other, then appended. The archive is never
# re-sketched or re-clustered. Here: a generated corpus of 800 articles split
# into an archive and two days. On Databricks, put the index on a mounted path
# (`/dbfs/...`): its manifest is switched by an atomic rename.

# COMMAND ----------
# %%
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from neardup_spark import Config, build_index, export, generate, run, session

spark = session(master="local[2]", shuffle_partitions=4)  # Databricks' own session where there is one

work = Path(tempfile.mkdtemp(prefix="neardup-nightly-"))
rows = pd.read_parquet(generate(str(work / "corpus"), 800, seed=5, words=200))
day = np.random.default_rng(5).integers(0, 3, len(rows))  # 0: the archive, 1 and 2: two nights
for k in range(3):
    rows[day == k].to_parquet(work / f"day{k}.parquet", coerce_timestamps="us")
print({f"day{k}": int((day == k).sum()) for k in range(3)})

# COMMAND ----------
# %% [markdown]
# ## 1. Build the index from the archive (once)

# COMMAND ----------
# %%
cfg = Config().with_overrides(
    {"input.path": str(work / "day0.parquet"), "index.path": str(work / "index"), "output.mode": "overwrite"}
)
built = build_index(spark, cfg)
print(built["index"], built["counts"]["clusters"], "clusters")

# COMMAND ----------
# %% [markdown]
# ## 2. Append each night's batch
# A newcomer that matches an archived story joins its cluster, whose id is
# kept; `in_batch = False` rows are archived documents whose cluster, keeper
# or status changed.

# COMMAND ----------
# %%
for k in (1, 2):
    night = cfg.with_overrides(
        {"input.path": str(work / f"day{k}.parquet"), "output.path": str(work / f"out{k}"), "index.append": True}
    )
    report = run(spark, night)
    c = report["counts"]
    print(f"night {k}: {c['new_documents']} new, {c['verified_pairs']} verified pairs, "
          f"{c['archived_clusters_touched']} archived clusters touched, {c['archived_documents_changed']} changed")
out = spark.read.parquet(str(work / "out2" / "clusters"))
out.groupBy("in_batch", "status").count().orderBy("in_batch", "status").show()

# COMMAND ----------
# %% [markdown]
# ## 3. Re-running a night changes nothing
# The batch's fingerprint (ids and texts) is in the manifest: its stored
# output is written again and the index stays at its version.

# COMMAND ----------
# %%
version = report["index"]["version"]  # the index after night 2
again = run(spark, cfg.with_overrides(
    {"input.path": str(work / "day2.parquet"), "output.path": str(work / "again2"), "index.append": True}
))
assert again["replayed"] and again["index"]["version"] == version
print("replayed; index version still", version)

# COMMAND ----------
# %% [markdown]
# ## 4. The archive's clusters equal one full run over everything

# COMMAND ----------
# %%
export(spark, str(work / "index"), str(work / "export"))
rows.to_parquet(work / "all.parquet", coerce_timestamps="us")
run(spark, Config().with_overrides(
    {"input.path": str(work / "all.parquet"), "output.path": str(work / "full"), "output.mode": "overwrite"}
))


def partition(path):
    clusters = pd.read_parquet(path)
    return sorted(sorted(ids) for ids in clusters.groupby("cluster_id").doc_id.apply(list))


same = partition(work / "export" / "clusters") == partition(work / "full" / "clusters")
print("same clusters as one full run:", same)
assert same
