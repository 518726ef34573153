"""Errors that stop a run before heavy work, each with a one-line message."""


class NeardupError(Exception):
    """Base class: the CLI prints these as one line and exits with status 2."""


class InputError(NeardupError):
    """The input is unreadable or does not have the promised shape."""


class BackendError(NeardupError):
    """An optional backend (GraphFrames) was chosen but is not usable here."""


class ConvergenceError(NeardupError):
    """An iterative stage did not converge within its configured limit."""


def java_causes(exc: BaseException, limit: int = 20) -> list[str]:
    """The JVM exception behind a Py4J or captured PySpark error and its causes, outermost
    first (each as its class and message); [] for plain Python errors."""
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    chain = []
    while java is not None and len(chain) < limit:
        try:
            chain.append(str(java.toString()))
            java = java.getCause()
        except Exception:  # noqa: BLE001 - not a JVM object after all
            break
    return chain


# Root causes a user can act on, and what to do about them.
_HINTS = (
    (("delta.DefaultSource", "data source: delta"),
     "Delta Lake is not on this session's classpath: run where it is (Databricks), or add the delta-spark "
     "package of your Spark version and its SQL extension"),
    (("Unexpected end of input stream", "CRC", "Not in GZIP format", "not a gzip", "invalid block type",
      "invalid distance", "ZipException"), "the file is truncated or not valid gzip: copy it again or remove it"),
    (("is not a Parquet file", "expected magic number"), "the file is not (whole) Parquet: copy it again or remove it"),
    (("No FileSystem for scheme", "ClassNotFoundException: org.apache.hadoop.fs"),
     "no connector for this scheme on the classpath: add its jar (e.g. hadoop-aws for s3a)"),
    (("AccessDenied", "Permission denied"), "no permission to read it"),
)


def one_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an exception's message; for JVM errors, the JVM's own, with its
    root cause and what to do about it when the outer message does not say (e.g. Spark's
    FAILED_READ_FILE around a truncated gzip file)."""
    chain = java_causes(exc)
    lines = (chain[0] if chain else str(exc)).strip().splitlines()
    first = (lines[0] if lines else exc.__class__.__name__)[:limit]
    if len(chain) > 1:
        root = chain[-1].strip().splitlines()[0] if chain[-1].strip() else ""
        if root and root not in first:
            first = f"{first} (cause: {root[:200]})"
    for needles, hint in _HINTS:
        if any(n in " ".join(chain) for n in needles):
            return f"{first}; {hint}"
    return first
