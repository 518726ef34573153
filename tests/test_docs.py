"""The user documentation: generated pages in sync, the README short and runnable, links alive.

Pure Python, no Spark: the generators run as the user runs them (`--check`).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))

# The two fresh-machine commands: CI and users copy them from the README as they are.
SAMPLE_COMMAND = (
    "./scripts/setup.sh && .venv/bin/neardup run --input neardup_spark/data/sample.jsonl.gz --format jsonl "
    "--output out/sample --overwrite"
)
TEST_COMMAND = "./scripts/test.sh"


def _run(script: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / script), "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_configuration_reference_is_current():
    proc = _run("config_reference.py")
    assert proc.returncode == 0, proc.stderr + proc.stdout


def test_architecture_lists_every_module():
    proc = _run("module_list.py")
    assert proc.returncode == 0, proc.stderr + proc.stdout


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="the newest results file is told by git history")
def test_benchmarks_table_is_current():
    proc = _run("benchmarks_table.py")
    assert proc.returncode == 0, proc.stderr + proc.stdout


def test_readme_is_under_1500_words():
    words = len(README.read_text(encoding="utf-8").split())
    assert words < 1500, f"README.md has {words} words; move detail into docs/"


def test_readme_has_the_two_fresh_machine_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert SAMPLE_COMMAND in lines
    assert TEST_COMMAND in lines


def test_the_fresh_machine_commands_name_files_that_exist():
    for path in ("scripts/setup.sh", "scripts/test.sh", "neardup_spark/data/sample.jsonl.gz"):
        assert (ROOT / path).exists(), path


def _prose(text: str, inline: bool = True) -> str:
    """Markdown without fenced code blocks (and, with `inline`, without inline code)."""
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text) if inline else text


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.name)
def test_no_first_person_singular(page: Path):
    found = [line for line in _prose(page.read_text(encoding="utf-8")).splitlines() if re.search(r"\bI\b", line)]
    assert not found, f"{page.name}: {found[:3]}"


def test_prose_helper_drops_code():
    assert _prose("a `I` b\n```text\nI ran\n```\nc").split() == ["a", "b", "c"]


_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _relative_links(page: Path) -> list[str]:
    links = _LINK.findall(_prose(page.read_text(encoding="utf-8")))
    return [link for link in links if not re.match(r"^[a-z][a-z0-9+.-]*:", link, re.I) and not link.startswith("#")]


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown page."""
    out = set()
    for line in _prose(page.read_text(encoding="utf-8"), inline=False).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(slug)
    return out


@pytest.mark.parametrize("page", [README, *DOCS, ROOT / "BENCHMARKS.md", ROOT / "CHANGELOG.md"], ids=lambda p: p.name)
def test_relative_links_point_at_existing_files(page: Path):
    broken = []
    for link in _relative_links(page):
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            broken.append(link)
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(link)
    assert not broken, f"{page.name}: broken links {broken}"


def test_readme_links_every_docs_page():
    text = README.read_text(encoding="utf-8")
    missing = [p.name for p in DOCS if f"docs/{p.name}" not in text]
    assert not missing, f"README.md does not link {missing}"
