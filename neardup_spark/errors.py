"""Errors that stop a run before heavy work, each with a one-line message."""

from __future__ import annotations

import re


class NeardupError(Exception):
    """Base class: the CLI prints these as one line and exits with status 2."""


class IndexError_(NeardupError):
    """The archive index is missing, damaged, or was built with other parameters."""


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


# Storage failures a user can act on, as the JVM or the OS words them: (what happened, what to do).
_IO_FAILURES = (
    (("No space left on device", "ENOSPC", "Disk quota exceeded", "EDQUOT", "DiskOutOfSpace", "QuotaExceeded"),
     "no space left on the device", "free space there, or give a path on a larger disk"),
    (("Permission denied", "EACCES", "AccessControlException", "AccessDeniedException", "Operation not permitted",
      "Read-only file system", "EROFS"),
     "no permission", "give the user this job runs as write access there, or choose another path"),
    (("FileNotFoundException", "No such file or directory", "PATH_NOT_FOUND", "Path does not exist", "ENOENT"),
     "a file is missing", "check that nothing else removed or moved files there while the job ran"),
)
_PATH = re.compile(r"(?:(?:file|hdfs|s3a?|abfss?|wasbs?|gs|dbfs|viewfs):(?://[^/\s'\"`]*)?)?/[^\s'\"`,;()\[\]]+")


def writing(exc: BaseException, path: str) -> BaseException:
    """`exc` marked as raised while writing `path` (unless an inner call named a path first):
    a storage failure then names it even where the JVM's message does not."""
    if getattr(exc, "neardup_path", None) is None:
        try:
            exc.neardup_path = path
        except AttributeError:  # pragma: no cover - an exception type without a __dict__
            pass
    return exc


def io_failure(exc: BaseException) -> tuple[str, str | None, str] | None:
    """(what happened, the path named, what to do) when `exc`, or the JVM error behind it, is a
    storage failure a user can act on (a full disk, no permission, a missing file); else None."""
    texts = []
    seen: BaseException | None = exc
    while seen is not None and len(texts) < 10:
        texts += [str(seen), *java_causes(seen)]
        if isinstance(seen, OSError) and seen.filename:
            texts.insert(0, f"{seen.strerror}: {seen.filename}")
        seen = seen.__cause__ or seen.__context__
    text = "\n".join(texts)
    for needles, what, todo in _IO_FAILURES:
        hits = [line for line in text.splitlines() if any(n in line for n in needles)]
        if hits:
            found = getattr(exc, "neardup_path", None) or next(
                (m.group(0).rstrip(".:") for line in hits for m in [_PATH.search(line)] if m), None)
            return what, found, todo
    return None


_NO_PACKAGE = "No module named 'neardup_spark'"


def unshipped(exc: BaseException) -> NeardupError | None:
    """A one-line error when `exc` says Spark's Python workers cannot import this package
    (a Spark Connect server, or a cluster it was not installed on); else None."""
    if _NO_PACKAGE not in " ".join([str(exc), *java_causes(exc)]):
        return None
    return NeardupError(
        f"Spark's Python workers cannot import neardup_spark ({_NO_PACKAGE}): install the package on the "
        "cluster, or ship it once per session with neardup_spark.ship(spark) (the neardup command does this "
        "itself)")
