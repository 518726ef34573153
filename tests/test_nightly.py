"""Nightly batches against an archive index: equivalence with one full run, idempotent
re-runs, refused collisions and parameter changes, and an index that survives a killed run."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from neardup_spark import Config, cli
from neardup_spark import api
from neardup_spark.errors import InputError, NeardupError
from neardup_spark.archive.index import IndexError_, open_index
from neardup_spark.api import run
from neardup_spark.stages.write import copy_tables

from . import frames, oracles

ROOT = Path(__file__).resolve().parents[1]
SPARK = ["--master", "local[2]", "--shuffle-partitions", "2"]


def _near_pairs(frames, rows) -> set:
    """Near pairs, each end named by the smallest id of its exact-copy class (which copy
    of a text carries a pair depends on the order documents arrived in)."""
    pairs = pd.concat(frames)
    pairs = pairs[pairs["match"] == "near"]
    canon = oracles.exact_groups(rows.to_dict("records"))
    return {tuple(sorted((canon[a], canon[b]))) for a, b in zip(pairs.doc_a, pairs.doc_b)}


@pytest.fixture(scope="module")
def batches(tmp_path_factory):
    """The bundled sample split at random into an archive and two daily batches."""
    work = tmp_path_factory.mktemp("nightly")
    rows = pd.read_json(api.SAMPLE, lines=True)
    return work, rows, oracles.split_into_nights(rows, work, seed=1)


@pytest.fixture(scope="module")
def archived(spark, batches):
    """Batch 0 built into an index once per way of naming it (a path, or a file:// URI: an index
    built at a URI keeps another layout); a test that starts from it takes a copy (_copy_of)."""
    work, rows, paths = batches
    built = {}

    def at(where: str) -> Path:
        if where not in built:
            built[where] = work / f"archived-{where}"
            api.build_index(spark, _cfg(**{"input.path": paths[0], "index.path": _at(built[where], where)}))
        return built[where]
    return at


def _copy_of(archived, to: Path, where: str = "path") -> str:
    """A copy of the archived index (see `archived`) at `to`, named as `where` says (see _at)."""
    shutil.copytree(archived(where), to)
    return _at(to, where)


def _cfg(**more) -> Config:
    base = {"input.format": "jsonl", "output.mode": "overwrite"}
    return Config().with_overrides({**base, **more})


@pytest.fixture(scope="module")
def appended(spark, batches):
    """Build from batch 0, append batches 1 and 2 (library calls), export the index."""
    work, rows, paths = batches
    index = str(work / "index")
    build = api.build_index(spark, _cfg(**{"input.path": paths[0], "index.path": index}), output=str(work / "built"))
    reports = [build]
    for k in (1, 2):
        cfg = _cfg(**{"input.path": paths[k], "index.path": index, "index.append": True,
                      "output.path": str(work / f"out{k}")})
        reports.append(run(spark, cfg))
    api.export(spark, index, str(work / "export"))
    full = frames.full_run(spark, api.SAMPLE, work, _cfg())
    return work, rows, index, reports, full


@pytest.mark.compat
def test_batches_give_the_clusters_of_one_full_run(appended):
    work, rows, index, reports, full = appended
    exported = pd.read_parquet(work / "export" / "clusters")
    whole = pd.read_parquet(full / "clusters")
    assert sorted(exported.doc_id) == sorted(rows.id)  # every document, once
    frames.assert_same_clusters(exported, whole)  # same rule, same keepers
    nights = [pd.read_parquet(work / name / "pairs") for name in ("built", "out1", "out2")]
    assert _near_pairs(nights, rows) == _near_pairs([pd.read_parquet(full / "pairs")], rows)
    assert open_index(index).manifest["version"] == 3 and open_index(index).manifest["documents"] == len(rows)
    # A newcomer that matches an archived story joins its cluster and keeps the cluster's id.
    out1 = pd.read_parquet(work / "out1" / "clusters")
    built = pd.read_parquet(work / "built" / "clusters").set_index("doc_id")["cluster_id"]
    joined = out1[out1.in_batch & out1.cluster_id.isin(set(built))]
    assert len(joined) > 0 and reports[1]["counts"]["archived_clusters_touched"] > 0


def test_the_distributed_batch_graph_gives_the_driver_s_clusters(spark, batches, appended, monkeypatch):
    # cluster.driver_max_edges = 0 sends the batch graph through the backend instead of
    # numpy on the driver, and BROADCAST_BAND_ROWS = 0 joins the batch's band rows to the
    # archive's by a shuffle (a batch too large to broadcast): the same assignments,
    # keepers included, and the same counts.
    from neardup_spark.archive import append as appending

    monkeypatch.setattr(appending, "BROADCAST_BAND_ROWS", 0)
    work, rows, paths = batches
    _, _, _, reports, _ = appended
    index = str(work / "index-spark-graph")
    spread = {"cluster.driver_max_edges": 0, "index.band_probe": "join"}  # the band rows joined by Spark
    api.build_index(spark, _cfg(**spread, **{"input.path": paths[0], "index.path": index}))
    mine = []
    for k in (1, 2):
        mine.append(run(spark, _cfg(**spread, **{"input.path": paths[k], "index.path": index, "index.append": True,
                                                 "output.path": str(work / f"gout{k}")})))
        assert not mine[-1]["work"].get("components_on_driver")
        assert "band_probe_scans" not in mine[-1]["work"]
    assert all(r["work"]["components_on_driver"] == 1 and r["work"]["band_probe_scans"] for r in reports[1:])
    for k, got in zip((1, 2), mine):
        assert got["counts"] == reports[k]["counts"]
        cols = ["doc_id", "cluster_id", "is_keeper", "keeper_id", "status", "in_batch"]
        ours = pd.read_parquet(work / f"gout{k}" / "clusters")[cols].sort_values("doc_id", ignore_index=True)
        theirs = pd.read_parquet(work / f"out{k}" / "clusters")[cols].sort_values("doc_id", ignore_index=True)
        pd.testing.assert_frame_equal(ours, theirs)


def test_range_groups_cover_every_range_once():
    from neardup_spark.archive import index as ix

    for archive_rows, batch_rows in [(0, 10**9), (10**12, 1), (10**12, 3 * 10**6), (10**12, 8_400_000), (10**12, 10**9)]:
        groups = ix.range_groups(archive_rows, batch_rows)
        assert sorted(r for g in groups for r in g) == list(range(ix.RANGES))
        assert all(len(g) == len(groups[0]) for g in groups)
    assert len(ix.range_groups(ix.RANGED_BAND_ROWS - 1, 10**9)) == 1  # a small archive: one table
    assert len(ix.range_groups(ix.RANGED_BAND_ROWS, 3 * ix.PROBE_TABLE_ROWS)) == 4
    assert len(ix.range_groups(ix.RANGED_BAND_ROWS, 10**9)) == ix.RANGES


@pytest.mark.compat
def test_an_index_s_band_rows_by_range_are_all_its_band_rows(spark, appended):
    # Each range's rows come from its own files (pruned by the directory column), and the
    # ranges together give every live band row once.
    from pyspark.sql import functions as F
    from neardup_spark.archive import index as ix

    _, _, index, _, _ = appended
    idx = open_index(index, spark)
    every = idx.bands(spark).toPandas().sort_values(["bucket", "doc_id"], ignore_index=True)
    parts = []
    for r in range(ix.RANGES):
        rows = idx.bands(spark, (r,))
        assert "PartitionFilters: [isnotnull(bucket_range" in rows._jdf.queryExecution().executedPlan().toString()
        got = rows.withColumn("_r", ix.bucket_range(F.col("bucket"))).toPandas()
        assert (got["_r"] == r).all()
        parts.append(got.drop(columns="_r"))
    ranged = pd.concat(parts).sort_values(["bucket", "doc_id"], ignore_index=True)
    assert len(every) > 0 and ranged["bucket"].map(lambda b: (b >> 60) & 15).nunique() == ix.RANGES
    pd.testing.assert_frame_equal(ranged, every)


@pytest.mark.compat
def test_band_rows_probed_by_range_give_the_same_night(spark, batches, archived, appended, monkeypatch):
    # An archive treated as large (RANGED_BAND_ROWS = 0) with one-row probe tables is probed
    # in sixteen groups of ranges: the same joined rows (each archived key met once, in its
    # range's table), and the same candidates, pairs and assignments as one table.
    from neardup_spark.archive import index as ix
    from neardup_spark.archive import append as appending, scan
    from neardup_spark.runtime.runner import Runner

    monkeypatch.setattr(ix, "RANGED_BAND_ROWS", 0)
    monkeypatch.setattr(ix, "PROBE_TABLE_ROWS", 1)
    monkeypatch.setattr(scan, "range_files", lambda idx: None)  # Spark's join, as for a Hadoop store
    work, rows, paths = batches
    _, _, built, reports, _ = appended
    idx = open_index(built, spark)
    side = appending.ArchiveSide(spark, idx, Runner(spark), 0, 42)
    # The archive's own band rows as a batch: every key of every range is met.
    own = idx.bands(spark).selectExpr("bucket", "doc_id AS _nid")
    groups = ix.range_groups(side.archive_band_rows, own.count())
    assert len(groups) == ix.RANGES
    one = side._probe(own, None).toPandas()
    ranged = pd.concat([side._probe(own, g).toPandas() for g in groups])
    key = ["bucket", "_adoc", "_nid"]
    assert len(one) > 0
    pd.testing.assert_frame_equal(ranged[key].sort_values(key, ignore_index=True),
                                  one[key].sort_values(key, ignore_index=True))
    index = _copy_of(archived, work / "index-ranged")
    for k in (1, 2):
        got = run(spark, _cfg(**{"input.path": paths[k], "index.path": index, "index.append": True,
                                 "output.path": str(work / f"rout{k}")}))
        assert got["work"]["band_probe_tables"] == ix.RANGES
        assert reports[k]["work"]["band_probe_scans"] == ix.RANGES and not reports[k]["work"]["band_probe_tables"]
        assert got["counts"] == reports[k]["counts"]
        for table, key in (("clusters", ["doc_id"]), ("pairs", ["doc_a", "doc_b"])):
            ours = pd.read_parquet(work / f"rout{k}" / table).sort_values(key, ignore_index=True)
            theirs = pd.read_parquet(work / f"out{k}" / table).sort_values(key, ignore_index=True)
            pd.testing.assert_frame_equal(ours, theirs)


@pytest.mark.compat
def test_probe_matches_give_every_equal_key_once():
    # Against brute force: keys repeated on both sides, negative keys, keys sharing low bits.
    from neardup_spark.kernels.probe import key_set, matches

    rng = np.random.default_rng(7)
    for size in (0, 1, 50, 5000):
        keys = rng.integers(-2**63, 2**63 - 1, size, dtype=np.int64)
        keys = np.concatenate([keys, keys[: size // 5], keys[: size // 7] ^ (1 << 40)])  # repeats, twins
        values = rng.permutation(keys.size).astype(np.int64)
        column = np.concatenate([keys[: size // 2], rng.integers(-2**63, 2**63 - 1, 20000, dtype=np.int64),
                                 keys[: size // 9]])
        column = rng.permutation(column)
        ks = key_set(keys, values)
        rows, at = matches(ks, column)
        got = sorted(zip(rows.tolist(), ks.values[at].tolist()))
        of: dict = {}
        for k, v in zip(keys.tolist(), values.tolist()):
            of.setdefault(k, []).append(v)
        want = sorted((i, v) for i, c in enumerate(column.tolist()) for v in of.get(c, []))
        assert got == want and (ks.keys[at] == column[rows]).all()
        assert (np.diff(rows) >= 0).all()


@pytest.mark.compat
def test_band_rows_read_from_the_files_are_spark_s_join(spark, batches, appended):
    # The scan of a local index's band files (`archive.scan`) against Spark's join of the same
    # rows: every archived row with a batch key, once per batch row of that key.
    from neardup_spark.archive import index as ix
    from neardup_spark.archive import append as appending, scan
    from neardup_spark.runtime.runner import Runner

    _, _, built, _, _ = appended
    idx = open_index(built, spark)
    files = scan.range_files(idx)
    assert sorted(files) == list(range(ix.RANGES)) and len(idx.parts) == 3
    assert {p for fs in files.values() for _, p in fs} == {0, 1, 2}
    own = idx.bands(spark).selectExpr("bucket", "doc_id AS _nid")
    # Each key twice in the batch (two rows with it), and keys no archived row has.
    batch = own.unionByName(own.selectExpr("bucket", "_nid + 1000000 AS _nid")).unionByName(
        spark.range(500).selectExpr("id * 7919 AS bucket", "-id AS _nid"))
    id_type = idx.docs(spark).schema["doc_id"].dataType
    got = idx.live(spark, scan.hits(spark, idx, batch, files, id_type), "_adoc").drop(ix.PART).toPandas()
    side = appending.ArchiveSide(spark, idx, Runner(spark), 0, 42)
    want = side._probe(batch, None).toPandas()
    key = ["bucket", "_adoc", "_nid"]
    assert len(want) > 2 * own.count() - 1
    pd.testing.assert_frame_equal(got[key].sort_values(key, ignore_index=True),
                                  want[key].sort_values(key, ignore_index=True))


def test_string_ids_batches_give_the_clusters_of_one_full_run(spark, tmp_path):
    # String ids through the scan of the band files (`archive.scan`).
    rows = pd.read_json(api.SAMPLE, lines=True)
    rows["id"] = "s-" + rows["id"].astype(str)
    paths = oracles.split_into_nights(rows, tmp_path, seed=3)
    index = str(tmp_path / "index")
    api.build_index(spark, _cfg(**{"input.path": paths[0], "index.path": index}))
    for k in (1, 2):
        got = run(spark, _cfg(**{"input.path": paths[k], "index.path": index, "index.append": True,
                                 "output.path": str(tmp_path / f"out{k}")}))
        assert got["work"]["band_probe_scans"] > 0 and got["counts"]["archived_documents_met"] > 0
    api.export(spark, index, str(tmp_path / "export"))
    full_path = tmp_path / "all.jsonl"
    rows.to_json(full_path, orient="records", lines=True, date_format="iso")
    run(spark, _cfg(**{"input.path": str(full_path), "output.path": str(tmp_path / "full")}))
    exported = pd.read_parquet(tmp_path / "export" / "clusters")
    whole = pd.read_parquet(tmp_path / "full" / "clusters")
    assert sorted(exported.doc_id) == sorted(rows.id)
    assert frames.partition(exported) == frames.partition(whole)


def test_simhash_128_batches_give_the_clusters_of_one_full_run(spark, batches):
    # The index keeps both fingerprint words; appends check them against the archive's.
    work, rows, paths = batches
    sim = {"match.method": "simhash", "simhash.bits": 128, "simhash.hamming_distance": 9,
           "simhash.weighting": "tf"}
    index = str(work / "index-simhash")
    api.build_index(spark, _cfg(**sim, **{"input.path": paths[0], "index.path": index}), output=str(work / "sb"))
    for k in (1, 2):
        run(spark, _cfg(**sim, **{"input.path": paths[k], "index.path": index, "index.append": True,
                                  "output.path": str(work / f"sout{k}")}))
    api.export(spark, index, str(work / "sexport"))
    full = run(spark, _cfg(**sim, **{"input.path": str(api.SAMPLE), "output.path": str(work / "sfull")}))
    assert full["counts"]["verified_pairs"] > 100
    exported = pd.read_parquet(work / "sexport" / "clusters")
    assert frames.partition(exported) == frames.partition(pd.read_parquet(work / "sfull" / "clusters"))
    with pytest.raises(IndexError_, match="simhash.bits"):
        run(spark, _cfg(**{**sim, "simhash.bits": 64}, **{"input.path": paths[1], "index.path": index,
                                                          "index.append": True, "output.path": str(work / "sbad")}))


@pytest.mark.compat
def test_rerunning_a_batch_changes_nothing_and_repeats_its_output(spark, appended, monkeypatch):
    work, rows, index, reports, full = appended
    before = open_index(index).manifest
    cfg = _cfg(**{"input.path": str(work / "batch1.jsonl"), "index.path": index, "index.append": True,
                  "output.path": str(work / "again1")})
    report = run(spark, cfg)
    assert report["replayed"] and open_index(index).manifest == before
    # Without a JVM at hand (Spark Connect) the stored output is read and written by Spark instead.
    from neardup_spark.runtime import paths

    monkeypatch.setattr(paths, "hadoop", lambda spark: None)
    assert run(spark, cfg.with_overrides({"output.path": str(work / "again1-spark")}))["replayed"]
    for name in ("clusters", "pairs"):
        first = pd.read_parquet(work / "out1" / name)
        for again in ("again1", "again1-spark"):
            assert frames.in_order(first).equals(frames.in_order(pd.read_parquet(work / again / name)))


@pytest.mark.compat
def test_copied_tables_read_back_the_same_and_respect_the_output_mode(spark, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    rows = spark.range(0, 1000, 1, 3).selectExpr("id", "cast(id * 7 as string) as name")
    rows.write.parquet(str(src / "t"))
    assert copy_tables(spark, str(src), f"file://{dst}", ["t"], "errorifexists")
    assert (dst / "t" / "_SUCCESS").exists()
    assert sorted(spark.read.parquet(str(dst / "t")).collect()) == sorted(rows.collect())
    with pytest.raises(NeardupError, match="already exists"):
        copy_tables(spark, str(src), str(dst), ["t"], "errorifexists")
    spark.range(5).write.mode("overwrite").parquet(str(src / "t"))
    assert copy_tables(spark, str(src), str(dst), ["t"], "overwrite")
    assert sorted(r.id for r in spark.read.parquet(str(dst / "t")).collect()) == [0, 1, 2, 3, 4]


@pytest.mark.compat
def test_a_batch_of_known_documents_inserts_nothing(spark, appended):
    work, rows, index, reports, full = appended
    before = open_index(index).manifest["documents"]
    mixed = pd.concat([pd.read_json(work / "batch1.jsonl", lines=True).head(20)])
    path = work / "known.jsonl"
    mixed.to_json(path, orient="records", lines=True, date_format="iso")
    report = run(spark, _cfg(**{"input.path": str(path), "index.path": index, "index.append": True,
                                "output.path": str(work / "known")}))
    assert report["counts"]["already_indexed"] == 20 and report["counts"]["new_documents"] == 0
    assert open_index(index).manifest["documents"] == before
    out = pd.read_parquet(work / "known" / "clusters")
    exported = pd.read_parquet(work / "export" / "clusters").set_index("doc_id")
    assert sorted(out.doc_id) == sorted(mixed.id)
    assert (out.set_index("doc_id").cluster_id == exported.cluster_id.reindex(out.doc_id)).all()


def test_a_batch_that_adds_no_band_rows_leaves_an_index_the_next_batch_reads(spark, batches, archived, tmp_path):
    # Exact copies of archived texts under new ids: every newcomer matches exactly, so the
    # part's band table gets no rows (a partitioned write leaves only _SUCCESS).
    work, rows, paths = batches
    index = _copy_of(archived, tmp_path / "index")
    copies = pd.read_json(paths[0], lines=True).head(5)
    copies = copies.assign(id=[10**9 + i for i in range(len(copies))])
    path = tmp_path / "copies.jsonl"
    copies.to_json(path, orient="records", lines=True, date_format="iso")
    first = run(spark, _cfg(**{"input.path": str(path), "index.path": index, "index.append": True,
                               "output.path": str(tmp_path / "out-copies")}))
    c = first["counts"]
    assert c["new_documents"] == 5 and c["exact_archive_matches"] + c["exact_duplicates"] + c["empty"] == 5
    part = open_index(index).parts[-1]
    assert not list((Path(index) / "parts" / part / "bands").rglob("*.parquet"))
    second = run(spark, _cfg(**{"input.path": paths[1], "index.path": index, "index.append": True,
                                "output.path": str(tmp_path / "out-next")}))
    assert second["counts"]["new_documents"] == len(pd.read_json(paths[1], lines=True))
    assert open_index(index).manifest["version"] == 3


@pytest.mark.compat
def test_changed_text_under_an_archived_id_is_refused(spark, appended):
    work, rows, index, reports, full = appended
    before = open_index(index).manifest
    changed = pd.read_json(work / "batch0.jsonl", lines=True).head(2).assign(text="a different text entirely")
    path = work / "changed.jsonl"
    changed.to_json(path, orient="records", lines=True, date_format="iso")
    cfg = _cfg(**{"input.path": str(path), "index.path": index, "index.append": True,
                  "output.path": str(work / "changed")})
    with pytest.raises(InputError, match="different text"):
        run(spark, cfg)
    assert open_index(index).manifest == before


def test_other_parameters_are_refused(spark, appended):
    work, rows, index, reports, full = appended
    cfg = _cfg(**{"input.path": str(work / "batch1.jsonl"), "index.path": index, "index.append": True,
                  "output.path": str(work / "params"), "verify.threshold": 0.5})
    with pytest.raises(IndexError_, match="verify.threshold"):
        run(spark, cfg)


def test_sticky_keeper_keeps_the_archived_keeper(spark, tmp_path):
    archive = pd.DataFrame({"id": [1, 2], "text": ["the quick brown fox jumps over the lazy dog " * 8, "unrelated"]})
    batch = pd.DataFrame({"id": [3], "text": ["the quick brown fox jumps over the lazy dog " * 8 + "and more words"]})
    for name, frame in (("a", archive), ("b", batch)):
        frame.to_json(tmp_path / f"{name}.jsonl", orient="records", lines=True)
    keepers = {}
    for sticky in (False, True):
        index = str(tmp_path / f"index{sticky}")
        common = {"keeper.rules": ["longest"], "index.path": index}
        api.build_index(spark, _cfg(**{"input.path": str(tmp_path / "a.jsonl"), **common}))
        run(spark, _cfg(**{"input.path": str(tmp_path / "b.jsonl"), "index.append": True, "index.sticky_keeper": sticky,
                           "output.path": str(tmp_path / f"out{sticky}"), **common}))
        out = pd.read_parquet(tmp_path / f"out{sticky}" / "clusters").set_index("doc_id")
        keepers[sticky] = out
    # Not sticky: the longer newcomer takes over, and the archived keeper's change is reported.
    assert keepers[False].loc[3, "is_keeper"] and keepers[False].loc[1, "status"] == "duplicate"
    assert not keepers[False].loc[1, "in_batch"] and keepers[False].loc[3, "cluster_id"] == 1
    # Sticky: the archived document stays keeper (its status moves from unique to keeper).
    assert keepers[True].loc[3, "keeper_id"] == 1 and keepers[True].loc[1, "status"] == "keeper"
    assert sorted(keepers[True].index) == [1, 3]


def _cli(args: list[str], kill_at: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    if kill_at:
        env["NEARDUP_KILL_AT"] = kill_at
    return subprocess.run([sys.executable, "-m", "neardup_spark.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def _at(path: Path, where: str) -> str:
    """path as a plain local path, or as a file:// URI (the Hadoop FileSystem code path hdfs:// takes)."""
    return f"file://{path}" if where == "uri" else str(path)


