"""How an index's versions are committed and read (see `archive.index` for the layout).

Every version's manifest is a file of its own, `manifests/vNNNNN.json`, put there whole
in one create-if-absent step (`Store.put_if_absent`): of two runs that commit one
version exactly one lands, and the other changes nothing and says to run again.
Readers take the highest version there; `manifest.json` is a copy of it for people and
for releases older than format 2, which committed by renaming it.
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from typing import Iterator

from neardup_spark.errors import IndexError_
from neardup_spark.runtime.filestore import LocalStore, Store
from neardup_spark.runtime.storage import kill_point

MANIFEST = "manifest.json"
VERSIONS = "manifests"
_VERSION_FILE = re.compile(r"^v(\d{5,})\.json$")


def committed(store: Store) -> list[tuple[int, str]]:
    """(version, file name) of every version file in manifests/, oldest first."""
    return sorted((int(m.group(1)), n) for n in store.list(VERSIONS) if (m := _VERSION_FILE.match(n)))


def newest(store: Store) -> dict | None:
    """The newest committed manifest: the highest version in manifests/ (every entry there is
    whole: it was put there complete in one step), else a lone manifest.json (format 1)."""
    versions = committed(store)
    if versions:
        version, name = versions[-1]
        rel = f"{VERSIONS}/{name}"
        text = store.read_text(rel) or ""
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise IndexError_(f"{store.uri}/{rel} is not valid JSON ({len(text.encode())} bytes; {exc.msg} at "
                              f"character {exc.pos}). Commits write a version whole, so it was damaged afterwards "
                              f"(a partial copy or restore?). Nothing was changed. {_torn_hint(store, version)}") from None
    text = store.read_text(MANIFEST)
    return None if text is None else json.loads(text)


def _torn_hint(store: Store, version: int) -> str:
    """How to recover from a damaged newest version file, from what manifest.json still holds."""
    try:
        copy = json.loads(store.read_text(MANIFEST) or "")
    except ValueError:
        copy = None
    if isinstance(copy, dict) and copy.get("version") == version:
        return (f"{MANIFEST} beside it holds version {version} whole: copy it over that file to restore the index")
    return (f"Restore that file from a backup; removing it opens version {version - 1} instead, without what "
            f"version {version} added")


def current_version(store: Store) -> int:
    manifest = newest(store)
    return 0 if manifest is None else int(manifest["version"])


class ConcurrentCommitError(IndexError_):
    """Another run committed the version this one meant to; this run changed nothing."""


def commit(store: Store | str, manifest: dict, expected_version: int) -> None:
    """Make `manifest` (version expected_version + 1) the newest version, or raise
    ConcurrentCommitError and change nothing when another run got there first.

    The version file is put in one create-if-absent step (see `filestore`): of any number
    of concurrent committers of one version exactly one succeeds, and no reader ever sees
    a partial file. manifest.json is refreshed afterwards as a copy."""
    store = LocalStore(store) if isinstance(store, str) else store
    version = int(manifest["version"])
    current = current_version(store)
    if current != expected_version or version != expected_version + 1:
        raise _moved(expected_version, current)
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    if not store.put_if_absent(f"{VERSIONS}/v{version:05d}.json", text):
        raise _moved(expected_version, current_version(store))
    kill_point("after_version")  # landed; manifest.json still names the version before
    _refresh_copy(store, text, version)


@contextmanager
def part_or_nothing(store: Store, part: str) -> Iterator[None]:
    """The context writes and commits `part`: when it fails (a full disk, a refused commit),
    the part's files are removed unless a committed version lists it, so a failed run leaves
    no orphan behind (a killed one leaves its part to `vacuum`)."""
    try:
        yield
    except BaseException:
        try:
            if part not in (newest(store) or {}).get("parts", []):
                store.delete(f"parts/{part}")
        except Exception:  # noqa: BLE001 - the run's own error matters; vacuum removes the part later
            pass
        raise


def _moved(expected: int, current: int) -> ConcurrentCommitError:
    return ConcurrentCommitError(
        f"the index moved from version {expected} to {current} during this run (a concurrent append?); "
        "nothing was changed: run again"
    )


def _refresh_copy(store: Store, text: str, version: int) -> None:
    """manifest.json := the newest version, unless a later commit refreshed it already."""
    try:
        if int(json.loads(store.read_text(MANIFEST) or "{}").get("version", 0)) >= version:
            return
    except ValueError:
        pass
    store.put(MANIFEST, text)
