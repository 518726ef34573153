"""neardup-spark: near-duplicate documents at archive scale on Spark.

    from neardup_spark import deduplicate
    result = deduplicate(df, id_col="url", text_col="body", threshold=0.5, keep="earliest")

The public functions live in `neardup_spark.api`; the package's layers are
described in docs/architecture.md.
"""

from neardup_spark.config import Config, ConfigError, load_config
from neardup_spark.errors import BackendError, InputError, NeardupError
from neardup_spark.version import __version__

# The pipeline (pyspark, pandas, pyarrow) is imported on first use, not with
# the package: Spark's Python workers unpickle a UDF from one module and
# should not pay for every stage, and the CLI imports it while the JVM starts.
_LAZY = {"DedupResult", "deduplicate", "run", "options", "build_index", "append", "export",
         "compact_index", "vacuum_index", "calibrate",
         "evaluate", "read", "progress", "Report", "inspect", "review_page"}


def __getattr__(name):
    if name in _LAZY:
        from neardup_spark import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "Config",
    "ConfigError",
    "load_config",
    "NeardupError",
    "InputError",
    "BackendError",
    "DedupResult",
    "deduplicate",
    "options",
    "run",
    "build_index",
    "append",
    "export",
    "compact_index",
    "vacuum_index",
    "calibrate",
    "evaluate",
    "read",
    "progress",
    "inspect",
    "review_page",
    "Report",
    "__version__",
]
