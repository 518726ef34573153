"""Options of a driver JVM that a command starts: its JIT, its log, its class-data archive."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from neardup_spark.config import SparkConfig
from neardup_spark.runtime.masters import planned_master, remote_of, under_spark_submit


# --- The JIT of a short local run --------------------------------------------
#
# HotSpot's optimising compiler (C2) recompiles hot code after profiling it;
# on 2 cores its compile threads take CPU from the job for most of a short
# run and pay back only on long ones. Measured here (local[2], whole process):
# 100k documents (119 MB of Parquet) 31-34 s with C2, 25.6 s with C1 only;
# 1M documents (1.2 GB) 150 s with C2, 167 s with C1 only. The crossover,
# interpolated between those two points, is near 300k documents (~360 MB):
# under SHORT_RUN_BYTES of local input, "auto" keeps the JIT at C1.

SHORT_RUN_BYTES = 256 << 20
_C1_ONLY = "-XX:TieredStopAtLevel=1"


def jit_options(spark_cfg: SparkConfig, input_bytes: int | None) -> str:
    """Driver JVM options for the JIT (local mode, a JVM we start): C1 only for a short run."""
    if not planned_master(spark_cfg).startswith("local") or under_spark_submit() or spark_cfg.jit == "default":
        return ""
    if spark_cfg.jit == "c1" or (input_bytes is not None and input_bytes < SHORT_RUN_BYTES):
        return _C1_ONLY
    return ""


# --- Spark's log, out of the terminal ------------------------------------------
#
# A local JVM that the command starts logs to a file (data/log4j2.properties), not to
# the terminal: a failed task's ~100 lines of stack trace stay in the log, and the user
# reads the one-line error. Logs are kept under the cache directory, the newest LOGS_KEPT.

LOGS_KEPT = 20
_LOG_CONFIG = Path(__file__).parents[1] / "data" / "log4j2.properties"


def log_options(spark_cfg: SparkConfig) -> str:
    """Driver JVM options that send Spark's log to a file (local JVMs we start, unless the
    user's own settings configure log4j)."""
    if not planned_master(spark_cfg).startswith("local") or under_spark_submit() or not _LOG_CONFIG.exists():
        return ""
    if any("log4j" in str(v) for v in spark_cfg.conf.values()) or _defaults_set_java_options():
        return ""
    folder = log_dir()
    if folder is None:
        return ""
    path = folder / f"spark-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    return f"-Dlog4j2.configurationFile={_LOG_CONFIG.as_uri()} -Dneardup.spark.log={path}"


def log_dir() -> Path | None:
    """Where Spark's logs of local runs go ($NEARDUP_LOG_DIR, else logs/ in the cache
    directory), with older logs pruned; None when it cannot be written."""
    home = os.environ.get("NEARDUP_LOG_DIR") or str(_cache_home() / "logs")
    folder = Path(home)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        old = sorted(folder.glob("spark-*.log"), key=lambda p: p.stat().st_mtime)
        for stale in old[: max(0, len(old) - LOGS_KEPT + 1)]:
            stale.unlink(missing_ok=True)
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK) else None


def _cache_home() -> Path:
    return Path(os.environ.get("NEARDUP_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "neardup-spark")


# --- Class-data sharing for the driver JVM -----------------------------------
#
# A local run starts a fresh JVM, which loads and verifies ~15,000 Spark
# classes from jars: seconds of every short run (session start, then the
# first use of each operator). Java 13+ can dump the classes a run loaded
# into an archive (-XX:ArchiveClassesAtExit) and map it at the next start
# (-XX:SharedArchiveFile), skipping both. The archive (~190 MB) is keyed by
# the Spark installation and the Java runtime; a JVM that finds it does not
# match ignores it. Logging of CDS is switched off so a mismatch prints nothing.

DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


@dataclass(frozen=True)
class ClassArchive:
    path: Path  # the archive a JVM maps
    making: Path | None  # where this run's JVM writes it at exit (renamed to `path` once written)

    @property
    def java_options(self) -> str:
        if self.making is not None:
            return f"-XX:ArchiveClassesAtExit={self.making} {_QUIET}"
        return f"-XX:SharedArchiveFile={self.path} {_QUIET}"

    def finish(self, timeout: float = 120.0) -> None:
        """End the stopped session's JVM (it writes the archive as it exits) and
        publish the archive under its final name. Best effort: on any failure
        the next run makes it again."""
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        proc = getattr(gateway, "proc", None)
        try:
            if proc is not None:
                gateway.shutdown()
                proc.stdin.close()  # the gateway JVM exits when its stdin closes
                proc.wait(timeout=timeout)
                SparkContext._gateway = SparkContext._jvm = None
            if proc is not None and self.making.exists() and self.making.stat().st_size > 0:
                os.replace(self.making, self.path)
        except Exception:  # noqa: BLE001 - a cache, never a reason to fail a run
            pass
        finally:
            self.making.unlink(missing_ok=True)


def class_archive(spark_cfg: SparkConfig) -> ClassArchive | None:
    """The class-data archive for a JVM this process is about to start in
    local mode, or None: not local, not ours to start, switched off
    (`spark.class_cache`), driver JVM options set outside our config, Java
    older than 13 or of unknown version, or no writable cache directory."""
    if remote_of(spark_cfg) or not spark_cfg.class_cache or not planned_master(spark_cfg).startswith("local") \
            or under_spark_submit():
        return None
    from pyspark import SparkContext  # classic only: a Connect-only client has none

    if SparkContext._gateway is not None or _defaults_set_java_options():
        return None
    java = _java_release()
    if java is None:
        return None
    home = _cache_home()
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(home, os.W_OK):
        return None
    import pyspark

    key = hashlib.sha256("\0".join([pyspark.__version__, _spark_home(), *java]).encode()).hexdigest()[:16]
    path = home / f"spark-{pyspark.__version__}-{key}.jsa"
    _drop_stale(home, keep=path)
    if path.exists():
        try:
            os.utime(path)  # in use: its mtime says when it was last used
        except OSError:
            pass
        return ClassArchive(path, None)
    return ClassArchive(path, home / f"{path.name}.{os.getpid()}.part")


def _drop_stale(home: Path, keep: Path, part_age: float = 86_400, archive_age: float = 30 * 86_400) -> None:
    """Archives left half-made by runs interrupted a day ago or more, and archives
    (~190 MB each: one per Spark and Java install) unused for 30 days."""
    now = time.time()
    for pattern, age in (("*.part", part_age), ("*.jsa", archive_age)):
        for old in home.glob(pattern):
            try:
                if old != keep and now - old.stat().st_mtime > age:
                    old.unlink()
            except OSError:
                pass


def _spark_home() -> str:
    import pyspark

    return os.path.realpath(os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__))


def _java_release() -> tuple[str, str] | None:
    """(the java binary's real path, the runtime's release file) when it is Java 13+."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        return None
    java = os.path.realpath(java)
    try:
        release = (Path(java).parent.parent / "release").read_text(errors="replace")
    except OSError:
        return None
    found = re.search(r'^JAVA_VERSION="(\d+)', release, re.M)
    if not found or int(found.group(1)) < 13:
        return None
    return java, release


def _defaults_set_java_options() -> bool:
    """True when spark-defaults.conf sets the driver's JVM options (ours would replace them)."""
    conf_dir = os.environ.get("SPARK_CONF_DIR") or os.path.join(_spark_home(), "conf")
    try:
        text = Path(conf_dir, "spark-defaults.conf").read_text(errors="replace")
    except OSError:
        return False
    return any(line.split() and line.split()[0] == DRIVER_JAVA_OPTIONS for line in text.splitlines())
