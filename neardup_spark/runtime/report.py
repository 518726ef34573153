"""A run's report: the figures, parameters and times of one run, frozen.

report.json is `Report.as_dict()`; `Report.summary()` is what a person reads
(the CLI prints it, and it is the report's repr in a notebook).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


WIDTH = 100  # the summary's advice is wrapped at this many characters

_ORDER = ("mode", "replayed", "neardup_spark_version", "spark_version", "lsh", "advice", "counts",
          "boilerplate", "work", "stage_seconds", "config", "sizing", "index", "plots", "wall_seconds", "output",
          "tables")


@dataclass(frozen=True, repr=False)
class Report(Mapping):
    """What a run did: written as report.json (`as_dict`), read by attribute or as the JSON's
    mapping (`report["counts"]["clusters"]`), shown as `summary()`. Frozen; `with_`
    returns an extended copy. Sections a run does not have are None and left out of the JSON.
    """

    counts: Mapping[str, int]
    stage_seconds: Mapping[str, float]
    work: Mapping[str, int] = field(default_factory=dict)
    mode: str | None = None  # "append" for a nightly batch; None for a run or an index build
    replayed: bool | None = None  # append: this batch was applied before and its output re-emitted
    neardup_spark_version: str | None = None
    spark_version: str | None = None
    lsh: Mapping[str, Any] | None = None  # the matcher's parameters (plan)
    advice: tuple | None = None  # notes on the parameters (plan.advice)
    boilerplate: Mapping[str, Any] | None = None
    config: Mapping[str, Any] | None = None
    sizing: Mapping[str, Any] | None = None  # the shuffle partitions (and driver heap) used, and why
    index: Mapping[str, Any] | None = None  # the archive index written or appended to
    plots: tuple | None = None
    wall_seconds: float | None = None
    output: str | None = None
    tables: Mapping[str, str] | None = None  # output.table: {clusters: its table name, ...}

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, _frozen(getattr(self, f.name)))

    def with_(self, **changes: Any) -> Report:
        """A copy with these sections set; stage_seconds given here are added to the present ones."""
        if "stage_seconds" in changes:
            changes["stage_seconds"] = {**self.stage_seconds, **changes["stage_seconds"]}
        return replace(self, **changes)

    def as_dict(self) -> dict:
        """The JSON's content: plain dicts and lists, sections that are None left out."""
        return {name: _plain(getattr(self, name)) for name in _ORDER if getattr(self, name) is not None}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, default=str) + "\n"

    def summary(self) -> str:
        """The figures a person reads first, in at most about 30 lines (see `summary_lines`)."""
        return "\n".join(summary_lines(self.as_dict()))

    def __repr__(self) -> str:
        return self.summary()

    def __reduce__(self):
        # Pickling and deep copies go through the JSON content (read-only mappings do not pickle).
        return _report_from, (self.as_dict(),)

    def __getitem__(self, key: str) -> Any:
        return self.as_dict()[key]

    def __iter__(self):
        return iter(self.as_dict())

    def __len__(self) -> int:
        return len(self.as_dict())


def _report_from(data: dict) -> Report:
    return Report(**data)


def _n(value: Any) -> str:
    return f"{int(value):,}" if value is not None else "-"


def _matching(lsh: Mapping[str, Any], cfg: Mapping[str, Any]) -> list[str]:
    """The matcher in a line or two: its parameters and its catch probability at the threshold."""
    if not lsh:
        return []
    if lsh.get("method") == "simhash":
        return [f"matching  SimHash, {lsh['bits']} bits, Hamming distance <= {lsh['hamming_distance']}, "
                f"{lsh['tables']} block tables"]
    if lsh.get("mode") == "containment":
        classes = lsh.get("size_classes") or []
        weakest = min((c["p_candidate_at_floor"] for c in classes), default=1.0)
        return [f"matching  containment >= {lsh['containment_threshold']}, {len(classes)} size classes of "
                f"{lsh['num_perm']} permutations; weakest catch at its floor p = {weakest:.3f}"]
    threshold = lsh.get("threshold", (cfg.get("verify") or {}).get("threshold"))
    return [f"matching  MinHash LSH, {lsh['bands']} bands x {lsh['rows']} rows of {lsh['num_perm']} permutations; "
            f"Jaccard >= {threshold}",
            f"          a pair at the threshold becomes a candidate with p = {lsh['p_candidate_at_threshold']:.3f}"]


