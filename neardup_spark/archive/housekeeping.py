"""Housekeeping of an archive index: `compact` its parts into one, `vacuum` the files no reader needs.

A nightly index gains a part a night, and every lookup unions them all: a year
of nights is 365 unions. `compact` writes one part holding what the newest
version means (each document's live rows, its current assignment, the stored
pairs) and commits a version that lists only that part, through the same
create-if-absent commit as an append: if an append lands meanwhile, the
compaction changes nothing and says to run it again. Assignments, clusters
and every later batch's result are the same before and after.

The parts a compaction replaced stay on disk until `vacuum` removes them, with
the parts of runs that were killed before their commit (orphans). A file goes
only when no reader can still want it:

- a part the newest version lists is never touched;
- a replaced part goes once the version that replaced it is older than the
  retention (a run that opened the index before the compaction may still read
  it), an orphan once its newest file is older than the retention. A part is
  named after the version its run means to commit: one named after a version
  not committed yet may be an append still running, and it also waits a day
  (IN_FLIGHT_FLOOR) whatever the retention;
- a replaced part that holds a landed batch's own results keeps `output/`:
  re-running that batch re-emits them from there.
- in a listed part, a set file no document names (`setfiles.unreferenced`:
  a task attempt that failed, or lost to another attempt, wrote it) goes
  once it is older than the retention.

Both are safe to kill at any point: a killed compaction leaves an orphan, a
killed vacuum leaves parts that nobody reads, partly removed.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import time
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from neardup_spark import columns as C
from neardup_spark.archive import index as ix, setfiles, versions
from neardup_spark.errors import NeardupError
from neardup_spark.runtime.filestore import LocalStore
from neardup_spark.runtime.storage import kill_point

DAY = 86_400.0
# A part numbered after a version not yet committed may belong to an append still running:
# it stays at least this long (seconds), whatever the retention.
IN_FLIGHT_FLOOR = DAY
_PART_VERSION = re.compile(r"^part-(\d{5,})-")
_KEEP_FOR_REPLAY = "output"


@dataclass(frozen=True)
class Compaction:
    """What `compact` did: the version before and after, the parts replaced, the new part."""

    version_before: int
    version: int
    parts_replaced: list[str]
    part: str | None  # None: the index had one part already, nothing was written
    documents: int


@dataclass(frozen=True)
class Vacuum:
    """What `vacuum` removed (or, with dry_run, would remove), by part."""

    removed: list[str]  # whole parts
    trimmed: list[str]  # replaced parts of landed batches: all but output/ removed
    kept: list[str]  # parts not listed by the newest version but younger than the retention
    set_files: list[str]  # files of listed parts' sets/ folders that no document names (failed task attempts)


def compact(spark: SparkSession, path: str, set_layout: str = "auto") -> Compaction:
    """Rewrite the index at `path` as one part with the same meaning, committed as the next
    version, its shingle sets kept as `set_layout` says (`index.sets_folder`). An index of one
    part already in that layout is left as it is.

    Raises ConcurrentCommitError (and changes nothing) when another run commits first."""
    idx = ix.open_index(path, spark)
    version = int(idx.manifest["version"])
    part = ix.new_part_name(version + 1)
    sets = ix.sets_folder(idx.store, part, set_layout)  # "files" where it cannot be: refused now
    idx.check_sets_readable(spark)
    if len(idx.parts) == 1 and _in_files(spark, idx, idx.parts[0]) == (sets is not None):
        return Compaction(version, version, [], None, int(idx.manifest["documents"]))
    docs = idx.docs(spark)
    docs = idx.sets_of(docs, [c for c in docs.columns if c not in ix.set_columns(docs)])
    keys = None  # the build's stripped lines (boilerplate on), which every batch strips too
    if idx.store.exists(f"parts/{idx.parts[0]}/boilerplate"):
        keys = ix.read_table(spark, idx.store, f"parts/{idx.parts[0]}/boilerplate")
        if keys is None:  # stripping on, no line found: an empty table still says so
            keys = spark.createDataFrame([], "line_key long")
    stored = idx.pairs(spark)
    with versions.part_or_nothing(idx.store, part):
        ix.write_part(idx.part_path(part), docs, idx.bands(spark), idx.assignments(spark),
                      outputs={"pairs": stored} if stored is not None else None, boilerplate=keys,
                      sets=sets)
        _check_part(spark, idx, part, int(idx.manifest["documents"]))
        kill_point("before_compaction_commit")
        manifest = {
            **idx.manifest,
            "format": ix.manifest_format(sets is not None),
            "version": version + 1,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "parts": [part],
            "compacted": {"from_version": version, "parts": idx.parts},
        }
        versions.commit(idx.store, manifest, expected_version=version)
    return Compaction(version, version + 1, idx.parts, part, int(idx.manifest["documents"]))


def _in_files(spark: SparkSession, idx: ix.Index, part: str) -> bool:
    """Whether a part keeps its documents' shingle sets in files (`setfiles`)."""
    docs = ix.read_table(spark, idx.store, f"parts/{part}/docs")
    return docs is not None and setfiles.has_locator(docs.columns)


