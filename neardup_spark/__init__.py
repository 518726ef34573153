"""neardup-spark: near-duplicate documents at archive scale on Spark.

    from neardup_spark import Config, deduplicate
    result = deduplicate(df, Config().with_overrides({"verify.threshold": 0.5}))

Stages, in order, one module each: read, normalise, exact, shingles, minhash,
banding, candidates, verify, components, keepers, write; `pipeline` chains them.
"""

__version__ = "0.1.0"

from .config import Config, ConfigError, load_config  # noqa: E402
from .errors import BackendError, InputError, NeardupError  # noqa: E402
from .pipeline import DedupResult, deduplicate, run  # noqa: E402

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
