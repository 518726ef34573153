"""neardup-spark: near-duplicate documents at archive scale on Spark.

    from neardup_spark import deduplicate
    result = deduplicate(df, id_col="url", text_col="body", threshold=0.5, keep="earliest")

`__all__` below is the one list of public names. The functions live in
`neardup_spark.api`; the package's layers are described in docs/architecture.md.
"""

from neardup_spark.config import Config, ConfigError, load_config
from neardup_spark.errors import BackendError, InputError, NeardupError
from neardup_spark.version import __version__

__all__ = [
    # configuration and errors (imported with the package)
    "Config", "ConfigError", "load_config", "NeardupError", "InputError", "BackendError", "__version__",
    # DataFrames in, DataFrames out
    "deduplicate", "DedupResult", "options", "read", "session", "ship", "SAMPLE", "progress",
    # an archive index with DataFrames in and out (neardup_spark.archives)
    "Archive", "Appended",
    # paths in, outputs and indexes out
    "run", "Report", "preflight", "build_index", "append", "export", "compact_index", "vacuum_index",
    # choosing settings and judging results
    "params", "params_text", "calibrate", "calibration_text", "labelling_sample", "score_labels", "evaluate",
    "evaluate_run", "inspect", "inspect_clusters", "cluster_text", "review_page", "generate",
    # what the `neardup` command calls besides (its pre-flight, session, and text)
    "command_session", "require_finished", "clusters_of_run", "clusters_written_to", "calibration_plots",
    "write_labelling_sample", "labelling_text", "labels_text", "evaluation_text", "cluster_json", "save_trace", "require_matplotlib",
]

# The pipeline (pyspark, pandas, pyarrow) is imported on first use, not with
# the package: Spark's Python workers unpickle a UDF from one module and
# should not pay for every stage, and the CLI imports it while the JVM starts.
_EAGER = {"Config", "ConfigError", "load_config", "NeardupError", "InputError", "BackendError", "__version__"}
_ARCHIVES = {"Archive", "Appended"}


def __getattr__(name):
    if name in _ARCHIVES:
        from neardup_spark import archives

        return getattr(archives, name)
    if name in __all__ and name not in _EAGER:
        from neardup_spark import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
