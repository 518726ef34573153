"""The `neardup` entry point in-process, and the spark-submit job on a local cluster."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from neardup_spark import api, cli
from neardup_spark.tools import corpus

from . import oracles

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = str(api.SAMPLE)
COMMON = ["--format", "jsonl", "--shuffle-partitions", "2", "--quiet"]


@pytest.mark.fast
def test_run_on_the_bundled_sample(spark, tmp_path, capsys):
    out = tmp_path / "out"
    rc = cli.main(["run", "--input", SAMPLE, "--output", str(out), "--metadata-cols", "source,published_at",
                   "--keeper-rules", "earliest", *COMMON])
    assert rc == 0
    shown = capsys.readouterr()
    assert shown.out == "" and "neardup:" not in shown.err  # --quiet: errors and warnings only
    clusters = pd.read_parquet(out / "clusters")
    pairs = pd.read_parquet(out / "pairs")
    dedup = pd.read_parquet(out / "deduplicated")
    report = json.loads((out / "report.json").read_text())
    assert list(clusters.columns) == ["doc_id", "cluster_id", "is_keeper", "keeper_id", "status"]
    assert list(pairs.columns) == ["doc_a", "doc_b", "jaccard", "containment_a", "containment_b", "match"]
    assert set(pairs["match"]) == {"near", "exact"}
    rows = pd.read_json(SAMPLE, lines=True)
    assert sorted(clusters.doc_id) == sorted(rows.id)
    assert sorted(dedup.id) == sorted(clusters.doc_id[clusters.is_keeper])
    assert set(dedup.columns) == set(rows.columns)
    assert report["counts"]["documents"] == len(rows)
    assert report["counts"]["removed"] == int((~clusters.is_keeper).sum())
    assert {"lsh", "counts", "stage_seconds", "wall_seconds", "config"} <= set(report)
    # The earliest copy of each story is its keeper.
    merged = clusters.merge(rows[["id", "published_at"]], left_on="doc_id", right_on="id")
    earliest = merged.sort_values(["published_at", "doc_id"]).groupby("cluster_id").doc_id.first()
    assert (merged.groupby("cluster_id").keeper_id.first() == earliest).all()
    labels = dict(zip(clusters.doc_id, clusters.cluster_id))
    truth = corpus.label_pairs(rows.to_dict("records"))
    assert oracles.cluster_pairs(labels) == truth


@pytest.mark.parametrize(
    "layout, output, message",
    [
        ("file", "f/out", "cannot be created: "),  # a file where a parent directory should be
        ("file", "f", "is a file; --output names a directory"),
        ("readonly", "ro/out", "no write permission in"),
        ("input_dir", "in", "overlaps input"),
        ("input_dir", "in/out", "overlaps input"),
        ("input_in_output", "o", "overlaps input"),
    ],
)
def test_an_output_that_cannot_be_written_is_refused_before_spark_starts(tmp_path, capsys, layout, output,
                                                                         message):
    import os
    import shutil

    if layout == "readonly" and os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    (tmp_path / "f").write_text("x")
    (tmp_path / "ro").mkdir(mode=0o555)
    source = {"input_dir": tmp_path / "in", "input_in_output": tmp_path / "o" / "clusters"}.get(layout)
    if source is None:
        source = tmp_path / "sample.jsonl.gz"
    else:
        source.mkdir(parents=True)
        source = source / "sample.jsonl.gz"
    shutil.copy(SAMPLE, source)
    inp = str(source.parent if layout in ("input_dir", "input_in_output") else source)
    argv = ["run", "--input", inp, "--format", "jsonl", "--output", str(tmp_path / output), "--overwrite",
            "--master", "local[1]"]
    assert cli.main(argv) == 2
    *progress, last = capsys.readouterr().err.splitlines()
    assert message in last and last.startswith("neardup: error:")  # one line, the last
    assert all(line.startswith("neardup: ") and "error" not in line for line in progress)


def test_existing_output_needs_overwrite(spark, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "something").write_text("x")
    rc = cli.main(["run", "--input", SAMPLE, "--output", str(out), *COMMON])
    err = capsys.readouterr().err
    assert rc == 2 and "already exists" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "--input", "/nonexistent/x.parquet", "--output", "o"], "cannot read parquet input"),
        (["run", "--input", SAMPLE, "--output", "o", "--threshold", "0"], "verify.threshold must be in (0, 1]"),
        (["run", "--input", SAMPLE, "--output", "o", "--k", "0"], "shingle.k must be >= 1"),
        (["run", "--input", SAMPLE, "--output", "o", "--bands", "20", "--rows", "8"], "exceeds minhash.num_perm"),
        (["run", "--input", SAMPLE, "--output", "o", "--bands", "20"], "--bands and --rows go together"),
        (["run", "--input", SAMPLE, "--output", "o", "--id-col", "doc"], "no column(s) doc"),
        (["run", "--output", "o"], "input.path is required"),
        (["run", "--input", SAMPLE, "--output", "o", "--index", "o"], "add --append"),
        (["params", "--threshold", "1.5"], "verify.threshold must be in (0, 1]"),
    ],
)
def test_bad_arguments_are_one_line_errors(spark, tmp_path, capsys, argv, message):
    argv = [a if a != "o" else str(tmp_path / "o") for a in argv]
    if argv[0] == "run" and "--format" not in argv:
        argv += ["--format", "jsonl" if SAMPLE in argv else "parquet"]
    assert cli.main(argv) == 2
    *progress, last = capsys.readouterr().err.splitlines()
    assert message in last and last.startswith("neardup: error:")  # one line, the last
    assert all(line.startswith("neardup: ") and "error" not in line for line in progress)


def test_params_prints_choice_and_curve(capsys):
    assert cli.main(["params", "--threshold", "0.3", "--num-perm", "128"]) == 0
    text = capsys.readouterr().out
    assert "42 x 3" in text and "S* (bend)        0.2877" in text and "<- threshold" in text
    assert cli.main(["params", "--threshold", "0.8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["bands"], data["rows"]) == (25, 5) and data["p_candidate_at_threshold"] > 0.99
    assert len(data["s_curve"]) == 21


def test_params_in_containment_mode_prints_the_size_classes(capsys):
    assert cli.main(["params", "--mode", "containment"]) == 0
    text = capsys.readouterr().out
    assert "mode             containment" in text and "21 x 4" in text and "60 x 1" in text
    assert "warning" not in text and "S* (bend)" not in text  # no Jaccard S-curve: its bands are unused
    assert cli.main(["params", "--mode", "containment", "--num-perm", "32", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [c["class"] for c in data["size_classes"]] == [0, 1, 2, 3, 4]
    assert len(data["advice"]) == 1 and "size class 4" in data["advice"][0]


def test_config_file_and_command_line_precedence(tmp_path, capsys):
    conf = tmp_path / "x.toml"
    conf.write_text("[verify]\nthreshold = 0.8\n[minhash]\nnum_perm = 64\n")
    assert cli.main(["params", "--config", str(conf), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["num_perm"] == 64
    assert cli.main(["params", "--config", str(conf), "--num-perm", "256", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["num_perm"] == 256 and data["threshold"] == 0.8
    conf.write_text("[verify]\nthreshhold = 0.8\n")
    assert cli.main(["params", "--config", str(conf)]) == 2
    assert "unknown key(s) in [verify]: threshhold" in capsys.readouterr().err


def test_generate(tmp_path, capsys):
    assert cli.main(["generate", "--docs", "300", "--output", str(tmp_path / "c"), "--format", "jsonl"]) == 0
    rows = pd.read_json(next((tmp_path / "c").glob("*.jsonl.gz")), lines=True)
    assert len(rows) == 300 and {"id", "text", "group", "edit", "source", "published_at"} <= set(rows.columns)


def test_generate_in_shards(tmp_path, capsys):
    out = tmp_path / "c"
    assert cli.main(["generate", "--docs", "300", "--output", str(out), "--shards", "3", "--workers", "2"]) == 0
    err = capsys.readouterr().err
    assert all(f"shard {k}/3 written" in err for k in (1, 2, 3)) and len(list(out.glob("_shard-*.done"))) == 3
    rows = pd.read_parquet(out)
    assert sorted(rows["id"]) == list(range(1, 301)) and rows["group"].str.endswith(("@0", "@1", "@2")).all()
    assert cli.main(["generate", "--docs", "2", "--output", str(tmp_path / "d"), "--shards", "3"]) == 2
    assert "cannot make 3 shards" in capsys.readouterr().err


def test_table_input(spark, tmp_path, capsys):
    spark.read.json(SAMPLE).limit(200).write.mode("overwrite").saveAsTable("neardup_sample")
    out = tmp_path / "out"
    rc = cli.main(["run", "--input", "neardup_sample", "--format", "table", "--output", str(out),
                   "--shuffle-partitions", "2", "--quiet"])
    assert rc == 0
    assert len(pd.read_parquet(out / "clusters")) == 200


STAGES = ("read", "sketch", "exact", "band_candidates", "verify", "components", "keepers", "write")


def test_a_run_shows_progress_and_a_summary(spark, tmp_path, capsys):
    out = tmp_path / "out"
    rc = cli.main(["run", "--input", SAMPLE, "--output", str(out), "--format", "jsonl", "--shuffle-partitions", "2"])
    assert rc == 0
    shown = capsys.readouterr()
    report = json.loads((out / "report.json").read_text())
    lines = shown.out.splitlines()
    assert 8 <= len(lines) <= 30
    counts = report["counts"]
    assert lines[0] == (f"neardup: {counts['documents']:,} documents -> {counts['clusters']:,} kept, "
                        f"{counts['removed']:,} removed")
    assert f"verified pairs        {counts['verified_pairs']:,}" in shown.out
    assert "a pair at the threshold becomes a candidate with p = " in shown.out
    # The default's own figures: every removed document checked against its keeper, and the
    # advice about the catch rate told as this run's pairs.
    assert counts["removed_verified_against_keeper"] == counts["removed"] > 0
    assert f"largest cluster       {counts['largest_cluster']:,} documents" in shown.out
    assert f"removed, verified     {counts['removed']:,} of {counts['removed']:,} (100.0%)" in shown.out
    assert "verified pairs lie within 0.05 of the threshold" in " ".join(shown.out.split())
    assert str(out) in lines[-1]
    for stage in STAGES:  # a line as each stage starts and as it ends, with its time
        assert f"neardup: {stage} ...\n" in shown.err
        assert re.search(rf"^neardup: {stage} done in [0-9.]+ s", shown.err, re.M), stage
    assert f"(exact duplicates {counts['exact_duplicates']:,})" in shown.err


def test_json_prints_the_report_json(spark, tmp_path, capsys):
    out = tmp_path / "out"
    rc = cli.main(["run", "--input", SAMPLE, "--output", str(out), "--format", "jsonl", "--shuffle-partitions", "2",
                   "--json"])
    assert rc == 0
    assert json.loads(capsys.readouterr().out) == json.loads((out / "report.json").read_text())


def test_plots_in_containment_mode_skip_the_s_curve(spark, tmp_path, capsys):
    # No single banding to draw: the S-curve is left out, the other plots are written
    # (this ran the whole pipeline, then failed on the report's missing bands).
    out = tmp_path / "out"
    assert cli.main(["run", "--input", SAMPLE, "--output", str(out), "--plots", "--mode", "containment", *COMMON]) == 0
    capsys.readouterr()
    report = json.loads((out / "report.json").read_text())
    assert report["plots"] == [str(out / "jaccard.png"), str(out / "cluster_sizes.png")]
    assert not (out / "s_curve.png").exists()


def test_run_with_plots_and_stripping_then_evaluate(spark, tmp_path, capsys):
    out = tmp_path / "out"
    rc = cli.main(["run", "--input", SAMPLE, "--output", str(out), "--plots", "--strip-boilerplate",
                   "--boilerplate-min-docs", "20", *COMMON])
    assert rc == 0
    capsys.readouterr()
    report = json.loads((out / "report.json").read_text())
    for name in ("s_curve.png", "jaccard.png", "cluster_sizes.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
        assert str(out / name) in report["plots"]
    # The sample's shared footers (in ~40 documents each) are found and listed.
    lines = pd.read_parquet(out / "boilerplate")
    assert report["boilerplate"]["lines"] == len(lines) > 0 and (lines["documents"] >= 20).all()
    assert lines["example"].notna().all()
    rc = cli.main(["evaluate", "--input", SAMPLE, "--format", "jsonl", "--labels-col", "group", "--edit-col", "edit",
                   "--clusters", str(out), "--json", "--shuffle-partitions", "2"])
    assert rc == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["documents"] == 1000 and scores["pairs"]["precision"] == 1.0 and scores["pairs"]["recall"] == 1.0
    assert scores["adjusted_rand_index"] == 1.0 and scores["by_edit"]["reorder"]["recall"] == 1.0
    rc = cli.main(["evaluate", "--input", SAMPLE, "--format", "jsonl", "--labels-col", "nope",
                   "--clusters", str(out), "--shuffle-partitions", "2"])
    assert rc == 2 and "nope" in capsys.readouterr().err


def test_simhash_options_reach_the_config():
    args = cli._parser().parse_args(["run", "--input", "x", "--output", "y", "--method", "simhash",
                                     "--hamming-distance", "10", "--simhash-bits", "128", "--simhash-weighting", "tf"])
    sh = cli.config_from_args(args).simhash
    assert (sh.hamming_distance, sh.bits, sh.weighting) == (10, 128, "tf")


def test_advice_reaches_stderr_for_pinned_or_weak_lsh_only():
    from neardup_spark.kernels.lsh import advice, resolve

    def report(lsh):
        return {"lsh": lsh.as_dict(), "advice": advice(lsh, 1 / 3, 0.05)}

    pinned = report(resolve(0.3, 128, bands=7, rows=14))  # P at 0.3 ~0: the run finds almost nothing
    assert cli.loud_advice(pinned) == pinned["advice"] and "pinned (7 x 14)" in pinned["advice"][0]
    assert "At Jaccard 0.50 the probability is 0.000" in pinned["advice"][0]
    assert cli.loud_advice(report(resolve(0.3, 128))) == []  # the default's known trade-off: the report only
    assert cli.loud_advice(report(resolve(0.3, 16)))  # chosen, but catches under half the pairs at 0.3


def test_containment_advice_reaches_stderr_when_a_size_class_misses_most_pairs():
    from neardup_spark.kernels.containment import advice, size_classes

    def report(num_perm):
        classes = size_classes(0.8, num_perm, 16)
        return {"lsh": {"mode": "containment", "size_classes": [c.as_dict() for c in classes]},
                "advice": advice(classes, 0.8)}

    assert cli.loud_advice(report(128)) == []
    weak = report(32)  # class 4 catches 0.141 of the pairs at its floor
    assert weak["advice"] and cli.loud_advice(weak) == weak["advice"]
    # A note, but every class catches at least half its pairs: the report only.
    middling = {"lsh": {"mode": "containment", "size_classes": [{"p_candidate_at_floor": 0.7}]}, "advice": ["x"]}
    assert cli.loud_advice(middling) == []
    pinned = {**report(128), "advice": ["lsh.bands and lsh.rows are set but unused"],
              "config": {"lsh": {"bands": 4, "rows": 4}}}
    assert cli.loud_advice(pinned) == pinned["advice"]


def test_a_backend_that_cannot_run_is_refused_before_work(spark, tmp_path, capsys):
    """--backend graphframes without its jar used to solve on the driver without a word."""
    from .conftest import GRAPHFRAMES_JAR

    if GRAPHFRAMES_JAR:
        pytest.skip("GraphFrames is on this session's classpath")
    rc = cli.main(["run", "--input", SAMPLE, "--output", str(tmp_path / "o"), "--backend", "graphframes", *COMMON])
    err = capsys.readouterr().err
    assert rc == 2 and "graphframes" in err and err.count("\n") == 1
    assert not (tmp_path / "o" / "clusters").exists()


@pytest.mark.process
def test_the_cli_runs_through_spark_connect(tmp_path):
    """--remote (or SPARK_REMOTE): here "local[2]", a Connect server in the command's own process."""
    pytest.importorskip("grpc", reason="Spark Connect client needs grpcio (test extra 'connect')")
    import pyspark

    if int(pyspark.__version__.split(".")[0]) < 4:
        pytest.skip("local Spark Connect servers from the pip package need pyspark 4")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "neardup_spark", "run", "--remote", "local[2]", "--input", SAMPLE,
                           "--format", "jsonl", "--output", str(out), "--shuffle-partitions", "2", "--quiet"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(pd.read_parquet(out / "clusters")) == 1000 and (out / "report.json").is_file()


def test_the_package_zip_for_a_connect_server_holds_every_module():
    import zipfile

    from neardup_spark.runtime.shipping import package_zip

    names = set(zipfile.ZipFile(package_zip()).namelist())
    here = Path(cli.__file__).parent
    assert {f"neardup_spark/{p.relative_to(here)}" for p in here.rglob("*.py")} == names