@pytest.mark.parametrize("stage,where", [("after_match", "path"), ("before_manifest", "uri")])
@pytest.mark.process
def test_a_run_killed_between_stages_leaves_a_readable_index(spark, batches, archived, tmp_path, stage, where):
    work, rows, paths = batches
    index = _copy_of(archived, tmp_path / "index", where)
    before = open_index(index).manifest
    killed = _cli(["run", "--input", paths[1], "--format", "jsonl", "--index", index, "--append",
                   "--output", str(tmp_path / "killed"), "--quiet", *SPARK], kill_at=stage)
    assert killed.returncode == 137, killed.stderr[-2000:]
    assert open_index(index).manifest == before  # the old version, untouched
    # The next run reads it without repair, and lands the batch as if nothing had happened.
    report = run(spark, _cfg(**{"input.path": paths[1], "index.path": index, "index.append": True,
                                "output.path": str(tmp_path / "out")}))
    assert not report["replayed"] and report["index"]["version"] == before["version"] + 1
    api.export(spark, index, str(tmp_path / "export"))
    exported = pd.read_parquet(tmp_path / "export" / "clusters")
    assert sorted(exported.doc_id) == sorted(pd.concat([pd.read_json(p, lines=True) for p in paths[:2]]).id)


def test_cli_index_build_and_export(spark, batches, tmp_path, capsys):
    work, rows, paths = batches
    index = str(tmp_path / "index")
    assert cli.main(["index", "build", "--input", paths[0], "--format", "jsonl", "--index", index, "--json",
                     *SPARK]) == 0
    assert json.loads(capsys.readouterr().out)["index"]["version"] == 1
    assert cli.main(["index", "build", "--input", paths[0], "--format", "jsonl", "--index", index, *SPARK]) == 2
    assert "already exists" in capsys.readouterr().err
    assert cli.main(["index", "export", "--index", index, "--output", str(tmp_path / "exp"), *SPARK]) == 0
    exported = pd.read_parquet(tmp_path / "exp" / "clusters")
    assert list(exported.columns) == ["doc_id", "cluster_id", "is_keeper", "keeper_id", "status"]
    assert len(exported) == len(pd.read_json(paths[0], lines=True))
    assert cli.main(["run", "--input", paths[1], "--format", "jsonl", "--append", "--output", str(tmp_path / "o"),
                     *SPARK]) == 2
    assert "index.path" in capsys.readouterr().err
    assert cli.main(["index", "export", "--index", str(tmp_path / "none"), "--output", str(tmp_path / "e2"),
                     *SPARK]) == 2
    assert "no index" in capsys.readouterr().err


