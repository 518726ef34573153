"""The index commit is create-if-absent: of concurrent committers of one version exactly one
lands, in separate processes, and no committed part is ever lost. No JVM needed."""

import json
import os

import pytest

from neardup_spark.archive import index as ix
from neardup_spark.archive import versions

from neardup_spark.runtime.filestore import LocalStore

from .commit_race import manifest as _manifest
from .commit_race import race

ROUNDS = 300
COMMITTERS = 4


def test_concurrent_committers_in_separate_processes(tmp_path):
    root = str(tmp_path / "index")
    os.makedirs(root)
    landed = race(LocalStore, root, COMMITTERS, ROUNDS)
    final = ix.open_index(root).manifest
    assert final["version"] == ROUNDS + 1  # one commit a round, never two, never none
    assert len(landed) == ROUNDS and sorted(final["parts"][1:]) == landed  # every success is in the index
    assert json.loads((tmp_path / "index" / "manifest.json").read_text())["version"] == ROUNDS + 1
    assert not [n for n in os.listdir(os.path.join(root, versions.VERSIONS)) if n.startswith(".tmp")]


def test_a_stale_commit_changes_nothing(tmp_path):
    root = str(tmp_path)
    versions.commit(root, _manifest(1, ["a"]), expected_version=0)
    versions.commit(root, _manifest(2, ["a", "b"]), expected_version=1)
    before = sorted(os.listdir(os.path.join(root, versions.VERSIONS)))
    with pytest.raises(versions.ConcurrentCommitError, match="from version 1 to 2.*run again"):
        versions.commit(root, _manifest(2, ["a", "c"]), expected_version=1)
    assert sorted(os.listdir(os.path.join(root, versions.VERSIONS))) == before
    assert ix.open_index(root).parts == ["a", "b"]


def test_readers_take_the_newest_version_not_the_copy(tmp_path):
    """manifest.json is a copy for people: a run killed before refreshing it loses nothing."""
    root = str(tmp_path)
    versions.commit(root, _manifest(1, ["a"]), expected_version=0)
    versions.commit(root, _manifest(2, ["a", "b"]), expected_version=1)
    (tmp_path / "manifest.json").write_text(json.dumps(_manifest(1, ["a"])))
    assert ix.open_index(root).parts == ["a", "b"]


def test_an_index_of_format_1_opens(tmp_path):
    """Format 1 (commits by rename) had the same files; its manifests/ entries are read as they are."""
    root = tmp_path
    (root / "manifests").mkdir()
    old = {**_manifest(1, ["a"]), "format": 1}
    (root / "manifests" / "v00001.json").write_text(json.dumps(old))
    (root / "manifest.json").write_text(json.dumps(old))
    assert ix.open_index(str(root)).manifest["format"] == 1
    versions.commit(str(root), _manifest(2, ["a", "b"]), expected_version=1)
    assert ix.open_index(str(root)).parts == ["a", "b"]
    assert json.loads((root / "manifest.json").read_text())["format"] == ix.FORMAT  # older releases now refuse it


def test_a_damaged_newest_version_says_so_and_how_to_restore_it(tmp_path):
    """A version file is written whole by its commit: one that does not parse was damaged later."""
    root = str(tmp_path)
    versions.commit(root, _manifest(1, ["a"]), expected_version=0)
    versions.commit(root, _manifest(2, ["a", "b"]), expected_version=1)
    newest = tmp_path / versions.VERSIONS / "v00002.json"
    newest.write_bytes(newest.read_bytes()[:40])
    with pytest.raises(ix.IndexError_, match=r"v00002.json is not valid JSON \(40 bytes.*damaged afterwards.*"
                                             r"manifest.json beside it holds version 2 whole: copy it over"):
        ix.open_index(root)
    (tmp_path / "manifest.json").write_text("{")
    with pytest.raises(ix.IndexError_, match="removing it opens version 1 instead, without what version 2 added"):
        ix.open_index(root)
