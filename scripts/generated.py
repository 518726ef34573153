"""Shared by the scripts that generate a checked-in file: write it, or (--check) say whether it is current."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable


def main(output: Path, render: Callable[[], str], description: str, argv: list[str] | None = None) -> int:
    root = Path(__file__).resolve().parents[1]
    script = Path(sys.argv[0]).name
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--check", action="store_true", help=f"exit 1 if {output.relative_to(root)} is out of date")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = output.read_text(encoding="utf-8") if output.exists() else ""
        if current != text:
            print(f"{output.relative_to(root)} is out of date: run python scripts/{script}", file=sys.stderr)
            return 1
        return 0
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    print(f"wrote {output.relative_to(root)}")
    return 0
