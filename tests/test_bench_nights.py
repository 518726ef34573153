"""The side-by-side nights benchmark's helpers (nothing is run through Spark)."""

import os
import sys

import pytest

from benchmarks.nights import linked_copy, side_configs, settings_toml, tree_state

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_settings_become_one_table_a_section():
    text = settings_toml(["index.band_probe=join", "spark.shuffle_partitions=8", "index.sticky_keeper=true",
                          "verify.threshold=0.35"])
    assert tomllib.loads(text) == {"index": {"band_probe": "join", "sticky_keeper": True},
                                   "spark": {"shuffle_partitions": 8}, "verify": {"threshold": 0.35}}
    for bad in ("band_probe=join", "index.band_probe", ".x=1"):
        with pytest.raises(SystemExit, match="SECTION.KEY=VALUE"):
            settings_toml([bad])


def test_a_side_s_settings_come_after_the_shared_file(tmp_path):
    base = tmp_path / "base.toml"
    base.write_text("[spark]\nshuffle_partitions = 4\n")
    assert side_configs("none", [], tmp_path / "a.toml") == []
    assert side_configs(str(base), [], tmp_path / "a.toml") == [str(base)]
    files = side_configs(str(base), ["index.band_probe=join"], tmp_path / "b.toml")
    assert files == [str(base), str(tmp_path / "b.toml")]
    assert tomllib.loads((tmp_path / "b.toml").read_text()) == {"index": {"band_probe": "join"}}


def test_a_linked_copy_takes_new_and_replaced_files_but_shares_the_rest(tmp_path):
    index = tmp_path / "index"
    (index / "parts" / "p1").mkdir(parents=True)
    (index / "manifest.json").write_text("{}")
    (index / "parts" / "p1" / "a.parquet").write_bytes(b"x" * 10)
    before = tree_state(index)
    copy = tmp_path / "copy"
    linked_copy(index, copy)
    assert tree_state(copy) == before
    # What a night does: new files, and a file replaced by a rename. The original is untouched.
    (copy / "parts" / "p2").mkdir()
    (copy / "parts" / "p2" / "b.parquet").write_bytes(b"y")
    (copy / "tmp").write_text('{"version": 2}')
    os.replace(copy / "tmp", copy / "manifest.json")
    assert tree_state(index) == before
    # A write in place would reach the original through the shared inode: the check sees it.
    with open(copy / "parts" / "p1" / "a.parquet", "ab") as fh:
        fh.write(b"z")
    assert tree_state(index) != before
    linked_copy(index, copy)  # made anew
    assert not (copy / "parts" / "p2").exists()