def test_replace_reclusters_without_the_old_text(spark, batches, archived, tmp_path):
    work, rows, paths = batches
    index = _copy_of(archived, tmp_path / "index")
    api.export(spark, index, str(tmp_path / "before"))
    before = pd.read_parquet(tmp_path / "before" / "clusters")
    archive = pd.read_json(paths[0], lines=True)
    keeper = int(before[before.status == "keeper"].doc_id.min())  # keeps a story's cluster: it will change
    unique = int(before[before.status == "unique"].doc_id.min())
    new_text = archive.set_index("id").loc[unique, "text"]
    path = tmp_path / "replace.jsonl"
    archive[archive.id == keeper].assign(text=new_text).to_json(path, orient="records", lines=True, date_format="iso")
    common = {"input.path": str(path), "index.path": index, "index.append": True, "output.path": str(tmp_path / "out")}
    with pytest.raises(InputError, match="--replace"):
        run(spark, _cfg(**common))
    report = run(spark, _cfg(**common, **{"index.replace": True}))
    assert report["counts"]["replaced"] == 1 and open_index(index).manifest["documents"] == len(archive)
    out = pd.read_parquet(tmp_path / "out" / "clusters").set_index("doc_id")
    assert out.loc[keeper, "in_batch"] and out.loc[keeper, "cluster_id"] == unique  # the existing id is kept
    old_members = before[before.cluster_id == before.set_index("doc_id").loc[keeper, "cluster_id"]].doc_id
    assert set(out[~out.in_batch].index) <= {*old_members, unique} and (~out.in_batch).any()  # new keepers
    # The index now clusters exactly as one full run over the archive with the new text.
    edited = archive.assign(text=np.where(archive.id == keeper, new_text, archive.text))
    frames.assert_index_is_a_full_run(spark, index, edited, tmp_path, _cfg())


