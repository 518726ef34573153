"""A run's plots: the data gathered in Spark as small samples and counts, drawn by `plots`.

`neardup run --plots` (output.plots) writes, next to report.json:
s_curve.png (the run's bands and rows, threshold marked), jaccard.png
(random document pairs against the verified pairs: is the threshold in the
gap?) and cluster_sizes.png.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from pyspark.sql import functions as F

from neardup_spark import columns as C
from neardup_spark.config import Config
from neardup_spark.errors import NeardupError
from neardup_spark.tools.calibrate import random_pair_jaccards

if TYPE_CHECKING:  # pragma: no cover
    from neardup_spark.stages.pipeline import DedupResult

RANDOM_PAIRS = 2000
VERIFIED_SAMPLE = 100_000


def check_can_plot(output_path: str) -> None:
    """Plots need matplotlib and a local output directory: say so before any work."""
    from neardup_spark.tools.plots import require_matplotlib
    from neardup_spark.runtime.paths import is_local_path

    if not is_local_path(output_path):
        raise NeardupError(f"plots are written with matplotlib to a local directory; the output is {output_path!r}")
    require_matplotlib()


def verified_jaccards(result: DedupResult, limit: int = VERIFIED_SAMPLE, seed: int = 1) -> np.ndarray:
    """Jaccard of the verified pairs (exact copies at 1.0); a random sample of `limit` when there are more."""
    n = result.report["counts"]["verified_pairs"] + result.report["counts"]["exact_duplicates"]
    pairs = result.pairs.select(C.JACCARD)
    if n > limit:
        pairs = pairs.sample(fraction=min(1.0, 1.2 * limit / n), seed=seed).limit(limit)
    return np.array([r[0] for r in pairs.collect()], dtype=np.float64)


def cluster_size_counts(result: DedupResult) -> dict[int, int]:
    """{cluster size: number of clusters}."""
    sizes = result.clusters.groupBy(C.CLUSTER_ID).count().groupBy(F.col("count").alias("size")).count()
    return {int(r["size"]): int(r["count"]) for r in sizes.collect()}


def write_run_plots(result: DedupResult, cfg: Config, directory: str) -> list[str]:
    """The three PNG files of a run, in `directory` (local)."""
    from neardup_spark.tools import plots

    lsh = result.report["lsh"]
    n_docs = result.report["counts"]["documents"]
    random = random_pair_jaccards(result.sketched, RANDOM_PAIRS, n_docs, cfg.minhash.seed)
    out = Path(directory)
    # One S-curve only where one banding finds the candidates (not SimHash's tables or
    # containment's size classes, whose report has no bands of its own).
    curve = [plots.s_curve(lsh["bands"], lsh["rows"], cfg.verify.threshold, out / "s_curve.png")] if "bands" in lsh else []
    written = [
        *curve,
        plots.jaccard_histogram(random, verified_jaccards(result), out / "jaccard.png", threshold=cfg.verify.threshold),
        plots.cluster_sizes(cluster_size_counts(result), out / "cluster_sizes.png"),
    ]
    return [str(p) for p in written]
