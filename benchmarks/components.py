"""Connected components on long chains: rounds and time for path graphs.

    .venv/bin/python -m benchmarks.components --nodes 10000 100000

A path is the worst case for label propagation (n-1 rounds); the
large-star/small-star backend should need a logarithmic number of rounds.
Node ids are a random permutation, so the path wanders across the id order
instead of running down it. Each result is checked: one component, named by
the smallest id. Spark local[2], 8 shuffle partitions, local checkpoints.
Prints a table and writes benchmarks/results/components.json.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

from benchmarks import machine, save
from neardup_spark import columns as C
from neardup_spark.stages.components import connected_components
from neardup_spark.config import load_config
from neardup_spark.runtime.session import build_session

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"


def path_edges(n: int, seed: int) -> list[tuple[int, int]]:
    ids = np.random.default_rng(seed).permutation(n).astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(ids[:-1], ids[1:])]


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    # The distributed algorithm is what is measured: no graph goes to the driver.
    cfg = load_config(ROOT / "conf" / "local.toml", overrides={"spark.master": args.master,
                                                                "cluster.driver_max_edges": 0})
    spark = build_session(cfg.spark)
    rows = []
    print(f"{'nodes':>8} {'rounds':>7} {'log2(n)':>8} {'seconds':>8}  check")
    try:
        for n in args.nodes:
            edges = spark.createDataFrame(path_edges(n, args.seed), f"{C.DOC_A} long, {C.DOC_B} long")
            stats: dict = {}
            start = time.perf_counter()
            comps = connected_components(edges, cfg, stats)
            got = comps.groupBy(C.CLUSTER_ID).count().collect()
            seconds = time.perf_counter() - start
            ok = len(got) == 1 and got[0][C.CLUSTER_ID] == 0 and got[0]["count"] == n
            row = {"nodes": n, "rounds": stats["components_rounds"], "log2_n": round(math.log2(n), 1),
                   "seconds": round(seconds, 2), "one_component_named_by_min_id": ok}
            rows.append(row)
            print(f"{n:>8} {row['rounds']:>7} {row['log2_n']:>8} {row['seconds']:>8}  {'ok' if ok else 'WRONG'}",
                  flush=True)
    finally:
        spark.stop()
    result = {"benchmark": "components", "graph": "path with randomly permuted ids", "master": args.master,
              "machine": machine(),
              "runs": rows}
    save(result, args.out, "components.json")
    if not all(r["one_component_named_by_min_id"] for r in rows):
        raise SystemExit("a path graph did not come out as one component")
    return rows


if __name__ == "__main__":
    main()
