"""Comparing what runs wrote: clusters as partitions of the documents with their keepers and
statuses (cluster ids differ between a nightly index and one full run: an index names a
cluster by its archived id), and tables as rows in a fixed order."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd


def partition(clusters: pd.DataFrame) -> list[list]:
    """The clusters as sorted lists of doc ids, whatever their cluster ids."""
    return sorted(sorted(ids) for ids in clusters.groupby("cluster_id").doc_id.apply(list))


def assert_same_clusters(got: pd.DataFrame, want: pd.DataFrame) -> None:
    """Each document once in both, the same groups, and each document's keeper and status the same."""
    assert got.doc_id.is_unique and want.doc_id.is_unique
    assert sorted(got.doc_id) == sorted(want.doc_id)
    assert partition(got) == partition(want)
    both = got.merge(want, on="doc_id", suffixes=("_got", "_want"))
    assert (both.keeper_id_got == both.keeper_id_want).all(), "a document's keeper differs"
    assert (both.status_got == both.status_want).all(), "a document's status differs"


def in_order(frame: pd.DataFrame, key: list[str] | None = None) -> pd.DataFrame:
    """frame's rows sorted by key (all its columns by default), numbered from 0: two tables
    with the same rows compare equal whatever order they were written in."""
    return frame.sort_values(key or list(frame.columns)).reset_index(drop=True)


# One full run per input and config in a test session: many tests compare their index with
# the same full run over the bundled sample, and each run is seconds of Spark work.
_FULL_RUNS: dict[str, Path] = {}


def full_run(spark, input_path, folder: Path, cfg) -> Path:
    """The output folder of one `api.run` with cfg over the JSON lines at input_path. Runs once
    per input (its bytes) and config (less its paths and output mode) in a test session; later
    calls get the first call's folder (`folder / "full"`), to read, never to write."""
    from neardup_spark import api
    from neardup_spark.config import to_dict

    settings = to_dict(cfg)
    settings["input"].pop("path", None)
    settings.pop("output", None)
    key = hashlib.sha256(Path(input_path).read_bytes()).hexdigest() + json.dumps(settings, sort_keys=True, default=str)
    if key not in _FULL_RUNS or not (_FULL_RUNS[key] / "report.json").exists():
        out = Path(folder) / "full"
        api.run(spark, cfg.with_overrides({"input.path": str(input_path), "input.format": "jsonl",
                                           "output.path": str(out), "output.mode": "overwrite"}))
        _FULL_RUNS[key] = out
    return _FULL_RUNS[key]


def assert_index_is_a_full_run(spark, index: str, rows: pd.DataFrame, folder: Path, cfg) -> pd.DataFrame:
    """The index's current clusters (its export) are those of one full run with `cfg` over
    rows (every document the index holds): groups, keepers and statuses. Returns the export."""
    from neardup_spark import api

    api.export(spark, index, str(folder / "after"))
    rows.to_json(folder / "rows.jsonl", orient="records", lines=True, date_format="iso")
    full = full_run(spark, folder / "rows.jsonl", folder, cfg)
    after = pd.read_parquet(folder / "after" / "clusters")
    assert_same_clusters(after, pd.read_parquet(full / "clusters"))
    return after
