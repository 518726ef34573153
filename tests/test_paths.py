"""Paths resolved as Spark resolves them: globs, symlinks, qualified URIs; the checks that keep
an output from deleting or overlapping its input."""

import hashlib
import shutil
from pathlib import Path

import pytest

from neardup_spark import api, cli
from neardup_spark.runtime import paths

SAMPLE = str(api.SAMPLE)


def test_braces_expand_like_hadoop_globs():
    assert paths.expand_braces("a/{b,c}/*.gz") == ["a/b/*.gz", "a/c/*.gz"]
    assert paths.expand_braces("x{1,{2,3}}y") == ["x1y", "x2y", "x3y"]
    assert paths.expand_braces("plain") == ["plain"]


def test_local_matches_expand_globs_and_follow_symlinks(tmp_path):
    (tmp_path / "d").mkdir()
    for name in ("a.parquet", "b.parquet", ".hidden.parquet", "c.json"):
        (tmp_path / "d" / name).write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "d")
    got = paths.local_matches(str(tmp_path / "link" / "*.parquet"))
    assert got == sorted((tmp_path / "d" / n).resolve() for n in (".hidden.parquet", "a.parquet", "b.parquet"))
    assert paths.local_matches(str(tmp_path / "d" / "{a,c}.*")) == [(tmp_path / "d" / n).resolve()
                                                                     for n in ("a.parquet", "c.json")]
    assert paths.local_matches(f"file:{tmp_path}/d/[^ab.]*") == [(tmp_path / "d" / "c.json").resolve()]
    assert paths.local_matches(str(tmp_path / "none" / "*")) == []
    assert paths.local_matches(str(tmp_path / "link")) == [(tmp_path / "d").resolve()]


def test_locations_compare_by_place_not_spelling(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    a, b = paths.location(str(tmp_path / "alias" / "x")), paths.location(f"file://{tmp_path}/real/x")
    assert a == b and a.contains(b)
    hdfs = paths.location("hdfs://nn:8020/data/archive")
    assert hdfs.contains(paths.location("hdfs://nn:8020/data/archive/part-0.parquet"))
    assert not hdfs.overlaps(paths.location("hdfs://other:8020/data/archive"))
    assert not hdfs.overlaps(paths.location("hdfs://nn:8020/data/archive2"))


def _digests(root: Path) -> dict:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def _earlier_run(tmp_path: Path) -> Path:
    """An earlier run's output layout (the tables' files are what matter here)."""
    prev = tmp_path / "prev"
    for name in ("clusters", "pairs", "deduplicated"):
        (prev / name).mkdir(parents=True)
        shutil.copy(SAMPLE, prev / name / "part-00000.json.gz")
    (prev / "report.json").write_text("{}")
    return prev


@pytest.mark.parametrize(
    "inp, out",
    [
        ("prev/deduplicated/*.json.gz", "prev"),  # the glob that deleted its input
        ("prev/{deduplicated,pairs}", "prev"),
        ("prev/dedup*", "prev"),
        ("prev/deduplicated/*.json.gz", "prev/deduplicated"),  # output = the glob's own folder
        ("prev/deduplicated/*.json.gz", "prev/deduplicated/again"),
        ("alias/deduplicated/*", "prev"),  # through a symlink
        ("prev/deduplicated", "viaquote"),  # the output's clusters/ is a symlink to the input
    ],
)
def test_overwrite_never_deletes_an_input(tmp_path, capsys, monkeypatch, inp, out):
    prev = _earlier_run(tmp_path)
    (tmp_path / "alias").symlink_to(prev)
    (tmp_path / "viaquote").mkdir()
    (tmp_path / "viaquote" / "clusters").symlink_to(prev / "deduplicated")
    monkeypatch.chdir(tmp_path)
    before = _digests(prev)
    argv = ["run", "--input", inp, "--format", "jsonl", "--output", out, "--overwrite", "--master", "local[1]"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "overlaps input" in err and err.startswith("neardup: error:") and err.count("\n") == 1
    assert _digests(prev) == before


def test_a_glob_that_matches_nothing_is_an_error_before_spark(tmp_path, capsys):
    argv = ["run", "--input", str(tmp_path / "*.parquet"), "--output", str(tmp_path / "o"), "--master", "local[1]"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "matches no file" in err and err.count("\n") == 1


def test_the_session_resolves_globs_and_refuses_overlap(spark, tmp_path):
    """Inside `run`, paths go through the session's Hadoop FileSystem (file: URIs here)."""
    from neardup_spark.config import Config
    from neardup_spark.stages.write import check_paths

    prev = _earlier_run(tmp_path)
    cfg = Config().with_overrides({"input.path": f"file://{prev}/deduplicated/*.json.gz", "input.format": "jsonl",
                                   "output.path": f"file://{prev}", "output.mode": "overwrite"})
    with pytest.raises(Exception, match="overlaps input"):
        check_paths(cfg, "", spark)
    fine = cfg.with_overrides({"output.path": str(tmp_path / "elsewhere")})
    check_paths(fine, "", spark)
    missing = cfg.with_overrides({"input.path": f"file://{tmp_path}/nothing/*.json.gz"})
    with pytest.raises(Exception, match="matches no file"):
        check_paths(missing, "", spark)


def test_a_scheme_without_its_connector_is_refused_before_work(spark, tmp_path):
    from neardup_spark.config import Config
    from neardup_spark.errors import NeardupError
    from neardup_spark.stages.write import check_paths

    cfg = Config().with_overrides({"input.path": SAMPLE, "input.format": "jsonl", "output.path": "s3a://bucket/out"})
    with pytest.raises(NeardupError, match="no connector for this scheme.*hadoop-aws"):
        check_paths(cfg, "", spark)
    cfg = cfg.with_overrides({"input.path": "gs://bucket/in/*.parquet", "output.path": str(tmp_path / "o")})
    with pytest.raises(NeardupError, match="cannot resolve 'gs://bucket/in"):
        check_paths(cfg, "", spark)
