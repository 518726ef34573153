"""Building a SparkSession, for entry points only (CLI, jobs/, notebooks, tests).

Library code never calls this: every stage takes the DataFrame it works on.
Local-mode defaults are sized for one laptop, since Spark's own defaults
(200 shuffle partitions, the UI) are sized for a cluster.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from pyspark import StorageLevel
from pyspark.sql import SparkSession

from neardup_spark.config import SparkConfig
from neardup_spark.runtime import sizing

LOCAL_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Workers fork with the stages' modules imported and tables built (see neardup_spark.worker_daemon).
    "spark.python.daemon.module": "neardup_spark.worker_daemon",
}


def under_spark_submit() -> bool:
    """True when spark-submit (or a notebook runtime) started the JVM for us."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or "DATABRICKS_RUNTIME_VERSION" in os.environ


def remote_of(spark_cfg: SparkConfig) -> str:
    """The Spark Connect server a session built from spark_cfg talks to ("" for classic)."""
    return spark_cfg.remote or os.environ.get("SPARK_REMOTE", "")


def planned_master(spark_cfg: SparkConfig) -> str:
    """The master a session built from spark_cfg will have ("" when spark-submit or a
    Spark Connect server decides)."""
    if remote_of(spark_cfg):
        return ""
    return spark_cfg.master or ("" if under_spark_submit() else "local[*]")


def is_local_master(master: str) -> bool:
    """local, local[N], local[N,F]: driver and executors are one JVM on one disk
    (local-cluster[...] is not: its executors are JVMs of their own)."""
    return master == "local" or master.startswith("local[")


def master_of(spark: SparkSession) -> str:
    """A running session's master; "" under Spark Connect (no SparkContext)."""
    try:
        return spark.sparkContext.master
    except Exception:  # Spark Connect
        return ""


def session_settings(spark_cfg: SparkConfig, java_options: str = "", input_bytes: int | None = None,
                     fresh: bool = True, new_jvm: bool = True) -> tuple[str, dict[str, str]]:
    """(master, the settings a new session gets): local-mode defaults, then cfg.spark's, then
    (local mode, a `fresh` context: none running) shuffle partitions, and (a JVM not started
    yet) the driver heap, sized for `input_bytes` of input where cfg.spark names neither (see
    `sizing`), with `java_options` added to the driver JVM's own."""
    master = planned_master(spark_cfg)
    settings = dict(LOCAL_DEFAULTS) if master.startswith("local") else {}
    if spark_cfg.shuffle_partitions:
        settings["spark.sql.shuffle.partitions"] = str(spark_cfg.shuffle_partitions)
    settings.update(spark_cfg.conf)
    if fresh and not under_spark_submit():
        settings.update(sizing.local_settings(master, settings, input_bytes, heap=new_jvm))
    if java_options:
        own = settings.get(DRIVER_JAVA_OPTIONS, "")
        settings[DRIVER_JAVA_OPTIONS] = f"{own} {java_options}".strip()
    return master, settings


def build_session(spark_cfg: SparkConfig, checkpoint_dir: str | None = None,
                  java_options: str = "", input_bytes: int | None = None) -> SparkSession:
    """A session as cfg.spark asks; local[*] when no master is named and none is given to us.

    Executors' Python is pinned to this interpreter (PYSPARK_PYTHON) unless the
    user set it, so Pandas UDFs find numpy and pandas. `java_options` are
    added to the driver JVM's options (they matter only if this starts the JVM).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if remote_of(spark_cfg):
        return connect_session(spark_cfg)
    from pyspark import SparkContext  # classic only: a Connect-only client has none

    builder = SparkSession.builder.appName(spark_cfg.app_name)
    fresh = SparkContext._active_spark_context is None  # else getOrCreate keeps the running one's
    new_jvm = SparkContext._gateway is None  # a stopped context's JVM keeps its heap
    master, settings = session_settings(spark_cfg, java_options, input_bytes, fresh, new_jvm)
    if master:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if checkpoint_dir:
        spark.sparkContext.setCheckpointDir(checkpoint_dir)
    elif master.startswith("local") and not spark.sparkContext.getCheckpointDir():
        # GraphFrames and reliable checkpoints need one; on a cluster it must
        # be shared storage, so only local mode gets a temporary directory.
        spark.sparkContext.setCheckpointDir(process_temp_dir("neardup-ckpt-"))
    return spark


def process_temp_dir(prefix: str) -> str:
    """A new temporary directory, removed when this Python process exits (a nightly job
    run every day would otherwise leave one a night under the temporary directory). Its
    name carries this host and process id: the folders of processes killed before their
    exit handler ran are removed by the next one (`sweep_temp_dirs`)."""
    sweep_temp_dirs(prefix)
    path = tempfile.mkdtemp(prefix=f"{prefix}{_host()}-{os.getpid()}-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def sweep_temp_dirs(prefix: str, root: str | None = None) -> list[str]:
    """Remove the `process_temp_dir(prefix)` folders under root (the temporary directory) of
    processes of this host that no longer run; returns them. Another host's folders (a
    shared /tmp) and folders named without a process id are left alone."""
    root = root or tempfile.gettempdir()
    mine = re.compile(rf"^{re.escape(prefix)}{re.escape(_host())}-(\d+)-")
    gone = []
    try:
        names = os.listdir(root)
    except OSError:
        return gone
    for name in names:
        m = mine.match(name)
        if m and not _running(int(m.group(1))):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
            gone.append(name)
    return gone


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.]", "_", os.uname().nodename if hasattr(os, "uname") else "host")


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # another user's process, or no way to tell: keep its folder
    return True


def connect_session(spark_cfg: SparkConfig) -> SparkSession:
    """A Spark Connect session to remote_of(spark_cfg), with this package shipped to the
    server (its Python workers run the sketch UDFs) unless the server starts here."""
    url = remote_of(spark_cfg)
    builder = SparkSession.builder.remote(url)
    if spark_cfg.shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(spark_cfg.shuffle_partitions))
    for key, value in spark_cfg.conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if url.startswith("sc://"):
        spark.addArtifacts(package_zip(), pyfile=True)
    return spark


def package_zip() -> str:
    """This package zipped (once per process) for a Spark Connect server's Python workers."""
    import zipfile

    global _PACKAGE_ZIP
    if _PACKAGE_ZIP is None:
        root = Path(__file__).parents[1]
        path = Path(process_temp_dir("neardup-artifact-")) / "neardup_spark.zip"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for file in sorted(root.rglob("*.py")):
                zf.write(file, Path("neardup_spark") / file.relative_to(root))
        _PACKAGE_ZIP = str(path)
    return _PACKAGE_ZIP


