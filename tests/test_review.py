"""The review page: one self-contained HTML file, rendered by a real headless browser."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from neardup_spark import api, cli
from neardup_spark.tools.review import side_by_side

SAMPLE = str(Path(api.SAMPLE))
# Hosts Chromium itself may call at start-up (component updates, variations): not the page's.
BROWSER_OWN = re.compile(r"https?://([a-z0-9-]+\.)*(google\.com|googleapis\.com|gvt1\.com|gstatic\.com)/")


@pytest.fixture(scope="module")
def page(spark, tmp_path_factory):
    work = tmp_path_factory.mktemp("review")
    out = work / "out"
    rc = cli.main(["run", "--input", SAMPLE, "--format", "jsonl", "--output", str(out), "--shuffle-partitions", "2",
                   "--quiet"])
    assert rc == 0
    target = work / "review.html"
    assert cli.main(["report", str(out), "--html", str(target), "--shuffle-partitions", "2"]) == 0
    return out, target


def test_the_page_is_self_contained_and_shows_the_run(page):
    out, target = page
    text = target.read_text()
    report = json.loads((out / "report.json").read_text())
    c = report["counts"]
    assert f"{c['documents']:,} documents -&gt; {c['clusters']:,} kept" in text
    for banned in ("<script", "<link", "<iframe", "<img", "src=", "href=", "url(", "@import"):
        assert banned not in text.lower(), banned  # nothing the browser would fetch
    assert text.count("<svg") == 3  # S-curve, histograms, cluster sizes
    assert f"threshold {report['lsh']['threshold']:g}" in text
    assert "<del>" in text and "<ins>" in text  # sampled pairs with their differences
    assert "Largest clusters" in text and "random pairs" in text
    assert len(text) < 400_000


def test_the_library_returns_the_same_page(spark, page):
    out, target = page
    assert api.review_page(spark, str(out)) == target.read_text()  # seeded samples: the same page


def test_a_containment_run_has_no_jaccard_threshold_line(spark, tmp_path):
    out = tmp_path / "out"
    assert cli.main(["run", "--input", SAMPLE, "--format", "jsonl", "--output", str(out), "--mode", "containment",
                     "--shuffle-partitions", "2", "--quiet"]) == 0
    text = api.review_page(spark, str(out))
    assert "no Jaccard threshold: pairs were accepted by containment" in text
    assert "threshold 0." not in text and "class 0:" in text  # a curve per size class, no threshold line


def test_the_farthest_member_of_the_largest_clusters_is_shown(spark, tmp_path):
    # Chains (neighbours ~0.47 Jaccard, two apart ~0.16): components remove members unlike
    # their keeper, and the page flags them (keeper linkage removes none: test_linkage.py).
    import pandas as pd

    from neardup_spark.tools import corpus

    rows = pd.DataFrame(corpus.chains(n_chains=4, unrelated=2))[["id", "text"]]
    rows.to_json(tmp_path / "chains.jsonl", orient="records", lines=True)
    out = tmp_path / "out"
    assert cli.main(["run", "--input", str(tmp_path / "chains.jsonl"), "--format", "jsonl", "--output", str(out),
                     "--linkage", "components", "--shuffle-partitions", "2", "--quiet"]) == 0
    text = api.review_page(spark, str(out))
    assert "Farthest members of the largest clusters" in text
    shown = re.findall(r"<b>Jaccard ([0-9.]+)</b>(?: · <b>below the threshold</b>)? · cluster", text)
    assert shown
    below = text.count("<b>below the threshold</b>")
    assert 0 < below <= len(shown) and min(map(float, shown)) < 0.3


def test_side_by_side_marks_words_on_each_side():
    left, right = side_by_side("a b c d <x>", "a b z d <x> e")
    assert left == "a b <del>c</del> d &lt;x&gt;" and right == "a b <ins>z</ins> d &lt;x&gt; <ins>e</ins>"
    long = " ".join(f"w{i}" for i in range(100))
    left, _ = side_by_side(long, long + " end", context=5)
    assert "… 90 same words …" in left


def _browser() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _png_pixels(path: Path) -> bytes:
    """The decompressed scanlines of a PNG (filter bytes included): enough to tell blank from drawn."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat = 8, b""
    while at < len(data):
        size, kind = struct.unpack(">I4s", data[at:at + 8])
        if kind == b"IDAT":
            idat += data[at + 8:at + 8 + size]
        at += 12 + size
    return zlib.decompress(idat)


@pytest.mark.skipif(_browser() is None, reason="no chromium (scripts/browser.sh installs it as root with apt-get)")
def test_a_headless_browser_draws_the_page_without_any_request(page, tmp_path):
    _, target = page
    shot, net = tmp_path / "shot.png", tmp_path / "net.json"
    proc = subprocess.run(
        [_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--no-first-run",
         "--hide-scrollbars", "--window-size=1280,2400", f"--screenshot={shot}", f"--log-net-log={net}",
         target.resolve().as_uri()],
        capture_output=True, text=True, timeout=120)
    assert shot.exists(), proc.stderr[-2000:]
    pixels = _png_pixels(shot)
    drawn = sum(1 for b in pixels[::7] if b < 200)  # dark-ish bytes: text, bars, curves
    assert drawn > 0.005 * len(pixels[::7]), "the screenshot is blank"
    urls = set(re.findall(r'"url":"([^"]+)"', net.read_text(errors="replace")))
    fetched = {u for u in urls if not u.startswith(("file:", "data:", "about:", "chrome:")) and not BROWSER_OWN.match(u)}
    assert fetched == set(), fetched
