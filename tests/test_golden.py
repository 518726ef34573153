"""Golden outputs: the clusters, keepers, statuses and pairs of fixed inputs, hashed.

They pin what the pipeline produces while its code moves: the bundled sample, a generated
10k corpus in MinHash, SimHash and containment modes and with boilerplate stripping, and a
three-night nightly sequence. A change of these hashes is a change of behaviour: make it on
purpose, then record the new hashes with NEARDUP_UPDATE_GOLDEN=1 and say why in the commit.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from neardup_spark import Config, api
from neardup_spark.tools import corpus, corpus_files
from neardup_spark.api import run

# Also run on CI's pyspark 3.5 leg, and with queries compiled as in production (see conftest).
pytestmark = [pytest.mark.compat, pytest.mark.usefixtures("codegen")]

GOLDEN = Path(__file__).parent / "golden" / "outputs.json"
UPDATE = os.environ.get("NEARDUP_UPDATE_GOLDEN") == "1"

MODES = {
    "minhash": {},
    "simhash": {"match.method": "simhash"},
    "containment": {"match.mode": "containment"},
    "boilerplate": {"boilerplate.enabled": True, "boilerplate.min_docs": 50},
}


def _digest(frame: pd.DataFrame, columns: list[str]) -> str:
    """Order-free hash of a table: rows sorted, floats rounded (the last bits are the platform's)."""
    out = frame[columns].copy()
    for col in out.columns:
        if out[col].dtype.kind == "f":
            out[col] = out[col].round(9)
    out = out.sort_values(columns, kind="mergesort").reset_index(drop=True)
    return hashlib.sha256(out.to_csv(index=False).encode()).hexdigest()[:16]


def _hashes(out: Path) -> dict[str, str]:
    clusters = pd.read_parquet(out / "clusters")
    pairs = pd.read_parquet(out / "pairs")
    got = {"clusters": _digest(clusters, ["doc_id", "cluster_id", "is_keeper", "keeper_id", "status"]),
           "pairs": _digest(pairs, ["doc_a", "doc_b", "jaccard", "containment_a", "containment_b", "match"])}
    if "in_batch" in clusters.columns:
        got["in_batch"] = _digest(clusters, ["doc_id", "in_batch"])
    if (out / "deduplicated").exists():
        got["deduplicated"] = _digest(pd.read_parquet(out / "deduplicated"), ["id"])
    return got


def _check(name: str, got: dict[str, str]) -> None:
    recorded = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if UPDATE:
        recorded[name] = got
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(recorded, indent=2, sort_keys=True) + "\n")
        return
    assert name in recorded, f"no golden outputs for {name}: record them with NEARDUP_UPDATE_GOLDEN=1"
    assert got == recorded[name], f"{name}: outputs changed (NEARDUP_UPDATE_GOLDEN=1 records them on purpose)"


def _cfg(**more) -> Config:
    return Config().with_overrides({"output.mode": "overwrite", **more})


@pytest.fixture(scope="module")
def corpus10k(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("golden") / "corpus"
    corpus_files.write(corpus.CorpusSpec(n_docs=10_000, seed=11, footer_share=0.3), path, "parquet")
    return str(path)


@pytest.mark.fast
def test_the_bundled_sample(spark, tmp_path):
    run(spark, _cfg(**{"input.path": str(api.SAMPLE), "input.format": "jsonl", "output.path": str(tmp_path)}))
    _check("sample", _hashes(tmp_path))


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_10k_corpus(spark, corpus10k, tmp_path, mode):
    run(spark, _cfg(**{"input.path": corpus10k, "output.path": str(tmp_path), **MODES[mode]}))
    _check(f"corpus10k-{mode}", _hashes(tmp_path))


def test_three_nights(spark, tmp_path):
    """Build from one third of the sample, append two nights (one re-sends archived documents),
    then export: every night's output and the final index are pinned."""
    rows = pd.read_json(api.SAMPLE, lines=True)
    night = np.random.default_rng(5).integers(0, 3, len(rows))
    paths = []
    for k in range(3):
        part = rows[night == k]
        if k == 2:  # re-sent archived documents beside the new ones
            part = pd.concat([part, rows[night == 0].head(40)])
        path = tmp_path / f"night{k}.jsonl"
        part.to_json(path, orient="records", lines=True, date_format="iso")
        paths.append(str(path))
    index = str(tmp_path / "index")
    common = {"input.format": "jsonl", "keeper.rules": ["longest"]}
    api.build_index(spark, _cfg(**common, **{"input.path": paths[0], "index.path": index}), output=str(tmp_path / "n0"))
    got = {"night0": _hashes(tmp_path / "n0")}
    for k in (1, 2):
        run(spark, _cfg(**common, **{"input.path": paths[k], "index.path": index, "index.append": True,
                                     "output.path": str(tmp_path / f"n{k}")}))
        got[f"night{k}"] = _hashes(tmp_path / f"n{k}")
    api.export(spark, index, str(tmp_path / "export"))
    exported = pd.read_parquet(tmp_path / "export" / "clusters")
    got["index"] = {"clusters": _digest(exported, ["doc_id", "cluster_id", "is_keeper", "keeper_id", "status"])}
    _check("three-nights", got)
