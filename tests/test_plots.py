"""The optional PNG plots: each writes a readable image, edge cases, and a clear error without matplotlib."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import numpy as np
import pytest

from neardup_spark.tools import plots
from neardup_spark.errors import NeardupError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# "Gracefully" includes quietly: an empty sample must not make matplotlib warn either.
pytestmark = pytest.mark.filterwarnings("error")


def assert_png(path: Path) -> np.ndarray:
    """The image at `path`, after checking it is a non-empty PNG matplotlib can read back."""
    import matplotlib.image

    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    image = matplotlib.image.imread(path)
    assert image.ndim >= 2 and image.shape[0] > 100 and image.shape[1] > 100
    assert image.std() > 0  # something was drawn, not a blank canvas
    return image


def test_s_curve_writes_a_png(tmp_path):
    out = plots.s_curve(42, 3, 0.3, tmp_path / "s_curve.png", others=[(25, 5), (9, 13)])
    assert out == tmp_path / "s_curve.png"
    assert_png(out)


def test_s_curve_creates_parent_directories_and_accepts_str_paths(tmp_path):
    target = tmp_path / "run" / "plots" / "s.png"
    out = plots.s_curve(25, 5, 0.8, str(target))
    assert out == target
    assert_png(target)


@pytest.mark.parametrize("bands, rows, threshold", [(0, 3, 0.5), (4, 0, 0.5), (4, 3, 1.5)])
def test_s_curve_rejects_impossible_parameters(tmp_path, bands, rows, threshold):
    with pytest.raises(ValueError):
        plots.s_curve(bands, rows, threshold, tmp_path / "s.png")
    assert not (tmp_path / "s.png").exists()


def test_jaccard_histogram_writes_a_png(tmp_path):
    rng = np.random.default_rng(7)
    random_pairs = rng.beta(0.5, 20, size=10_000)  # orders of magnitude more than the verified pairs
    verified = rng.uniform(0.5, 1.0, size=40)
    out = plots.jaccard_histogram(
        random_pairs, verified, tmp_path / "jaccard.png", threshold=0.5, percentiles={"p99": 0.12, "p99.9": 0.2}
    )
    assert out == tmp_path / "jaccard.png"
    assert_png(out)


@pytest.mark.parametrize(
    "random_pairs, verified",
    [
        ([], [0.6, 0.9, 1.0]),  # no random sample
        ([0.0] * 500, [0.7]),  # random pairs that share nothing, all in the first bin
        ([0.1, 0.2], []),  # nothing verified
        ([], []),  # nothing at all: every count is zero on a log axis
        (np.zeros((0,)), np.array([[0.8, 0.9]])),  # numpy input of any shape
    ],
)
def test_jaccard_histogram_edge_cases(tmp_path, random_pairs, verified):
    out = plots.jaccard_histogram(random_pairs, verified, tmp_path / "sub" / "j.png", threshold=0.5)
    assert_png(out)


@pytest.mark.parametrize("bad", [[0.2, 1.5], [-0.1], [float("nan")]])
def test_jaccard_histogram_rejects_values_outside_0_1(tmp_path, bad):
    with pytest.raises(ValueError, match="random_pairs"):
        plots.jaccard_histogram(bad, [0.9], tmp_path / "j.png")


def test_cluster_sizes_writes_a_png(tmp_path):
    counts = {2: 9000, 3: 1200, 4: 300, 7: 20, 50: 3, 1000: 1}
    out = plots.cluster_sizes(counts, tmp_path / "clusters.png")
    assert out == tmp_path / "clusters.png"
    assert_png(out)


def test_cluster_sizes_many_sizes(tmp_path):
    counts = {s: max(1, 10_000 // s**2) for s in range(2, 400)}
    assert_png(plots.cluster_sizes(counts, tmp_path / "c.png"))


@pytest.mark.parametrize("counts", [{5: 1}, {2: 123}, {1: 10}, {1: 1}, {}, {3: 0}])
def test_cluster_sizes_edge_cases(tmp_path, counts):
    """One size, sizes of 1 only, and no clusters at all."""
    assert_png(plots.cluster_sizes(counts, tmp_path / "c.png"))


@pytest.mark.parametrize("counts", [{0: 3}, {2: -1}])
def test_cluster_sizes_rejects_impossible_counts(tmp_path, counts):
    with pytest.raises(ValueError):
        plots.cluster_sizes(counts, tmp_path / "c.png")


def test_plots_are_deterministic(tmp_path):
    a = plots.s_curve(20, 5, 0.6, tmp_path / "a.png")
    b = plots.s_curve(20, 5, 0.6, tmp_path / "b.png")
    assert a.read_bytes() == b.read_bytes()


def test_figures_are_not_left_open(tmp_path):
    from matplotlib._pylab_helpers import Gcf

    before = Gcf.get_num_fig_managers()
    for i in range(3):
        plots.s_curve(10, 4, 0.5, tmp_path / f"s{i}.png")
        plots.jaccard_histogram([0.1], [0.9], tmp_path / f"j{i}.png")
        plots.cluster_sizes({2: 3}, tmp_path / f"c{i}.png")
    assert Gcf.get_num_fig_managers() == before


def test_a_configured_backend_is_left_alone(tmp_path):
    """A notebook's backend (say, inline) is not switched to Agg behind its back."""
    import matplotlib

    # Raw dict access: reading rcParams["backend"] would resolve (and fix) the automatic choice.
    before = dict.__getitem__(matplotlib.rcParams, "backend")
    dict.__setitem__(matplotlib.rcParams, "backend", "module://a_notebook_backend")
    try:
        assert_png(plots.cluster_sizes({2: 3, 3: 1}, tmp_path / "c.png"))
        assert dict.__getitem__(matplotlib.rcParams, "backend") == "module://a_notebook_backend"
    finally:
        dict.__setitem__(matplotlib.rcParams, "backend", before)


@pytest.fixture
def no_matplotlib(monkeypatch):
    """Import as if matplotlib were not installed: a None entry makes `import` raise ImportError."""
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)


def test_require_matplotlib_without_matplotlib(no_matplotlib):
    with pytest.raises(NeardupError, match=r"pip install 'neardup-spark\[plots\]'"):
        plots.require_matplotlib()


@pytest.mark.parametrize(
    "draw",
    [
        lambda p: plots.s_curve(42, 3, 0.3, p),
        lambda p: plots.jaccard_histogram([0.1], [0.9], p),
        lambda p: plots.cluster_sizes({2: 1}, p),
    ],
    ids=["s_curve", "jaccard_histogram", "cluster_sizes"],
)
def test_every_plot_needs_matplotlib(tmp_path, no_matplotlib, draw):
    with pytest.raises(NeardupError, match=r"neardup-spark\[plots\]"):
        draw(tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_require_matplotlib_returns_matplotlib():
    import matplotlib

    assert plots.require_matplotlib() is matplotlib


def test_module_imports_neither_spark_nor_matplotlib_at_import_time():
    """Pure functions on plain data, and the package still imports without the plots extra."""
    tree = ast.parse(Path(plots.__file__).read_text())
    top_level = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top_level.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            top_level.add(node.module.split(".")[0])
    assert "matplotlib" not in top_level
    everywhere = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    } | {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert "pyspark" not in everywhere