_PACKAGE_ZIP: str | None = None


@contextmanager
def owned_session(spark_cfg: SparkConfig, input_bytes: int | None = None) -> Iterator[SparkSession]:
    """The active session (a notebook's, a test's, spark-submit's), or one
    built for this command and stopped after it. A local JVM started here
    uses the class-data archive of `class_archive` (the first such run makes
    it and waits for its JVM to write it) and the JIT of `jit_options` for
    `input_bytes` of local input (None: unknown)."""
    existing = SparkSession.getActiveSession()
    # A Databricks job's session belongs to the runtime, which reuses it after this task.
    ours = existing is None and not os.environ.get("DATABRICKS_RUNTIME_VERSION")
    archive = None if not ours else class_archive(spark_cfg)
    if archive is not None and archive.making is not None:
        print(f"neardup: this run also writes a class-data archive of the JVM (once: later runs "
              f"start faster; ~20 s more now): {archive.path}", file=sys.stderr)
    options = [archive.java_options] if archive else []
    if ours:
        options.append(jit_options(spark_cfg, input_bytes))
        options.append(log_options(spark_cfg))
    spark = build_session(spark_cfg, java_options=" ".join(o for o in options if o), input_bytes=input_bytes)
    interrupted = False
    try:
        yield spark
    except BaseException as exc:
        interrupted = not isinstance(exc, Exception)  # Ctrl-C: stop, but do not wait for the archive
        raise
    finally:
        if ours:  # ours to stop; a notebook's, a test's or a Databricks job's session is not
            stop_without_waiting(spark)
            if archive is not None and archive.making is not None and not interrupted:
                archive.finish()


def stop_without_waiting(spark: SparkSession) -> None:
    """spark.stop(), less PySpark's wait for its accumulator server.

    That server's connection handler polls once a second and its accept loop
    every half second, and `stop` waits for both to notice (0-1.5 s, ~0.75 s
    on average here, at the end of every command). The JVM is stopped as
    before; the server is told to shut down in a background thread and ends
    on its next poll."""
    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect: no SparkContext, nothing to wait for
        spark.stop()
        return
    server = getattr(context, "_accumulatorServer", None)
    if server is not None:
        context._accumulatorServer = None
    spark.stop()
    if server is not None:
        threading.Thread(target=server.shutdown, name="neardup-accumulator-shutdown", daemon=True).start()


# --- How the pipeline caches what later stages read again ----------------------
#
# PySpark's StorageLevel.MEMORY_AND_DISK is the *serialized* level (Scala's is
# not): the cached column batches are serialized once more when stored and
# deserialized at every read, and the sketch table alone is read by four later
# stages. MEMORY_AND_DISK_DESER, PySpark's default for DataFrame.cache(), keeps
# them as they are in memory (and still serializes what spills to disk).
# Measured here at 100k (local[2]): reading a persisted sketch table three
# times took a median 10.4 s against 11.7 s; whole `neardup run`s, six
# alternating pairs, a median 27.6 s against 30.0 s (five pairs of six faster);
# at 1M, four pairs were within the machine's noise (108-144 s against 125-139 s).

CACHE_LEVEL = StorageLevel.MEMORY_AND_DISK_DESER


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


def input_bytes_of(input_cfg) -> int | None:
    """Bytes of a run's local input (cfg.input); None for tables, globs and URLs."""
    return None if input_cfg.format == "table" else local_input_bytes(input_cfg.path)


def local_input_bytes(path: str) -> int | None:
    """Bytes under a local file or directory; None for globs, URLs and missing paths."""
    from neardup_spark.runtime.paths import local_file

    root = local_file(path)
    if root is None or not root.exists():
        return None
    if root.is_file():
        return root.stat().st_size
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(folder, name))
            except OSError:
                pass
    return total


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
