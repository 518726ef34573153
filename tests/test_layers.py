"""The package's layers import one way (see docs/architecture.md).

entry points -> api -> tools, archive -> stages -> runtime, plan -> kernels,
with the leaves (config, columns, errors, version) importable from anywhere
and importing only each other. Every import is checked, the ones inside
functions included: a lazy import against the direction is still a cycle,
only hidden.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "neardup_spark"

LEAVES = {"config", "columns", "errors", "flags", "terminal", "version"}
# Higher imports lower; equal ranks may import each other within one folder.
RANKS = {
    "leaf": 0,
    "kernels": 1,
    "plan": 2,  # what a run derives from its config: built from kernels' maths, read by stages
    "runtime": 2,
    "stages": 3,
    "archive": 4,
    "tools": 4,
    "api": 5,
    "entry": 6,
}
# worker_daemon is started by Spark (`python -m`), as the CLI is by a user.
ENTRY = {"cli", "__main__", "__init__", "worker_daemon"}


def layer_of(module: str) -> str:
    """The layer of a dotted module name inside neardup_spark ("neardup_spark.stages.read" -> "stages")."""
    parts = module.split(".")[1:]
    if not parts:
        return "entry"  # the package itself: its __init__ re-exports the api
    head = parts[0]
    if head in LEAVES:
        return "leaf"
    if head in ENTRY:
        return "entry"
    if head in ("api", "plan"):
        return head
    if head == "archives":  # the Archive object: beside api, built on it
        return "api"
    if head in RANKS:
        return head
    raise AssertionError(f"neardup_spark.{head} belongs to no layer; add it to tests/test_layers.py")


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every import of the package in a file, lazy ones included.
    `from neardup_spark.x import y` counts as importing neardup_spark.x.y when y is a module."""
    tree = ast.parse(path.read_text(), str(path))
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "neardup_spark"]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            if target.split(".")[0] != "neardup_spark":
                continue
            for a in node.names:
                sub = PACKAGE.parent / f"{target}.{a.name}".replace(".", "/")
                is_module = sub.is_dir() or sub.with_suffix(".py").exists()
                found.append((node.lineno, f"{target}.{a.name}" if is_module else target))
    return sorted(set(found))


def violations() -> list[str]:
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        src = module_name(path)
        src_layer = layer_of(src)
        for line, target in imports(path):
            dst_layer = layer_of(target)
            if src_layer == "leaf":
                ok = dst_layer == "leaf"
            elif dst_layer == "leaf":
                ok = True
            elif RANKS[dst_layer] < RANKS[src_layer]:
                ok = True
            else:
                ok = dst_layer == src_layer
            if not ok:
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {src_layer} {src} imports "
                           f"{dst_layer} {target}")
    return bad


def test_every_import_goes_down_the_layers():
    assert violations() == []


# The command line is a shell over the api: it may reach the api, the leaves and the progress
# stream, nothing under them. (`worker_daemon` is Spark's entry point, not a user's.)
SHELLS = {"neardup_spark.cli", "neardup_spark.__main__", "neardup_spark"}
SHELL_MAY_IMPORT = {"neardup_spark.api", "neardup_spark.archives", "neardup_spark.cli", "neardup_spark.runtime.progress"}


def test_entry_points_import_only_the_api_the_leaves_and_progress():
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if module_name(path) not in SHELLS:
            continue
        for line, target in imports(path):
            if layer_of(target) != "leaf" and target not in SHELL_MAY_IMPORT:
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {target}")
    assert bad == []


def test_the_public_names_are_one_list_and_the_cli_uses_only_them():
    import re

    import neardup_spark
    from neardup_spark import api

    assert len(set(neardup_spark.__all__)) == len(neardup_spark.__all__)
    missing = [n for n in neardup_spark.__all__ if not hasattr(neardup_spark, n)]
    assert missing == []
    called = set(re.findall(r"\bapi\.(\w+)", (PACKAGE / "cli.py").read_text()))
    assert called and called <= set(neardup_spark.__all__), called - set(neardup_spark.__all__)
    assert all(getattr(neardup_spark, n) is getattr(api, n) for n in called)


def test_kernels_never_import_pyspark():
    bad = []
    for path in sorted((PACKAGE / "kernels").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad += [f"{path.name}:{node.lineno}: {n}" for n in names if n.split(".")[0] == "pyspark"]
    assert bad == []


@pytest.mark.parametrize("source, expected", [
    ("from neardup_spark.stages import read\n", "neardup_spark.stages.read"),
    ("def f():\n    from neardup_spark.archive.index import open_index\n", "neardup_spark.archive.index"),
    ("from neardup_spark import columns as C\n", "neardup_spark.columns"),
])
def test_the_walk_sees_every_form_of_import(tmp_path, monkeypatch, source, expected):
    # The checker must see lazy imports and package-relative forms, or it passes by seeing nothing.
    fake = PACKAGE / "kernels" / "hashing.py"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: source)
    assert [t for _, t in imports(fake)] == [expected]


def test_an_upward_import_is_caught(monkeypatch):
    real = Path.read_text

    def read(self, *a, **k):
        if self.name == "hashing.py" and self.parent.name == "kernels":
            return "def f():\n    from neardup_spark.stages.pipeline import run\n"
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "read_text", read)
    assert any("kernels/hashing.py:2" in v for v in violations())


