"""neardup-spark: near-duplicate documents at archive scale on Spark.

    from neardup_spark import Config, deduplicate
    result = deduplicate(df, Config().with_overrides({"verify.threshold": 0.5}))

Stages, in order, one module each: read, normalise, exact, shingles, minhash,
banding, candidates, verify, components, keepers, write; `pipeline` chains them.
"""

from neardup_spark.config import Config, ConfigError, load_config  # noqa: E402
from neardup_spark.version import __version__  # noqa: E402
from neardup_spark.errors import BackendError, InputError, NeardupError  # noqa: E402

# The pipeline (pyspark, pandas, pyarrow) is imported on first use, not with
# the package: Spark's Python workers unpickle a UDF from one module and
# should not pay for every stage, and the CLI imports it while the JVM starts.
_LAZY = {"DedupResult", "deduplicate", "run", "options", "build_index", "append", "export", "calibrate",
         "evaluate", "read"}


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
    "run",
    "__version__",
]
