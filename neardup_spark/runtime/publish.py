"""A run's outputs published as one unit: a reader finds the old output whole, the new one
whole, or none (with a marker), never tables of two runs under one report.json.

A run writes its tables, plots and report.json under a staging folder beside them
(`_neardup_staging-<id>/`) and checks them there. `Publication.commit` then switches
them in, in this order:

1. `_neardup_publishing.json` is created (only if absent) naming the staging folder
   and what moves. From here on a stop is completed by the next run writing there (`settle`);
2. the old report.json (and report/) moves aside: the output now holds no finished run;
3. each table and plot moves in, the old one moved aside first; old tables and plots
   the new run does not write (boilerplate/, plots of an earlier --plots) are moved
   aside too;
4. the new report.json moves in: the output is the new run's, whole;
5. the marker goes, then the staging folder with what was moved aside.

A stop before step 1 leaves the old output as it was (the staging folder is removed
by the next run). A stop after it leaves no report.json and the marker. Commands that
read the output say so (`pending`) and move nothing: a reader cannot tell a stopped
run from one still switching on another machine. The next run that writes the output
calls `settle` first, which does steps 2-5 again from where they stopped (each step
restartable, including a folder's move cut short on an object store, where a rename
is a copy and a delete). The staged tables had all been written and their rows
counted before step 1, so what it completes is the output the stopped run was about
to publish.

Catalog tables (output.table) cannot be moved: each `saveAsTable` replaces one table.
The marker is created and the old report withdrawn before the first of them is
saved, so between two runs' tables there is never a report; a run stopped while
saving leaves the marker, which readers report and the next run clears.

A marker is refused while the process that wrote it is alive on this host, so two
runs never switch one output at once; a second writer elsewhere is the user's to
avoid, as with any output path.

Without a filesystem the driver can reach (Spark Connect with an output at a URI)
nothing can be renamed: report/ is first replaced by a marker line, the tables are
overwritten in place, and the report is written last. A stop leaves the marker and
tables that may belong to two runs; the earlier output is gone.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Mapping

from pyspark.sql import SparkSession

from neardup_spark.errors import NeardupError
from neardup_spark.runtime import paths
from neardup_spark.runtime.filestore import Store, store_for
from neardup_spark.runtime.storage import kill_point

MARKER = "_neardup_publishing.json"
STAGING_PREFIX = "_neardup_staging-"
ASIDE = "_replaced"
REPORT = "report.json"
REPORT_DIR = "report"  # Spark Connect with a remote output: the report as a one-line text table
# What a run may have written under its output: moved aside when the new run does not write it.
OUTPUT_NAMES = ("clusters", "pairs", "deduplicated", "boilerplate")
PLOT_NAMES = ("s_curve.png", "jaccard.png", "cluster_sizes.png")  # tools.figures.write_run_plots
CLEARED = ".cleared"  # beside a name's aside copy: the old one is out of the way


class PublishError(NeardupError):
    """An output's publication was interrupted, or cannot go on."""


def output_store(spark: SparkSession | None, root: str) -> Store | None:
    """The Store of an output, or None where the driver cannot reach its files (Spark
    Connect with a remote output)."""
    try:
        return store_for(spark, root)
    except NeardupError:
        return None


def _report_text(report: Mapping) -> str:
    as_dict = getattr(report, "as_dict", None)
    return json.dumps(as_dict() if as_dict else dict(report), indent=2, default=str) + "\n"


