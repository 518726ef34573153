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

What it loaded is then frozen out of Python's garbage collector (`gc.freeze`).
PySpark's daemon runs a full `gc.collect()` in a reused worker after every
task, and a full collection walks every tracked object, the ~76,000 of
pandas, pyarrow, numpy and pyspark included: ~50 ms of CPU per task here,
for a Python task that did nothing. Frozen, they are skipped (a noop Arrow
task then costs ~2 ms), and collections no longer write to the pages a
worker shares with the daemon.

Loading is best effort: if it fails, the daemon runs as PySpark's would and the
workers load what they need themselves.
"""

from __future__ import annotations

import gc


def preload() -> None:
    """Import the modules whose functions run in workers and build the separator tables."""
    try:
        from neardup_spark.kernels import normalise
        from neardup_spark.stages import candidates, sketch, verify  # noqa: F401

        normalise.preload()
    except Exception:  # pragma: no cover - a worker imports what it needs anyway
        pass


def prepare() -> None:
    """`preload`, then move everything loaded so far out of the collector's reach:
    module-level objects live as long as the process, so collecting them is pure cost."""
    preload()
    gc.collect()  # what loading left as garbage goes now, not frozen forever
    gc.freeze()


if __name__ == "__main__":
    prepare()
    from pyspark.daemon import manager

    manager()