def _check_part(spark: SparkSession, idx: ix.Index, part: str, documents: int) -> None:
    """The new part holds each of the index's documents once, in docs and in assign."""
    for table in ("docs", "assign"):
        rows = ix.read_table(spark, idx.store, f"parts/{part}/{table}")
        row = rows.agg(F.count(F.lit(1)).alias("n"), F.countDistinct(C.DOC_ID).alias("ids")).first()
        if not (int(row["n"]) == int(row["ids"]) == documents):  # pragma: no cover - an invariant
            raise NeardupError(f"compaction wrote {row['n']} {table} rows ({row['ids']} ids) for {documents} "
                               f"documents; nothing was committed (the part {part} is an orphan)")


def vacuum(spark: SparkSession | None, path: str, retain_days: float = 7.0, dry_run: bool = False,
           now: float | None = None) -> Vacuum:
    """Remove the parts of the index at `path` that no reader needs (see the module doc)."""
    if retain_days < 0:
        raise NeardupError("--retain-days must be >= 0")
    idx = ix.open_index(path, spark)
    store = idx.store
    now = time.time() if now is None else now
    replaced_at = _replaced_at(store)
    batch_parts = set(idx.manifest.get("batches", {}).values())
    removed, trimmed, kept = [], [], []
    for part in store.list("parts"):
        if part in idx.parts or part.startswith((".", "_")):
            continue
        rel = f"parts/{part}"
        if not _unneeded(store, part, replaced_at, int(idx.manifest["version"]), now - retain_days * DAY, now):
            kept.append(part)
            continue
        if part in ix.open_index_store(store).parts:  # committed meanwhile (a run older than the floor)
            kept.append(part)
            continue
        if part in batch_parts:
            tables = [t for t in store.list(rel) if t != _KEEP_FOR_REPLAY]
            if not tables:
                continue
            trimmed.append(part)
            if not dry_run:
                for table in tables:
                    store.delete(f"{rel}/{table}")
        else:
            removed.append(part)
            if not dry_run:
                store.delete(rel)
    orphans = _orphan_set_files(idx, now - retain_days * DAY)
    if not dry_run:
        for rel in orphans:
            store.delete(rel)
    return Vacuum(removed, trimmed, kept, orphans)


def _orphan_set_files(idx: ix.Index, cutoff: float) -> list[str]:
    """The set files of the listed parts that no docs row names, untouched since the cutoff.
    A listed part is complete (its run's write ended before its commit): no task adds to it."""
    if not isinstance(idx.store, LocalStore):
        return []
    out = []
    for part in idx.parts:
        for name in setfiles.unreferenced(os.path.join(idx.store.root, "parts", part)):
            rel = f"parts/{part}/{setfiles.SETS}/{name}"
            mtime = idx.store.newest_mtime(rel)
            if mtime is not None and mtime < cutoff:
                out.append(rel)
    return out


def _unneeded(store, part: str, replaced_at: dict[str, float], version: int, cutoff: float, now: float) -> bool:
    """Whether an unlisted part can go: replaced before the cutoff, or never committed and untouched since it.

    A part is named after the version its run will commit (`new_part_name`). One numbered at or
    below the newest version can never be committed; one numbered above it may be an append
    still running, so it also waits IN_FLIGHT_FLOOR whatever the retention."""
    if part in replaced_at:
        return replaced_at[part] < cutoff
    newest = store.newest_mtime(f"parts/{part}")
    if newest is None:
        return False
    m = _PART_VERSION.match(part)
    if m is None or int(m.group(1)) > version:
        cutoff = min(cutoff, now - IN_FLIGHT_FLOOR)
    return newest < cutoff


def _replaced_at(store) -> dict[str, float]:
    """For each part a committed version listed and the newest does not: when the first version
    that no longer listed it was created (epoch seconds)."""
    manifests = [json.loads(store.read_text(f"{versions.VERSIONS}/{name}") or "{}")
                 for _, name in versions.committed(store)]
    out: dict[str, float] = {}
    for before, after in zip(manifests, manifests[1:]):
        gone = set(before.get("parts", [])) - set(after.get("parts", []))
        when = calendar.timegm(time.strptime(after["created_at"], "%Y-%m-%dT%H:%M:%SZ"))
        for part in gone:
            out.setdefault(part, when)
    if manifests:
        for part in manifests[-1].get("parts", []):
            out.pop(part, None)
    return out