@dataclass
class Publication:
    """One run's outputs on their way to `root` (see the module doc). Write the tables under
    `stage` (a URI Spark writes to), plots under `local_stage`, then `commit(report)`."""

    spark: SparkSession
    root: str
    store: Store | None
    mode: str  # overwrite, or errorifexists/error: an existing table is refused
    with_report: bool = True  # False: an output without report.json (an export)
    staging: str = field(default_factory=lambda: f"{STAGING_PREFIX}{uuid.uuid4().hex[:12]}")
    marked: bool = False

    @property
    def stage(self) -> str:
        """Where the run writes what it publishes: the staging folder, or the output itself
        where nothing can be moved (no Store)."""
        base = self.root.rstrip("/")
        return base if self.store is None else f"{base}/{self.staging}"

    def tables_root(self) -> str:
        """Where Spark writes the tables now: `stage`; where that is the output itself, its
        old report is withdrawn first (so no report ever describes tables being replaced)."""
        if self.store is None:
            self.withdraw()
        return self.stage

    @property
    def local_stage(self) -> str:
        """`stage` as a local path (plots are written with matplotlib)."""
        return paths.local_path(self.stage)

    def withdraw(self, tables: list[str] | None = None, names: list[str] | None = None) -> None:
        """Steps 1-2: the marker, then the old report out of sight. Called by `commit`, or before
        catalog `tables` are saved (they cannot be staged)."""
        if self.marked:
            return
        if self.store is None:
            # Overwriting in place: report/ first says the tables are being replaced. Otherwise
            # Spark refuses existing tables before writing anything, and the report stays.
            if self.mode == "overwrite" and self.with_report:
                _write_report_dir(self.spark, self.root, {"publishing": self._marker(tables or [], [])})
            self.marked = True
            return
        if not self.store.put_if_absent(MARKER, json.dumps(self._marker(tables or [], names or [])) + "\n"):
            raise PublishError(f"another run is publishing its output to {self.root} right now; run this one "
                               "again when it has finished")
        self.marked = True
        kill_point("publish:marked")
        for name in (REPORT, REPORT_DIR):
            _move_aside(self.store, name, self.staging)
        kill_point("publish:withdrawn")

    def _marker(self, tables: list[str], names: list[str]) -> dict:
        return {"staging": self.staging, "names": names, "tables": tables, "host": socket.gethostname(),
                "pid": os.getpid(),
                "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    def commit(self, report: Mapping | None, expect: list[str] = ()) -> None:
        """Steps 1-5: switch the staged tables and plots in, report.json last (none for a
        report-less output such as an export). `expect`: the tables Spark staged, which this
        process must see before anything moves."""
        if self.store is None:
            self.withdraw()
            if report is not None:
                _write_report_dir(self.spark, self.root, report)
            return
        staged = [n for n in self.store.list(self.staging) if n != ASIDE]
        unseen = [n for n in expect if n not in staged]
        if unseen:
            raise PublishError(f"Spark wrote {unseen[0]}/ under {self.stage}, but this process does not see it there: "
                               "give an output path that both reach (shared storage, or a URI)")
        if self.mode != "overwrite":
            there = [n for n in staged if self.store.exists(n)]
            if there:
                raise PublishError(f"output {self.root.rstrip('/')}/{there[0]} already exists; pass --overwrite to "
                                   "replace it")
        if report is not None:
            self.store.put(f"{self.staging}/{REPORT}", _report_text(report))
        kill_point("publish:staged")  # everything staged and checked; the old output untouched
        if self.marked:  # catalog tables were saved after the marker: the rest can now be completed
            self.store.put(MARKER, json.dumps(self._marker([], staged)) + "\n")
        self.withdraw(names=staged)
        _switch(self.store, self.staging, staged)

    def abort(self) -> None:
        """The run failed before its commit: its staging folder goes. After the marker, the
        marker stays (the next run settles it)."""
        if self.store is not None and not self.marked:
            try:
                self.store.delete(self.staging)
            except Exception:  # noqa: BLE001 - a leftover staging folder is removed by the next run
                pass


def _switch(store: Store, staging: str, names: list[str]) -> None:
    """Steps 2-5 from wherever they stopped (idempotent): every staged name (of `names`, what
    the run publishes) moves in, the old one aside first; outputs of ours the run does not
    write move aside; the report last; then the marker and the staging folder go."""
    report_staged = store.exists(f"{staging}/{REPORT}")
    if report_staged:  # the new report is not in yet: a report there is the old one
        for name in (REPORT, REPORT_DIR):
            _move_aside(store, name, staging)
    for name in names:
        if name == REPORT or not store.exists(f"{staging}/{name}"):
            continue  # the report goes last; a name already moved in stays
        _move_in(store, staging, name)
        kill_point(f"publish:{name}")
    if report_staged:
        for name in store.list(""):
            if name in (*OUTPUT_NAMES, *PLOT_NAMES) and name not in names:
                _move_aside(store, name, staging)
        store.rename(f"{staging}/{REPORT}", REPORT)
    kill_point("publish:reported")
    store.delete(MARKER)
    kill_point("publish:unmarked")
    try:
        store.delete(staging)
    except Exception:  # noqa: BLE001 - a leftover staging folder is removed by the next run
        pass


def _move_in(store: Store, staging: str, name: str) -> None:
    """staging/name to name, the old name moved aside first; restartable after a stop anywhere.

    On object stores a folder's rename is a copy, then a delete: a stop can leave a partial
    copy at `name` (all its files still staged) or a whole copy there with some staged files
    left. A file under the aside folder says the old table is gone, so whatever is at `name`
    after it is this run's."""
    staged, cleared = f"{staging}/{name}", f"{staging}/{ASIDE}/{name}{CLEARED}"
    if not store.exists(cleared):
        _move_aside(store, name, staging)
        store.put(cleared, "")
    elif store.exists(name):  # this run's move, cut short
        if set(store.list(name)) <= set(store.list(staged)):
            store.delete(name)  # the copy was partial: copy again
        else:
            store.delete(staged)  # the copy was whole; what is left staged is its source's remains
            return
    store.rename(staged, name)


def _move_aside(store: Store, name: str, staging: str) -> None:
    """name to the aside folder (anything there by that name, a stopped earlier move's, goes)."""
    if store.exists(name):
        store.mkdirs(f"{staging}/{ASIDE}")
        aside = f"{staging}/{ASIDE}/{name}"
        if store.exists(aside):
            store.delete(aside)
        store.rename(name, aside)


def _write_report_dir(spark: SparkSession, root: str, report: Mapping) -> None:
    as_dict = getattr(report, "as_dict", None)
    line = json.dumps(as_dict() if as_dict else dict(report), default=str)
    spark.createDataFrame([(line,)], "value string").coalesce(1).write.mode("overwrite").text(
        f"{root.rstrip('/')}/{REPORT_DIR}")


def read_marker(store: Store) -> dict | None:
    """The marker of a publication in progress or stopped, or None. A marker that does not
    parse (cut short where a filesystem has no atomic overwrite) reads as one that cannot be
    completed."""
    text = store.read_text(MARKER)
    if text is None:
        return None
    try:
        marker = json.loads(text)
    except ValueError:
        marker = None
    if not isinstance(marker, dict) or not isinstance(marker.get("staging"), str):
        return {"staging": None, "names": [], "tables": [], "damaged": True}
    return marker


def _alive_here(marker: dict) -> bool:
    """The marker's run is a live process on this host (it is publishing right now)."""
    if marker.get("host") != socket.gethostname() or not isinstance(marker.get("pid"), int):
        return False
    if marker["pid"] == os.getpid():
        return False
    try:
        os.kill(marker["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _live(marker: dict, root: str) -> PublishError | None:
    if not _alive_here(marker):
        return None
    return PublishError(f"a run (pid {marker['pid']}) is publishing its output to {root} right now; try again when "
                        f"it has finished (if no run is, remove {root.rstrip('/')}/{MARKER})")


def pending(spark: SparkSession | None, root: str) -> str | None:
    """For a command that reads an output: None when no publication is pending there, else a
    sentence saying why the output is not whole yet. Readers never move anything: a reader on
    one machine cannot tell a stopped run from one still switching on another."""
    store = output_store(spark, root)
    marker = read_marker(store) if store is not None else None
    if marker is None:
        return None
    live = _live(marker, root)
    if live is not None:
        raise live
    if marker.get("damaged"):
        return (f"a run stopped while publishing its output here and its marker {MARKER} is damaged: run it again "
                "with --overwrite")
    if marker.get("tables"):
        return (f"the run that wrote {root} stopped while saving its catalog tables ({', '.join(marker['tables'])}): "
                "they may come from two runs; run it again with --overwrite")
    return (f"the run that wrote {root} stopped while publishing its output: the next run writing there completes "
            "it (the same command again, or any run with --overwrite)")


def settle(spark: SparkSession | None, root: str) -> None:
    """For a command about to write an output: complete the publication a stopped run left
    at `root` (see the module doc), or, where that cannot be done (catalog tables stopped
    between two saves, a damaged marker), remove its marker: this run replaces that output."""
    store = output_store(spark, root)
    marker = read_marker(store) if store is not None else None
    if marker is None:
        return
    live = _live(marker, root)
    if live is not None:
        raise live
    staging = marker.get("staging")
    if marker.get("damaged") or marker.get("tables") or not store.exists(staging):
        store.delete(MARKER)
        if staging:
            store.delete(staging)
        return
    _switch(store, staging, marker.get("names") or [])


def remove_leftovers(spark: SparkSession | None, root: str, prefixes: tuple[str, ...]) -> None:
    """Remove the folders under root whose names start with `prefixes` (what killed runs of
    ours leave), never anything else, and never a staging folder a marker names."""
    store = output_store(spark, root)
    if store is None:
        return
    names = store.list("")
    if not names:
        return
    named = read_marker(store)["staging"] if MARKER in names else None
    for name in names:
        if name.startswith(prefixes) and name != named and name != MARKER:
            store.delete(name)


@contextmanager
def publishing(spark: SparkSession, root: str, mode: str, leftovers: tuple[str, ...] = (),
               with_report: bool = True) -> Iterator[Publication]:
    """A Publication to `root`: a stopped earlier one settled first, leftovers of killed runs
    removed; on an error before its commit, the staged files are removed and the output is
    as it was."""
    settle(spark, root)
    remove_leftovers(spark, root, (STAGING_PREFIX, *leftovers))
    pub = Publication(spark, root, output_store(spark, root), mode, with_report)
    try:
        yield pub
    except BaseException:
        pub.abort()
        raise


@contextmanager
def publishing_if(spark: SparkSession, root: str | None, mode: str, leftovers: tuple[str, ...] = ()
                  ) -> Iterator[Publication | None]:
    """`publishing(...)` to `root`, or None without a root (a library call whose tables stay
    where the job keeps them, e.g. an index part)."""
    if not root:
        yield None
        return
    with publishing(spark, root, mode, leftovers) as pub:
        yield pub


def pending_note(report: dict | None) -> str | None:
    """For a report read from report/ (Spark Connect, remote output): the marker line a
    stopped publication left, said as a sentence, or None for a finished run's report."""
    if isinstance(report, dict) and "publishing" in report:
        return "the run that was replacing this output stopped before it finished: its tables may come from two " \
               "runs; run it again with --overwrite"
    return None


__all__ = ["MARKER", "Publication", "PublishError", "pending", "publishing", "publishing_if", "remove_leftovers",
           "settle"]
