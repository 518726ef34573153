"""Write the module list of docs/architecture.md from the package tree.

    python scripts/module_list.py           # (re)write the list between the markers
    python scripts/module_list.py --check   # exit 1 if the page's list is not what this writes

Each module is listed with the first sentence of its docstring, folder by folder, so
the page names every module there is and no module that is gone.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "neardup_spark"
PAGE = ROOT / "docs" / "architecture.md"
START, END = "<!-- modules: written by scripts/module_list.py -->", "<!-- modules: end -->"


def summary(path: Path) -> str:
    """The first sentence of a module's docstring ("" when it has none)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[: end + 1]


def module_list() -> str:
    lines = []
    folders = sorted({p.parent for p in PACKAGE.rglob("*.py")}, key=lambda d: (d != PACKAGE, str(d)))
    for folder in folders:
        rel = folder.relative_to(ROOT).as_posix()
        lines.append(f"\n**`{rel}/`**\n")
        for path in sorted(folder.glob("*.py")):
            if path.name == "__init__.py" and folder != PACKAGE and not summary(path):
                continue
            lines.append(f"- `{path.name}`: {summary(path) or '(no docstring)'}")
    return "\n".join(lines).lstrip("\n") + "\n"


def written(page: str) -> str:
    if START not in page or END not in page:
        raise SystemExit(f"{PAGE} has no {START} ... {END} markers")
    head, rest = page.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n\n{module_list()}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    page = PAGE.read_text(encoding="utf-8")
    want = written(page)
    if args.check:
        if want != page:
            print(f"{PAGE.relative_to(ROOT)} lists other modules than the tree: run python scripts/module_list.py",
                  file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(want, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