def test_parameters_an_older_index_does_not_record_count_as_their_defaults():
    from neardup_spark.archive.index import check_params, params_of
    from neardup_spark.plan import resolve

    cfg = Config()
    old = params_of(resolve(cfg))
    del old["match"]
    del old["simhash"]["bits"]
    check_params({"params": old}, resolve(cfg))  # an index from before these parameters existed
    with pytest.raises(IndexError_, match="match.method: index 'minhash', now 'simhash'"):
        check_params({"params": old}, resolve(cfg.with_overrides({"match.method": "simhash"})))
    with pytest.raises(IndexError_, match="simhash.bits: index 64, now 128"):
        check_params({"params": old}, resolve(cfg.with_overrides({"simhash.bits": 128})))


def test_a_replayed_half_and_a_new_half_list_each_document_once(spark, tmp_path):
    """Archived documents re-sent beside newcomers that join their clusters: each batch document
    is listed once, with its assignment after the batch (the index's own), never also its old row."""
    rows = pd.read_json(api.SAMPLE, lines=True)
    groups = rows.groupby("group").id.apply(list)
    # Archive one copy of every story; the batch re-sends those and brings the other copies.
    first = set(groups.apply(lambda ids: ids[0]))
    archive, rest = rows[rows.id.isin(first)], rows[~rows.id.isin(first)]
    resent = archive[archive.group.isin(set(rest.group))].head(150)
    batch = pd.concat([resent, rest.head(300)])
    for name, frame in (("archive", archive), ("batch", batch)):
        frame.to_json(tmp_path / f"{name}.jsonl", orient="records", lines=True, date_format="iso")
    index = str(tmp_path / "index")
    api.build_index(spark, _cfg(**{"input.path": str(tmp_path / "archive.jsonl"), "index.path": index,
                                 "keeper.rules": ["longest"]}))
    report = run(spark, _cfg(**{"input.path": str(tmp_path / "batch.jsonl"), "index.path": index,
                                "index.append": True, "output.path": str(tmp_path / "out"),
                                "keeper.rules": ["longest"]}))
    assert report["counts"]["already_indexed"] == len(resent) and report["counts"]["archived_documents_changed"] > 0
    out = pd.read_parquet(tmp_path / "out" / "clusters")
    assert out.doc_id.is_unique
    assert set(out.doc_id[out.in_batch]) == set(batch.id)
    api.export(spark, index, str(tmp_path / "export"))
    now = pd.read_parquet(tmp_path / "export" / "clusters").set_index("doc_id")
    mine = out.set_index("doc_id")
    for col in ("cluster_id", "is_keeper", "keeper_id", "status"):
        assert (mine[col] == now[col].reindex(mine.index)).all(), col


