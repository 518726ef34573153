"""Spark's Python worker daemon, with the pipeline's kernels loaded before it forks.

Spark starts `python -m pyspark.daemon` once per executor and forks a worker
from it for every Python task slot. Each fork then imports what its function
needs (pandas, pyarrow, numpy, the stage's module) and the sketch builds its
separator table: ~1 s of CPU per worker, paid again by every worker and at
the busiest moment of a short run. Named as `spark.python.daemon.module`
(neardup sets it for the local sessions it builds; on a cluster, set it where
neardup_spark is installed on the executors), this module does that work once,
in the daemon, then runs PySpark's own daemon loop: every worker it forks
starts with the modules imported and the table built.

Loading is best effort: if it fails, the daemon runs as PySpark's would and the
workers load what they need themselves.
"""

from __future__ import annotations


def preload() -> None:
    """Import the modules whose functions run in workers and build the separator tables."""
    try:
        from . import candidates, normalise, sketch, verify  # noqa: F401

        normalise.preload()
    except Exception:  # pragma: no cover - a worker imports what it needs anyway
        pass


if __name__ == "__main__":
    preload()
    from pyspark.daemon import manager

    manager()
