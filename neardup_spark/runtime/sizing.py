"""Settings a run sizes for itself when nobody set them.

Spark's defaults are sized for a cluster: 200 shuffle partitions and, in local
mode, a 1 GiB driver heap that is the whole executor. On two cores, a 100k run
with them took three times as long as with conf/local.toml (the verify and
components stages scheduled 200 tiny tasks a shuffle). A run now sizes:

- shuffle partitions: PARTITIONS_PER_CORE a core (local[N]: N; on a cluster the
  session's default parallelism, the executor cores registered so far, and never
  fewer than Spark's 200 there), or one per BYTES_PER_PARTITION of local input
  when that is more;
- the driver heap of a local JVM that neardup starts: DRIVER_BYTES_PER_INPUT_BYTE
  times the local input, at least MIN_DRIVER_BYTES, at most MAX_DRIVER_SHARE of the
  machine's (or its container's) memory. The rest is not idle: at 10M documents on
  24 GiB, the process tree held about 8.5 GiB beyond a 12 GiB heap (the JVM's own
  memory, memory-mapped shuffle blocks, the Python workers' Arrow batches).

An explicit setting always wins: `[spark] shuffle_partitions`, a `spark.*` key
in `[spark] conf`, `--conf` of spark-submit or the session's builder,
PYSPARK_SUBMIT_ARGS, spark-defaults.conf, a value set on the session (anything
but Spark's default 200), `SPARK_DRIVER_MEMORY`.
The run's report says what it used and why (`Sizing.as_dict`).
"""

from __future__ import annotations

import math
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator


SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
DRIVER_MEMORY = "spark.driver.memory"
SPARK_DEFAULT_PARTITIONS = "200"

PARTITIONS_PER_CORE = 4
BYTES_PER_PARTITION = 256 * 2**20
MIN_DRIVER_BYTES = 4 * 2**30
DRIVER_BYTES_PER_INPUT_BYTE = 4
MAX_DRIVER_SHARE = 0.4
MIN_HEAP_MIB = 512  # Spark refuses a driver with less than 450 MiB of system memory
GIB = 2**30


@dataclass(frozen=True)
class Sizing:
    """What a run used: shuffle partitions (and the driver heap when neardup started the
    JVM), and whether each was sized here or set by someone."""

    shuffle_partitions: int
    partitions_from: str  # "set" | "sized: ..." (why)
    driver_memory: str = ""
    memory_from: str = ""

    def as_dict(self) -> dict:
        out = {"shuffle_partitions": self.shuffle_partitions, "shuffle_partitions_from": self.partitions_from}
        if self.driver_memory:
            out.update(driver_memory=self.driver_memory, driver_memory_from=self.memory_from)
        return out


def local_cores(master: str) -> int | None:
    """The task slots of a local master (local, local[N], local[N,F], local[*]); None otherwise."""
    if master == "local":
        return 1
    found = re.fullmatch(r"local\[(\*|\d+)(?:,\s*\d+)?\]", master.strip())
    if not found:
        return None
    return (os.cpu_count() or 1) if found.group(1) == "*" else max(1, int(found.group(1)))


def partitions_for(cores: int, input_bytes: int | None = None) -> int:
    """Shuffle partitions for `cores` task slots and `input_bytes` of input (None: unknown)."""
    by_cores = PARTITIONS_PER_CORE * max(1, cores)
    by_bytes = math.ceil(input_bytes / BYTES_PER_PARTITION) if input_bytes else 0
    return max(by_cores, by_bytes)


CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def physical_memory() -> int | None:
    """Bytes of RAM this process may use: the machine's, or its container's limit (cgroup v2
    or v1) when that is lower; None where the OS does not say."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = None
    for path in CGROUP_LIMITS:
        try:
            text = open(path).read().strip()
        except OSError:
            continue
        if text.isdigit() and (total is None or int(text) < total):
            total = int(text)
    return total


def driver_memory_for(input_bytes: int | None, physical: int | None) -> str:
    """The driver heap (as spark.driver.memory) of a local JVM for `input_bytes` of input on a
    machine with `physical` bytes of RAM: whole GiB, or MiB below 4 GiB, where a GiB is much
    of the machine; never below Spark's own minimum (MIN_HEAP_MIB)."""
    want = math.ceil(max(MIN_DRIVER_BYTES, DRIVER_BYTES_PER_INPUT_BYTE * (input_bytes or 0)) / GIB) * 1024
    if physical:
        want = min(want, int(physical * MAX_DRIVER_SHARE) // 2**20)
    if want >= 4096:
        return f"{want // 1024}g"
    return f"{max(MIN_HEAP_MIB, want)}m"


def _input(input_bytes: int | None) -> str:
    return f", {input_bytes / 2**20:,.0f} MiB of input" if input_bytes else ""


def _why(cores: int, where: str, input_bytes: int | None) -> str:
    return f"sized for {where}: {cores} cores{_input(input_bytes)}"


# A session neardup builds records what it sized, and why, for the run's report.
SIZED_PARTITIONS = "spark.neardup.sized.partitions"
SIZED_MEMORY = "spark.neardup.sized.memory"


def local_settings(master: str, settings: dict[str, str], input_bytes: int | None,
                   heap: bool = True) -> dict[str, str]:
    """The sized settings a new local session gets, for those of SHUFFLE_PARTITIONS and
    DRIVER_MEMORY (only with `heap`: a JVM not started yet) that neither `settings` (the
    session's, so far) nor spark-submit's own sources (`set_outside`) name."""
    cores = local_cores(master)
    if cores is None:
        return {}
    sized: dict[str, str] = {}
    if SHUFFLE_PARTITIONS not in settings and not set_outside(SHUFFLE_PARTITIONS):
        sized[SHUFFLE_PARTITIONS] = str(partitions_for(cores, input_bytes))
        sized[SIZED_PARTITIONS] = _why(cores, master, input_bytes)
    if heap and DRIVER_MEMORY not in settings and not set_outside(DRIVER_MEMORY):
        physical = physical_memory()
        sized[DRIVER_MEMORY] = driver_memory_for(input_bytes, physical)
        ram = f", {physical / GIB:,.0f} GiB of RAM" if physical else ""
        sized[SIZED_MEMORY] = f"sized for {(input_bytes or 0) / 2**20:,.0f} MiB of input{ram}"
    return sized


def set_outside(key: str) -> bool:
    """Whether `key` is set where spark-submit reads it, not in our settings: PYSPARK_SUBMIT_ARGS
    (--conf key=..., or --driver-memory), SPARK_DRIVER_MEMORY, or spark-defaults.conf (of
    SPARK_CONF_DIR, else SPARK_HOME/conf)."""
    args = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    if re.search(rf"(?:^|\s){re.escape(key)}\s*=", args):
        return True
    if key == DRIVER_MEMORY and (os.environ.get("SPARK_DRIVER_MEMORY") or "--driver-memory" in args):
        return True
    folder = os.environ.get("SPARK_CONF_DIR") or (
        os.path.join(os.environ["SPARK_HOME"], "conf") if os.environ.get("SPARK_HOME") else "")
    try:
        lines = open(os.path.join(folder, "spark-defaults.conf")).read().splitlines() if folder else []
    except OSError:
        lines = []
    return any(line.split()[:1] == [key] or line.strip().startswith(key + "=") for line in lines)


def _launch_conf(spark):
    try:
        return spark.sparkContext.getConf()
    except Exception:  # Spark Connect: no SparkContext
        return None


def explicit_partitions(spark) -> bool:
    """True when someone chose the session's shuffle partitions: at launch (builder,
    spark-submit --conf, spark-defaults.conf) or on the session (anything but Spark's 200).
    Under Spark Connect only the latter can be told."""
    value = str(spark.conf.get(SHUFFLE_PARTITIONS, SPARK_DEFAULT_PARTITIONS)).strip()
    if value != SPARK_DEFAULT_PARTITIONS:
        return True
    conf = _launch_conf(spark)
    return conf is not None and conf.contains(SHUFFLE_PARTITIONS)


def session_partitions(spark, input_bytes: int | None = None) -> tuple[int, str] | None:
    """(partitions, why) sized for a session whose shuffle partitions nobody chose; None when
    someone did, or when it cannot be told (Spark Connect: the server's setting stands)."""
    if explicit_partitions(spark):
        return None
    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect
        return None
    cores = local_cores(context.master)
    if cores is not None:
        return partitions_for(cores, input_bytes), _why(cores, context.master, input_bytes)
    # A cluster's default parallelism counts the executors registered now: with dynamic
    # allocation that can be 2. Never fewer than Spark's own 200 there.
    cores = context.defaultParallelism
    parts = max(int(SPARK_DEFAULT_PARTITIONS), partitions_for(cores, input_bytes))
    return parts, f"sized for {cores} cores of default parallelism{_input(input_bytes)}, at least 200"


def _conf(spark, key: str) -> str:
    try:
        return str(spark.conf.get(key, "") or "")
    except Exception:  # a key a Spark Connect server will not show
        return ""


# What `sized` chose, for sessions that refuse our own key (Databricks serverless lets a
# session set only a few of Spark's): by id of the session object, while the block runs.
_NOTED: dict[int, str] = {}


def describe(spark) -> Sizing:
    """What the session uses now, and why, for the report."""
    from neardup_spark.runtime.routing import shuffle_partitions

    memory = _conf(spark, DRIVER_MEMORY)
    why = _conf(spark, SIZED_PARTITIONS) or _NOTED.get(id(spark)) or "set"
    return Sizing(shuffle_partitions(spark), why, memory, _conf(spark, SIZED_MEMORY) or ("set" if memory else ""))


def _was_set(spark, key: str) -> bool:
    try:
        return bool(spark._jsparkSession.conf().contains(key))
    except Exception:  # pragma: no cover - no JVM handle: set back to the value read
        return True


def _tried(action) -> bool:
    """Whether the session let `action` (a conf change) happen."""
    try:
        action()
        return True
    except Exception:  # noqa: BLE001 - a key the session does not let anyone set
        return False


@contextmanager
def sized(spark, input_bytes: int | None = None) -> Iterator[Sizing]:
    """Within the block, a session whose shuffle partitions nobody chose uses sized ones
    (then set back as they were: a notebook's session is the user's); yields what the run
    uses. Inside another `sized` block it changes nothing. A session that refuses the
    setting keeps its own, and the report says what sizing would have chosen."""
    chosen = None
    if not (_conf(spark, SIZED_PARTITIONS) or id(spark) in _NOTED):
        chosen = session_partitions(spark, input_bytes)
    if chosen is None:
        yield describe(spark)
        return
    parts, why = chosen
    was_set = _was_set(spark, SHUFFLE_PARTITIONS)
    before = spark.conf.get(SHUFFLE_PARTITIONS, SPARK_DEFAULT_PARTITIONS)
    if not _tried(lambda: spark.conf.set(SHUFFLE_PARTITIONS, str(parts))):
        _NOTED[id(spark)] = f"the session's own: it refused {SHUFFLE_PARTITIONS}={parts} ({why})"
        try:
            yield describe(spark)
        finally:
            _NOTED.pop(id(spark), None)
        return
    noted = _tried(lambda: spark.conf.set(SIZED_PARTITIONS, why))
    if not noted:
        _NOTED[id(spark)] = why
    try:
        yield describe(spark)
    finally:
        # Each set back on its own: one the session refuses never hides the block's error.
        if was_set:
            _tried(lambda: spark.conf.set(SHUFFLE_PARTITIONS, before))
        else:
            _tried(lambda: spark.conf.unset(SHUFFLE_PARTITIONS))
        if noted:
            _tried(lambda: spark.conf.unset(SIZED_PARTITIONS))
        _NOTED.pop(id(spark), None)


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