def _times(seconds: Mapping[str, float], wall: float | None) -> str:
    parts = ", ".join(f"{name} {s:.1f} s" for name, s in seconds.items())
    return f"time      {parts}" + (f"; total {wall:.1f} s" if wall is not None else "")


def summary_lines(report: Mapping[str, Any]) -> list[str]:
    """The summary of a report.json's content (a run, an index build or a nightly append)."""
    counts = report.get("counts") or {}
    lines = []
    if report.get("mode") == "append":
        index = report.get("index") or {}
        if report.get("replayed"):
            lines.append(f"neardup: batch of {_n(counts.get('documents'))} documents applied before; its output "
                         f"was written again, index version {index.get('version')} unchanged")
        else:
            lines += [
                f"neardup: batch of {_n(counts.get('documents'))} documents appended: index version "
                f"{index.get('version')}, {_n(index.get('documents'))} documents",
                f"  new documents         {_n(counts.get('new_documents'))}",
                f"  already indexed       {_n(counts.get('already_indexed'))}",
                f"  replaced              {_n(counts.get('replaced'))}",
                f"  exact copies          {_n(counts.get('exact_duplicates'))} within the batch, "
                f"{_n(counts.get('exact_archive_matches'))} of archived texts",
                f"  candidate pairs       {_n(counts.get('candidate_pairs'))}",
                f"  verified pairs        {_n(counts.get('verified_pairs'))}",
                f"  archived documents    {_n(counts.get('archived_documents_met'))} met, "
                f"{_n(counts.get('archived_documents_changed'))} changed cluster or keeper",
            ]
    else:
        kept, removed = counts.get("clusters"), counts.get("removed")
        lines += [
            f"neardup: {_n(counts.get('documents'))} documents -> {_n(kept)} kept, {_n(removed)} removed",
            f"  exact copies          {_n(counts.get('exact_duplicates'))}",
            f"  empty texts           {_n(counts.get('empty'))}",
            f"  candidate pairs       {_n(counts.get('candidate_pairs'))}",
            f"  verified pairs        {_n(counts.get('verified_pairs'))}",
            f"  clusters              {_n(kept)}, {_n(counts.get('clusters_with_duplicates'))} with duplicates",
        ]
        lines += _keeper_checks(counts)
        bp = report.get("boilerplate") or {}
        if bp.get("enabled") and "lines" in bp:
            lines.append(f"  boilerplate           {_n(bp['lines'])} lines stripped from "
                         f"{_n(bp.get('documents_stripped'))} documents")
    lines += _matching(report.get("lsh") or {}, report.get("config") or {})
    for i, note in enumerate(report.get("advice") or []):
        lines += textwrap.wrap(str(note), WIDTH, initial_indent="advice    " if i == 0 else "          ",
                               subsequent_indent="          ")
    if report.get("stage_seconds"):
        lines.append(_times(report["stage_seconds"], report.get("wall_seconds")))
    lines += _sizing(report.get("sizing") or {})
    if report.get("tables"):
        lines.append(f"tables    {', '.join(report['tables'].values())}")
        if report.get("output"):
            lines.append(f"output    {report['output']}  (report.json)")
    elif report.get("output"):
        lines.append(f"output    {report['output']}  (report.json beside the tables)")
    elif (report.get("index") or {}).get("path"):
        lines.append(f"index     {report['index']['path']}")
    return lines


def _keeper_checks(counts: Mapping[str, Any]) -> list[str]:
    """The largest cluster, and how many removed documents match their own keeper."""
    if "largest_cluster" not in counts:
        return []
    lines = [f"  largest cluster       {_n(counts['largest_cluster'])} documents"]
    removed, verified = counts.get("removed") or 0, counts.get("removed_verified_against_keeper")
    if removed and verified is not None:
        lines.append(f"  removed, verified     {_n(verified)} of {_n(removed)} ({100 * verified / removed:.1f}%) "
                     "a verified pair or exact copy of their own keeper")
    return lines


def _sizing(sizing: Mapping[str, Any]) -> list[str]:
    """The Spark settings the run sized (or found set), as one line."""
    if not sizing:
        return []
    parts = [f"{sizing['shuffle_partitions']} shuffle partitions ({sizing.get('shuffle_partitions_from', 'set')})"]
    if sizing.get("driver_memory"):
        parts.append(f"driver {sizing['driver_memory']} ({sizing.get('driver_memory_from', 'set')})")
    return textwrap.wrap("; ".join(parts), WIDTH, initial_indent="spark     ", subsequent_indent="          ")