# The match chain's stage functions: a second caller besides the chain would be a second pipeline.
CHAIN_ONLY = {
    "neardup_spark.stages.exact": {"exact_copies", "exact_edges"},
    "neardup_spark.stages.banding": {"representatives"},
    "neardup_spark.stages.candidates": {"candidate_pairs", "representative_pairs"},
    "neardup_spark.stages.verify": {"verify"},
    "neardup_spark.stages.sketch": {"sketch"},
    "neardup_spark.stages.keepers": {"choose_keepers"},
}


def test_the_nightly_append_runs_the_pipelines_chain():
    # Rule 2 of docs/architecture.md: the append calls `pipeline.match` (with its archive as
    # an extra side), it does not chain exact -> candidates -> verify again itself.
    outside = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name == "stages" or path.name == "worker_daemon.py":
            continue
        outside += [f"{path.relative_to(PACKAGE.parent)}:{line}: {name}" for line, name in chain_calls(path)]
    assert outside == []


def chain_calls(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every chain stage function a file reaches: imported by name
    (`from neardup_spark.stages.verify import verify`), or through its module
    (`from neardup_spark.stages import verify` or `import neardup_spark.stages.verify`, then
    `verify.verify(...)`)."""
    tree = ast.parse(path.read_text())
    found, modules = [], {}  # local name -> chain module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in CHAIN_ONLY:
            found += [(node.lineno, a.name) for a in node.names if a.name in CHAIN_ONLY[node.module]]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if f"{node.module}.{a.name}" in CHAIN_ONLY:
                    modules[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in CHAIN_ONLY:
                    modules[a.asname or a.name] = a.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner = ast.unparse(node.value)
            if owner in modules and node.attr in CHAIN_ONLY[modules[owner]]:
                found.append((node.lineno, node.attr))
    return sorted(found)


@pytest.mark.parametrize("source", [
    "from neardup_spark.stages.verify import verify\n",
    "from neardup_spark.stages import verify\nverify.verify(x)\n",
    "from neardup_spark.stages import verify as v\nv.verify(x)\n",
    "import neardup_spark.stages.verify\nneardup_spark.stages.verify.verify(x)\n",
])
def test_the_chain_guard_sees_every_way_to_reach_a_stage(monkeypatch, source):
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: source)
    assert [name for _, name in chain_calls(PACKAGE / "api.py")] == ["verify"]


def test_the_components_choice_lives_in_the_components_stage():
    # Driver or Spark, and "a group of nodes counts as one" (the nightly append's archived
    # clusters), are decided in stages/components.py only: nobody else solves a graph in numpy.
    users = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).as_posix() in ("stages/components.py", "kernels/graph.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "neardup_spark.kernels.graph":
                users += [f"{path.relative_to(PACKAGE.parent)}: {a.name}" for a in node.names
                          if a.name == "driver_components"]
    assert users == []


def test_no_two_modules_import_each_other():
    # Within a layer modules may import each other's names, but never in a circle: a reader
    # follows a stage down, never round.
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        src = module_name(path)
        graph[src] = {t for _, t in imports(path) if t != src and t.split(".")[1:2] != ["__init__"]}
    names = set(graph)
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if nxt not in names or nxt == "neardup_spark":
                continue
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(trail[trail.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for node in sorted(names):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_notebooks_use_public_names_only():
    # The notebooks are what users copy: they import `neardup_spark`'s public names, never a module under it.
    import neardup_spark

    bad = []
    for path in sorted((PACKAGE.parent / "notebooks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("neardup_spark"):
                names = [a.name for a in node.names]
                if node.module != "neardup_spark" or not set(names) <= set(neardup_spark.__all__):
                    bad.append(f"{path.name}:{node.lineno}: from {node.module} import {', '.join(names)}")
            elif isinstance(node, ast.Import):
                bad += [f"{path.name}:{node.lineno}: import {a.name}" for a in node.names
                        if a.name.startswith("neardup_spark")]
    assert bad == []


def test_docs_use_public_names_only():
    # README and the user docs (not the architecture page, which maps the internals) show code
    # with `neardup_spark.NAME` for a public name, and import nothing from a module under it.
    import re

    import neardup_spark

    # Not code to copy: the wheel renamed for --py-files, the list itself, and the module a Spark
    # setting names (spark.python.daemon.module).
    allowed = {"zip", "__all__", "worker_daemon"}
    bad = []
    pages = [PACKAGE.parent / "README.md", *sorted((PACKAGE.parent / "docs").glob("*.md"))]
    for page in pages:
        if page.name == "architecture.md":
            continue
        text = page.read_text(encoding="utf-8")
        for m in re.finditer(r"\bneardup_spark\.([A-Za-z_]\w*)", text):
            if m.group(1) not in {*neardup_spark.__all__, *allowed}:
                bad.append(f"{page.name}: neardup_spark.{m.group(1)}")
        for m in re.finditer(r"from neardup_spark import (?:\(([^)]*)\)|([\w, ]+))", text):
            names = {n.strip() for n in (m.group(1) or m.group(2)).split(",")} - {""}
            bad += [f"{page.name}: from neardup_spark import {n}" for n in names if n not in neardup_spark.__all__]
    assert bad == []
