"""The review page at scale: how long `neardup report` takes on a run's outputs, how big the
page is, and how long a headless browser takes to open it (against an empty page).

    PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python -m benchmarks.review --docs 1000000

Runs `neardup run` on the seeded seven-edit corpus of --docs documents (cached
under --cache, as compare.py makes it) unless the output exists, then
`neardup report OUT --html` (a whole process), then Chromium headless
`--screenshot` of the page and of an empty page, alternating, --opens times
each: the page's open time is the median difference. Prints the figures and
writes benchmarks/results/review-<docs>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.compare import RESULTS, ROOT, _corpus


def _cli(args: list[str], cwd: Path) -> float:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "neardup_spark.cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"neardup {args[0]} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def _open(browser: str, page: Path, shot: Path) -> float:
    start = time.perf_counter()
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-background-networking", "--no-first-run", "--window-size=1280,2400",
                    f"--screenshot={shot}", page.resolve().as_uri()], capture_output=True, timeout=120, check=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--opens", type=int, default=5, help="browser opens of each page (default 5)")
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "neardup-bench"))
    args = ap.parse_args(argv)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    corpus = _corpus(args.docs, cache)
    out = cache / f"review-run-{args.docs}"
    if not (out / "report.json").exists():
        _cli(["run", "--input", str(corpus), "--format", "parquet", "--output", str(out), "--overwrite",
              "--config", str(ROOT / "conf" / "local.toml"), "--master", args.master, "--quiet"], cache)
    page = cache / f"review-{args.docs}.html"
    report_seconds = _cli(["report", str(out), "--html", str(page), "--master", args.master,
                           "--config", str(ROOT / "conf" / "local.toml")], cache)
    result = {"docs": args.docs, "master": args.master, "report_process_seconds": round(report_seconds, 2),
              "page_kib": round(page.stat().st_size / 1024, 1)}
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser:
        empty = cache / "empty.html"
        empty.write_text("<!doctype html><html><body></body></html>")
        pages, blanks = [], []
        for i in range(args.opens):
            for name in (("page", "empty") if i % 2 == 0 else ("empty", "page")):
                (pages if name == "page" else blanks).append(
                    _open(browser, page if name == "page" else empty, cache / f"shot-{name}.png"))
        result.update(browser_page_seconds=round(statistics.median(pages), 3),
                      browser_empty_seconds=round(statistics.median(blanks), 3),
                      page_open_seconds=round(statistics.median(p - b for p, b in zip(pages, blanks)), 3))
    print(json.dumps(result, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"review-{args.docs}.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
