"""neardup-spark: near-duplicate documents at archive scale on Spark.

    from neardup_spark import Config, deduplicate
    result = deduplicate(df, Config().with_overrides({"verify.threshold": 0.5}))

Stages, in order, one module each: read, normalise, exact, shingles, minhash,
banding, candidates, verify, components, keepers, write; `pipeline` chains them.
"""

__version__ = "0.1.0"

from .config import Config, ConfigError, load_config  # noqa: E402
from .errors import BackendError, InputError, NeardupError  # noqa: E402

# The pipeline (pyspark, pandas, pyarrow) is imported on first use, not with
# the package: Spark's Python workers unpickle a UDF from one module and
# should not pay for every stage, and the CLI imports it while the JVM starts.
_LAZY = {"DedupResult", "deduplicate", "run"}


def __getattr__(name):
    if name in _LAZY:
        from . import pipeline

        return getattr(pipeline, name)
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
