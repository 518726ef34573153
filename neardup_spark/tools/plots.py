"""Optional PNG plots for `neardup run --plots` and `neardup calibrate`, written next to report.json.

Three pictures a user needs to trust a run's parameters: the LSH S-curve of the
chosen (bands, rows), the Jaccard of random pairs against verified pairs (is the
threshold in the gap between them?), and the distribution of cluster sizes.

Inputs are plain Python/numpy summaries the driver already holds (a sample of
Jaccards, size -> count), so this module needs no Spark and is testable alone.
matplotlib is an optional extra, imported only when a plot is drawn. Figures are
drawn through the object-oriented API on an Agg canvas of their own: headless,
never registered with pyplot (nothing to leak across many calls), and a
notebook's chosen backend is left as it was.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from neardup_spark.errors import NeardupError
from neardup_spark.kernels.lsh import candidate_probability, s_star

INSTALL_HINT = "pip install 'neardup-spark[plots]'"
FIGSIZE = (7.0, 4.5)
DPI = 100
JACCARD_BINS = 50


def require_matplotlib() -> ModuleType:
    """The matplotlib module, or a NeardupError saying how to install it."""
    try:
        import matplotlib
        import matplotlib.backends.backend_agg  # the canvas every plot renders on
        import matplotlib.figure
    except ImportError:
        raise NeardupError(f"plots need matplotlib, which is not installed: {INSTALL_HINT}") from None
    return matplotlib


@contextmanager
def _png(path: str | os.PathLike) -> Iterator[Any]:
    """Yield the axes of a new figure; on exit save the figure as a PNG at `path` and free it."""
    mpl = require_matplotlib()
    # A bare Figure on its own Agg canvas, not pyplot: rendering is headless whatever
    # backend is configured, and pyplot's figure registry never holds a reference.
    fig = mpl.figure.Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    mpl.backends.backend_agg.FigureCanvasAgg(fig)
    try:
        yield fig.add_subplot()
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, format="png")
    finally:
        fig.clear()


def s_curve(
    bands: int, rows: int, threshold: float, path: str | os.PathLike, others: Sequence[tuple[int, int]] = ()
) -> Path:
    """PNG of P(candidate) = 1 - (1 - s**rows)**bands over Jaccard s in [0, 1].

    Marks the verification threshold (with the probability there) and S*; each
    (bands, rows) in `others` is drawn as a thin curve for comparison."""
    for b, r in ((bands, rows), *others):
        if b < 1 or r < 1:
            raise ValueError(f"bands and rows must be >= 1, got bands={b}, rows={r}")
    p_threshold = candidate_probability(threshold, bands, rows)  # also checks threshold is in [0, 1]
    xs = np.linspace(0.0, 1.0, 201)
    with _png(path) as ax:
        for b, r in others:
            ax.plot(xs, _curve(xs, b, r), lw=0.8, alpha=0.6, label=f"b={b}, r={r}")
        ax.plot(xs, _curve(xs, bands, rows), lw=2.2, color="C0", label=f"b={bands}, r={rows} (used)")
        ax.axvline(threshold, color="C3", ls="--", lw=1.2, label=f"threshold {threshold:g}")
        ax.annotate(
            f"P = {p_threshold:.3f}",
            (threshold, p_threshold),
            xytext=(8, -14),
            textcoords="offset points",
            color="C3",
        )
        star = s_star(bands, rows)
        ax.plot([star], [candidate_probability(star, bands, rows)], "o", color="k", label=f"S* = {star:.3f}")
        ax.set(xlim=(0, 1), ylim=(-0.02, 1.02), xlabel="Jaccard similarity s", ylabel="P(candidate pair)")
        ax.set_title(f"LSH S-curve: b={bands} bands x r={rows} rows ({bands * rows} permutations)")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize="small")
    return Path(path)


def _curve(xs: np.ndarray, bands: int, rows: int) -> list[float]:
    return [candidate_probability(float(s), bands, rows) for s in xs]


def jaccard_histogram(
    random_pairs: Sequence[float] | np.ndarray,
    verified_pairs: Sequence[float] | np.ndarray,
    path: str | os.PathLike,
    threshold: float | None = None,
    percentiles: Mapping[str, float] | None = None,
) -> Path:
    """PNG of two Jaccard histograms on [0, 1]: random document pairs and verified pairs.

    The y axis is logarithmic because random pairs (mostly near 0) and verified
    pairs can differ by orders of magnitude; either sample may be empty.
    `percentiles` (e.g. {"p99": 0.12}) are drawn as labelled dotted lines."""
    samples = {
        "random pairs": _jaccards(random_pairs, "random_pairs"),
        "verified pairs": _jaccards(verified_pairs, "verified_pairs"),
    }
    edges = np.linspace(0.0, 1.0, JACCARD_BINS + 1)
    with _png(path) as ax:
        top = 10  # an axis of a few decades even for tiny samples
        for colour, (name, values) in zip(("C7", "C0"), samples.items()):
            counts, _ = np.histogram(values, bins=edges)
            top = max(top, int(counts.max()))
            label = f"{name} (n={values.size:,})" if values.size else f"{name} (none)"
            ax.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color=colour, alpha=0.55, label=label)
        if threshold is not None:
            ax.axvline(threshold, color="C3", ls="--", lw=1.2, label=f"threshold {threshold:g}")
        for name, value in (percentiles or {}).items():
            ax.axvline(value, color="k", ls=":", lw=1)
            # Rotated along its line, so labels of close percentiles do not overlap.
            ax.annotate(
                f"{name} {value:.3g}",
                (value, 1),
                xycoords=("data", "axes fraction"),
                xytext=(2, -4),
                textcoords="offset points",
                rotation=90,
                ha="left",
                va="top",
                fontsize="small",
            )
        # Limits before the log scale: a log axis cannot autoscale when every count is zero.
        ax.set(xlim=(0, 1), ylim=(0.8, top * 4.0), xlabel="Jaccard similarity", ylabel="pairs (log scale)")
        ax.set_yscale("log")
        ax.set_title("Jaccard: random document pairs vs verified near-duplicate pairs")
        ax.legend(loc="upper right", fontsize="small")
    return Path(path)


def _jaccards(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    out = np.asarray(values, dtype=float).ravel()
    if out.size and not (np.all(np.isfinite(out)) and out.min() >= 0.0 and out.max() <= 1.0):
        raise ValueError(f"{name} must hold Jaccard values in [0, 1]")
    return out


def cluster_sizes(size_counts: Mapping[int, int], path: str | os.PathLike) -> Path:
    """PNG of the cluster-size distribution, log-log: x a cluster size, y how many clusters have it."""
    pairs = sorted((int(s), int(n)) for s, n in size_counts.items() if n)
    if any(s < 1 or n < 0 for s, n in pairs):
        raise ValueError(f"cluster sizes must be >= 1 and counts >= 0, got {dict(size_counts)}")
    with _png(path) as ax:
        ax.set_xscale("log")
        ax.set_yscale("log")
        if pairs:
            sizes, counts = (np.array(v) for v in zip(*pairs))
            ax.vlines(sizes, 0.8, counts, color="C0", lw=2)
            ax.plot(sizes, counts, "o", color="C0")
            ax.set(xlim=(sizes.min() / 1.5, sizes.max() * 1.5), ylim=(0.8, counts.max() * 2.0))
            if len(sizes) <= 12:  # few sizes: label each one rather than the decades
                ax.set_xticks(sizes, [str(s) for s in sizes])
                ax.xaxis.set_minor_formatter("")
            title = f"Cluster sizes: {int(counts.sum()):,} clusters, the largest of size {int(sizes.max()):,}"
        else:
            ax.set(xlim=(1, 10), ylim=(0.8, 10))
            ax.text(0.5, 0.5, "no clusters", transform=ax.transAxes, ha="center", va="center")
            title = "Cluster sizes: no clusters"
        ax.set(xlabel="cluster size (documents)", ylabel="clusters (log scale)", title=title)
        ax.grid(alpha=0.3, which="both")
    return Path(path)
