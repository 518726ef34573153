"""Paths as Spark will resolve them: globs expanded, symlinks followed, URIs qualified.

Every check that protects the user's data goes through here: an output that
overlaps an input (an `--overwrite` would delete what the run reads), an
output that exists, a glob that matches nothing. A path is resolved twice:

- before Spark starts, on the driver's own disk, when the path is local
  (a `file:` URI, or a path without a scheme in local mode);
- with a session, through the session's Hadoop FileSystem, which knows
  `fs.defaultFS` (a path without a scheme is on HDFS on most clusters) and
  expands globs exactly as Spark's readers will.

A Location is a qualified path (scheme, authority, absolute path; local
paths with their symlinks resolved), so two spellings of one directory
compare equal.
"""

from __future__ import annotations

import glob as _glob
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from pyspark.sql import SparkSession

from neardup_spark.errors import InputError, NeardupError

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_WINDOWS = re.compile(r"^[a-zA-Z]:[\\/]")
GLOB_CHARS = "*?[{"


def is_local_path(path: str) -> bool:
    """A file: URI or a path without a scheme (what it names may still depend on fs.defaultFS)."""
    return path.startswith("file:") or not _SCHEME.match(path) or bool(_WINDOWS.match(path))


def local_path(path: str) -> str:
    """A local path without its file: scheme."""
    if path.startswith("file://"):
        return path[len("file://") :]
    return path[len("file:") :] if path.startswith("file:") else path


def has_glob(path: str) -> bool:
    return any(ch in path for ch in GLOB_CHARS)


def local_file(path: str) -> Path | None:
    """The local file or directory a plain path names (file: scheme removed); None for
    globs and remote URLs (s3://, hdfs://, dbfs:/...)."""
    if not path or has_glob(path) or not is_local_path(path):
        return None
    return Path(local_path(path))


def expand_braces(pattern: str) -> list[str]:
    """Hadoop glob alternatives `{a,b}` (nested too) as separate patterns."""
    depth, start = 0, -1
    for i, ch in enumerate(pattern):
        if ch == "\\":
            continue
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                head, body, tail = pattern[:start], pattern[start + 1 : i], pattern[i + 1 :]
                return [p for alt in _split_top(body) for p in expand_braces(head + alt + tail)]
    return [pattern]


def _split_top(body: str) -> list[str]:
    """`a,{b,c},d` -> [a, {b,c}, d]: commas outside nested braces."""
    parts, depth, last = [], 0, 0
    for i, ch in enumerate(body):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[last:i])
            last = i + 1
    return [*parts, body[last:]]


def local_matches(path: str) -> list[Path]:
    """The existing local files and directories a local path or glob names (Hadoop glob
    syntax: * ? [a-z] [^a] {a,b}), symlinks resolved; [] when nothing matches."""
    plain = local_path(path)
    if not has_glob(plain):
        return [Path(os.path.realpath(plain))] if os.path.lexists(plain) else []
    found: set[str] = set()
    for pattern in expand_braces(plain):
        # Hidden names too: these are the paths an overwrite must not touch.
        found.update(_glob.glob(pattern.replace("[^", "[!"), include_hidden=True))
    return sorted(Path(os.path.realpath(p)) for p in found)


@dataclass(frozen=True)
class Location:
    """A qualified path: one spelling per place (local symlinks resolved)."""

    scheme: str
    authority: str
    path: PurePosixPath

    def contains(self, other: "Location") -> bool:
        """other is this place or lies inside it."""
        same_fs = (self.scheme, self.authority) == (other.scheme, other.authority)
        return same_fs and (other.path == self.path or self.path in other.path.parents)

    def overlaps(self, other: "Location") -> bool:
        return self.contains(other) or other.contains(self)

    def child(self, name: str) -> "Location":
        return self._with(self.path / name)

    def parent(self) -> "Location":
        return self._with(self.path.parent)

    def _with(self, path: PurePosixPath) -> "Location":
        if self.scheme == "file":
            path = PurePosixPath(os.path.realpath(str(path)))  # a symlinked child leads elsewhere
        return Location(self.scheme, self.authority, path)

    def __str__(self) -> str:
        if self.scheme == "file":
            return str(self.path)
        return f"{self.scheme}://{self.authority}{self.path}"