@pytest.mark.parametrize("where,stages", [("path", ("after_manifest", "publish:pairs")),
                                          ("uri", ("after_version", "publish:clusters"))])
@pytest.mark.process
def test_a_batch_killed_after_its_commit_is_repaired_by_its_rerun(spark, batches, archived, tmp_path, where,
                                                                   stages):
    """The index says the batch landed: its re-run (no --overwrite) re-emits the output whole,
    and so does the re-run after a re-run killed while publishing."""
    work, rows, paths = batches
    index, out = _copy_of(archived, tmp_path / "index", where), tmp_path / "out"
    argv = ["run", "--input", paths[1], "--format", "jsonl", "--index", index, "--append",
            "--output", _at(out, where), "--quiet", *SPARK]
    landed = None
    for stage in stages:
        killed = _cli(argv, kill_at=stage)
        assert killed.returncode == 137, (stage, killed.stderr[-2000:])
        landed = landed or open_index(index).manifest
        assert open_index(index).manifest == landed  # committed by the first run, once
        assert not (out / "report.json").exists()
        for table in ("clusters", "pairs"):  # a table is there whole, or not at all
            if (out / table).exists():
                pd.read_parquet(out / table)
    assert cli.main(argv) == 0  # the repairing re-run: in this process (only the kills need their own)
    assert open_index(index).manifest == landed  # applied once
    report = json.loads((out / "report.json").read_text())
    assert report["replayed"]
    clusters = pd.read_parquet(out / "clusters")
    assert set(pd.read_json(paths[1], lines=True).id) <= set(clusters.doc_id) and clusters.doc_id.is_unique
    assert not [p.name for p in out.iterdir() if p.name.startswith("_neardup")]
    # A finished output of another batch is still refused without --overwrite.
    other = _cli(["run", "--input", paths[2], "--format", "jsonl", "--index", index, "--append",
                  "--output", _at(out, where), "--quiet", *SPARK])
    assert other.returncode == 2 and "already exists" in other.stderr


