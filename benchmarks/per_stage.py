"""Per-stage cost table of the full runs in a scale or nightly benchmark record, as Markdown.

    .venv/bin/python -m benchmarks.per_stage benchmarks/results/scale-10200000.json

For each full `neardup run` in the record (a scale run, or a nightly re-run): per
pipeline stage, wall seconds (the report), core-milliseconds per document
(summed task time from Spark's event log over the documents; verify also per
candidate pair), shuffle bytes written per document, and bytes spilled to
disk. docs/scaling.md quotes this table; it prints, it writes nothing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

STAGES = ("read", "sketch", "exact", "band_candidates", "verify", "components", "keepers", "write")


def rows(record: dict) -> list[dict]:
    """One row per (stage, re-run size): the figures the table prints, unrounded."""
    out = []
    full = record["runs"] if "runs" in record else [size["rerun"] for size in record["sizes"] if "rerun" in size]
    for run in full:
        docs, cands = run["counts"]["documents"], run["counts"].get("candidate_pairs") or 0
        for stage in (*STAGES, "other"):
            task = run["task_seconds"].get(stage, 0.0)
            out.append({
                "stage": stage, "docs": docs,
                "wall_s": run["stage_seconds"].get(stage),
                "core_ms_per_doc": 1000 * task / docs,
                "core_ms_per_candidate": 1000 * task / cands if stage == "verify" and cands else None,
                "shuffle_b_per_doc": run["shuffle_mb"].get(stage, 0.0) * 2**20 / docs,
                "spill_disk_mb": run.get("spill_disk_mb", {}).get(stage, 0.0),
            })
    return out


def markdown(record: dict) -> str:
    table = rows(record)
    sizes = sorted({r["docs"] for r in table})
    if not sizes:
        return "(no full re-run in this record)\n"
    head = ["Stage"]
    for n in sizes:
        label = f"{n / 1e6:g}M"
        head += [f"wall s ({label})", f"core-ms / doc ({label})", f"shuffle B / doc ({label})",
                 f"spill to disk MB ({label})"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    by = {(r["stage"], r["docs"]): r for r in table}
    for stage in (*STAGES, "other"):
        cells = [stage]
        for n in sizes:
            r = by[(stage, n)]
            ms = f"{r['core_ms_per_doc']:.3f}"
            if r["core_ms_per_candidate"] is not None:
                ms += f" ({r['core_ms_per_candidate']:.3f} / candidate)"
            cells += ["-" if r["wall_s"] is None else f"{r['wall_s']:.1f}", ms, f"{r['shuffle_b_per_doc']:.0f}",
                      f"{r['spill_disk_mb']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("record", type=Path, help="a scale or nightly benchmark record (benchmarks/results/*.json)")
    text = markdown(json.loads(ap.parse_args(argv).record.read_text()))
    print(text, end="")
    return text


if __name__ == "__main__":
    main()