def location(uri: str) -> Location:
    """The Location of a qualified URI (`file:/a/b`, `hdfs://nn:8020/a`) or a local path."""
    if not _SCHEME.match(uri) or _WINDOWS.match(uri):
        return Location("file", "", PurePosixPath(os.path.realpath(uri)))
    parts = urlsplit(uri)
    if parts.scheme == "file":
        return Location("file", "", PurePosixPath(os.path.realpath(parts.path or "/")))
    return Location(parts.scheme, parts.netloc, PurePosixPath(parts.path or "/"))


# -- through the session's Hadoop FileSystem -------------------------------------------------------------------


def hadoop(spark: SparkSession | None):
    """(the JVM, the session's Hadoop configuration), or None without a JVM at hand
    (no session, or Spark Connect)."""
    if spark is None:
        return None
    try:
        context = spark.sparkContext
        return context._jvm, context._jsc.hadoopConfiguration()
    except Exception:  # Spark Connect: no SparkContext
        return None


def qualified(spark: SparkSession | None, path: str) -> Location | None:
    """Where `path` is for Spark (fs.defaultFS applied); None where that cannot be told
    (no JVM at hand and not plainly local, or no connector for its scheme)."""
    jvm = hadoop(spark)
    if jvm is None:
        return location(local_path(path)) if path.startswith("file:") else None
    vm, conf = jvm
    try:
        hpath = vm.org.apache.hadoop.fs.Path(path)
        return location(str(hpath.getFileSystem(conf).makeQualified(hpath).toString()))
    except Exception as exc:
        raise NeardupError(f"cannot resolve {path!r}: {reason(exc)}") from None


def matches(spark: SparkSession | None, path: str) -> list[Location] | None:
    """Every existing place `path` (a glob or not) names for Spark, or None where that
    cannot be told (see `qualified`)."""
    jvm = hadoop(spark)
    if jvm is None:
        return [location(str(p)) for p in local_matches(path)] if path.startswith("file:") else None
    vm, conf = jvm
    try:
        hpath = vm.org.apache.hadoop.fs.Path(path)
        fs = hpath.getFileSystem(conf)
        found = fs.globStatus(hpath)
    except Exception as exc:
        raise NeardupError(f"cannot resolve {path!r}: {reason(exc)}") from None
    out = [location(str(fs.makeQualified(s.getPath()).toString())) for s in (found or [])]
    return sorted(out, key=str)


def reason(exc: Exception) -> str:
    """A JVM exception's class and message in one line (e.g. the missing connector)."""
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    first = text.strip().splitlines()[0] if text.strip() else exc.__class__.__name__
    if "ClassNotFoundException" in first or "No FileSystem for scheme" in first:
        return (f"{first} (no connector for this scheme on the classpath: add its jar, e.g. hadoop-aws for s3a, "
                "gcs-connector for gs, hadoop-azure for abfs)")
    return first[:300]


# -- the checks ------------------------------------------------------------------------------------------------


def check_apart(output: Location, written: tuple[str, ...], inputs: list[Location], globbed: bool,
                shown_out: str, shown_in: str) -> None:
    """Refuse an output whose written children (clusters/, ...) overlap an input (an overwrite
    would delete it), or that lies inside an input directory (a later run over the input would
    read the outputs). The directories a glob lists count as input directories."""
    folders = {p.parent() for p in inputs} if globbed else set()
    for src in inputs:
        if src.contains(output) or any(output.child(name).overlaps(src) for name in written):
            raise _overlap(shown_out, shown_in)
    if any(folder.contains(output) for folder in folders):
        raise _overlap(shown_out, shown_in)


def _overlap(out: str, inp: str) -> NeardupError:
    return NeardupError(f"output {out!r} overlaps input {inp!r}: write the output elsewhere")


def require_matches(found: list[Location] | None, path: str, fmt: str) -> None:
    """An input path or glob that names nothing is an error before any work."""
    if found is not None and not found:
        what = "matches no file" if has_glob(path) else "does not exist"
        raise InputError(f"cannot read {fmt} input {path!r}: it {what}")