@pytest.mark.process
def test_two_appends_at_once_one_lands_one_refuses(spark, batches, archived, tmp_path):
    """Two nightly jobs on one index (a file:// URI): the first holds just before its commit
    while the second lands; the first then refuses with nothing changed, and its re-run lands."""
    work, rows, paths = batches
    index = _copy_of(archived, tmp_path / "index", "uri")
    hold = tmp_path / "hold"

    def argv(k: int) -> list[str]:
        return ["run", "--input", paths[k], "--format", "jsonl", "--index", index, "--append",
                "--output", str(tmp_path / f"out{k}"), "--quiet", *SPARK]

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "NEARDUP_HOLD_AT": "before_manifest",
           "NEARDUP_HOLD_FILE": str(hold)}
    first = subprocess.Popen([sys.executable, "-m", "neardup_spark.cli", *argv(1)], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not Path(f"{hold}.reached").exists():
            assert first.poll() is None and time.monotonic() < deadline, "the first append never reached its commit"
            time.sleep(0.2)
        assert cli.main(argv(2)) == 0  # in this process, while the first one holds
    finally:
        hold.touch()
        _, err = first.communicate(timeout=300)
    assert first.returncode == 2 and "during this run (a concurrent append?)" in err and "run again" in err
    assert open_index(index).manifest["version"] == 2
    assert not (tmp_path / "out1" / "report.json").exists()
    assert cli.main(argv(1)) == 0
    api.export(spark, index, str(tmp_path / "export"))
    exported = pd.read_parquet(tmp_path / "export" / "clusters")
    assert exported.doc_id.is_unique
    assert sorted(exported.doc_id) == sorted(pd.concat([pd.read_json(p, lines=True) for p in paths]).id)


@pytest.mark.process
def test_a_run_killed_while_replacing_an_output_never_shows_two_runs(spark, batches, tmp_path):
    """`run --overwrite` over a good output, killed (SIGKILL to its process group) while its
    tables are switched in: a reader finds no report and the marker, never the old report over
    new tables; the next run leaves the new output whole (see test_publish for every step)."""
    work, rows, paths = batches
    out = tmp_path / "out"
    old = run(spark, _cfg(**{"input.path": paths[0], "output.path": str(out), "output.plots": True}))
    hold = tmp_path / "hold"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "NEARDUP_HOLD_AT": "publish:clusters",
           "NEARDUP_HOLD_FILE": str(hold)}
    argv = ["run", "--input", paths[1], "--format", "jsonl", "--output", str(out), "--overwrite", "--quiet", *SPARK]
    killed = subprocess.Popen([sys.executable, "-m", "neardup_spark.cli", *argv], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not Path(f"{hold}.reached").exists():
            assert killed.poll() is None and time.monotonic() < deadline, killed.stderr.read()[-2000:]
            time.sleep(0.2)
        os.killpg(killed.pid, 9)
    finally:
        killed.wait(timeout=60)
    new_docs = len(pd.read_json(paths[1], lines=True))
    assert not (out / "report.json").exists() and (out / "_neardup_publishing.json").exists()
    assert len(pd.read_parquet(out / "clusters")) == new_docs  # the new table is in, under no report
    # A reader says so and moves nothing; the same command again completes it.
    with pytest.raises(InputError, match="stopped while publishing its output"):
        api.inspect(spark, str(out), doc=int(pd.read_json(paths[1], lines=True).id[0]))
    run(spark, _cfg(**{"input.path": paths[1], "output.path": str(out)}))
    report = json.loads((out / "report.json").read_text())
    assert report["counts"]["documents"] == new_docs != old["counts"]["documents"]
    assert len(pd.read_parquet(out / "clusters")) == new_docs
    assert len(pd.read_parquet(out / "deduplicated")) == report["counts"]["clusters"]
    assert len(pd.read_parquet(out / "pairs")) == report["counts"]["verified_pairs"] + report["counts"]["exact_duplicates"]
    assert not list(out.glob("*.png"))  # the old run's plots went with its report
    assert not [p.name for p in out.iterdir() if p.name.startswith("_neardup")]


def test_a_listed_part_that_is_gone_is_named_not_blamed_on_storage(spark, batches, archived, tmp_path):
    work, rows, paths = batches
    index = tmp_path / "index"
    _copy_of(archived, index)
    run(spark, _cfg(**{"input.path": paths[1], "index.path": str(index), "index.append": True,
                       "output.path": str(tmp_path / "night")}))
    gone = open_index(str(index)).parts[0]
    shutil.rmtree(index / "parts" / gone)
    for attempt in (lambda: api.export(spark, str(index), str(tmp_path / "export")),
                    lambda: run(spark, _cfg(**{"input.path": paths[2], "index.path": str(index), "index.append": True,
                                               "output.path": str(tmp_path / "night2")}))):
        with pytest.raises(IndexError_, match=f"is damaged: its version 2 lists parts/{gone}/, which is not there"):
            attempt()
    assert open_index(str(index)).manifest["version"] == 2 and not (tmp_path / "export" / "clusters").exists()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_replacing_random_documents_equals_a_full_run(spark, batches, archived, tmp_path, seed):
    """Replaced documents drawn at random, half of them with exact copies in the archive: the
    index afterwards clusters (keepers and statuses too) as one full run over the final texts."""
    work, rows, paths = batches
    archive = pd.read_json(paths[0], lines=True)
    canon = oracles.exact_groups(archive.to_dict("records"))
    sizes = pd.Series(canon).value_counts()
    with_copies = [i for i, c in canon.items() if c is not None and sizes[c] > 1]
    rng = np.random.default_rng(seed)
    picked = set(rng.choice(with_copies, 4, replace=False)) | set(rng.choice(archive.id, 4, replace=False))
    donors = rng.choice(archive.id[~archive.id.isin(picked)], len(picked), replace=False)
    text_of = archive.set_index("id").text
    new_text = {int(i): f"{text_of[d]} follow-up {n}" for n, (i, d) in enumerate(zip(sorted(picked), donors))}
    index = _copy_of(archived, tmp_path / "index")
    batch = archive[archive.id.isin(picked)].assign(text=lambda f: f.id.map(new_text))
    batch.to_json(tmp_path / "replace.jsonl", orient="records", lines=True, date_format="iso")
    run(spark, _cfg(**{"input.path": str(tmp_path / "replace.jsonl"), "index.path": index, "index.append": True,
                       "index.replace": True, "output.path": str(tmp_path / "out")}))
    edited = archive.assign(text=[new_text.get(i, t) for i, t in zip(archive.id, archive.text)])
    frames.assert_index_is_a_full_run(spark, index, edited, tmp_path, _cfg())
