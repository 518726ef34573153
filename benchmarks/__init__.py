"""Benchmark scripts (`python -m benchmarks.<name>`); each prints a table and
writes its record to benchmarks/results/<name>.json with `save`."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path


def machine() -> str:
    """One line naming the machine a result came from."""
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def save(result: dict, out: str | Path, filename: str) -> Path:
    """Write a benchmark's JSON record under `out` and say where."""
    path = Path(out) / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")
    return path
