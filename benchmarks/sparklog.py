"""What a benchmark run cost beyond wall time: shuffle bytes per pipeline
stage (from Spark's event log) and the peak resident memory of a process tree.

The pipeline names every Spark job after its stage ("neardup: sketch", ...);
`shuffle_by_stage` sums, per such name, the shuffle bytes written by the
tasks of those jobs. `PeakRss` samples /proc every 0.2 s for a process and
all its descendants (the driver JVM, its Python workers): Linux only. Its PSS
readings are sparse, since each costs the measured run CPU time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections import defaultdict
from pathlib import Path

PREFIX = "neardup: "


def event_log_conf(directory: Path) -> list[str]:
    """`--conf` arguments for `neardup run` that write an uncompressed event log into directory."""
    directory.mkdir(parents=True, exist_ok=True)
    return ["--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir=file://{directory}",
            "--conf", "spark.eventLog.compress=false"]


def newest_log(directory: Path) -> list[Path]:
    """The newest application's event log files, in order (Spark 4 rolls logs
    into a directory of events_N_* files; Spark 3.5 writes one file)."""
    logs = list(directory.iterdir())
    if not logs:
        raise FileNotFoundError(f"no Spark event log in {directory}")
    newest = max(logs, key=lambda p: p.stat().st_mtime)
    if newest.is_dir():
        parts = [p for p in newest.iterdir() if p.name.startswith("events_")]
        return sorted(parts, key=lambda p: int(p.name.split("_")[1]))
    return [newest]


def _events(files: list[Path]):
    """Every event of the log files; the last line of the last file may be cut short (a
    run that was killed or ran out of disk) and is then left out."""
    for k, path in enumerate(files):
        with open(path, encoding="utf-8") as fh:
            lines = fh.readlines()
        for n, line in enumerate(lines):
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                if k == len(files) - 1 and n == len(lines) - 1:
                    return
                raise


def shuffle_by_stage(files: list[Path]) -> dict[str, int]:
    """{pipeline stage: shuffle bytes written} from one application's event log."""
    return {k: v["shuffle_bytes"] for k, v in costs_by_stage(files).items() if v["shuffle_bytes"]}


def costs_by_stage(files: list[Path]) -> dict[str, dict[str, float]]:
    """{pipeline stage: {shuffle_bytes, task_seconds, spill_disk_bytes, spill_memory_bytes}}:
    bytes written to shuffle, the summed duration of its tasks (core-seconds, JVM
    and Python), and what its tasks spilled (Spark's "Disk Bytes Spilled": the
    serialized size written to disk; "Memory Bytes Spilled": the in-memory size of
    what was spilled)."""
    stage_to_name: dict[int, str] = {}
    written: dict[str, int] = defaultdict(int)
    busy: dict[str, float] = defaultdict(float)
    spilled: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for event in _events(files):
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            desc = (event.get("Properties") or {}).get("spark.job.description") or ""
            name = desc[len(PREFIX):] if desc.startswith(PREFIX) else "other"
            for sid in event.get("Stage IDs", []):
                stage_to_name[sid] = name
        elif kind == "SparkListenerTaskEnd":
            name = stage_to_name.get(event.get("Stage ID"), "other")
            metrics = event.get("Task Metrics") or {}
            written[name] += int((metrics.get("Shuffle Write Metrics") or {}).get("Shuffle Bytes Written", 0))
            spilled[name][0] += int(metrics.get("Disk Bytes Spilled", 0))
            spilled[name][1] += int(metrics.get("Memory Bytes Spilled", 0))
            info = event.get("Task Info") or {}
            busy[name] += (info.get("Finish Time", 0) - info.get("Launch Time", 0)) / 1000.0
    return {k: {"shuffle_bytes": written[k], "task_seconds": round(busy[k], 2),
                "spill_disk_bytes": spilled[k][0], "spill_memory_bytes": spilled[k][1]} for k in busy}


def _children(pid: int) -> list[int]:
    """Children of every thread of pid (the JVM forks Python workers from other threads)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out.extend(int(x) for x in fh.read().split())
        except OSError:
            pass
    return out


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def _pss_bytes(pid: int) -> int:
    """Proportional set size (Linux 4.14+ smaps_rollup); RSS where it cannot be read."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return _rss_bytes(pid)


class PeakRss:
    """Peaks of the summed RSS and PSS of a process tree (and its size then), sampled
    in a background thread.

    RSS is read every `interval` s (statm: microseconds). PSS is read only when the
    summed RSS has grown by `pss_growth` since the last PSS reading, and at most every
    `pss_interval` s: smaps_rollup walks every page of a process, 27 ms a reading for a
    10k run's JVM and ~50 ms at 100k, so reading it every 0.2 s took ~3.5 s of this
    2-core machine's CPU during a 23 s run, time the measured run lost (PSS is at most
    RSS, and both peak as the heap grows)."""

    def __init__(self, pid: int, interval: float = 0.2, pss_interval: float = 2.0, pss_growth: float = 1.05):
        self.pid, self.interval, self.peak, self.peak_pss, self.processes = pid, interval, 0, 0, 0
        self.pss_interval, self.pss_growth, self.pss_readings = pss_interval, pss_growth, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        pss_rss, pss_at = 0, float("-inf")
        while not self._stop.is_set():
            tree, todo = [], [self.pid]
            while todo:
                p = todo.pop()
                tree.append(p)
                todo.extend(_children(p))
            rss = sum(_rss_bytes(p) for p in tree)
            if rss > self.peak:
                self.peak, self.processes = rss, len(tree)
            now = time.monotonic()
            if rss > pss_rss * self.pss_growth and now - pss_at >= self.pss_interval:
                self.peak_pss = max(self.peak_pss, sum(_pss_bytes(p) for p in tree))
                pss_rss, pss_at, self.pss_readings = rss, now, self.pss_readings + 1
            self._stop.wait(self.interval)

    def __enter__(self) -> "PeakRss":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def measured(cmd: list[str], cwd: Path, env: dict) -> tuple[subprocess.CompletedProcess, float, PeakRss]:
    """cmd run to its end as its own process: (its result, wall seconds, the peaks of its process tree)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with PeakRss(proc.pid) as rss:
        stdout, stderr = proc.communicate()
    wall = time.perf_counter() - start
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr), wall, rss


class LoadSampler:
    """1-minute load average before, after and (every few seconds) during a run, and the
    disk used on the work directory's file system: its growth at the peak over the start."""

    def __init__(self, where: Path, interval: float = 5.0):
        self.where, self.interval, self.samples = where, interval, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _disk(self) -> int:
        return shutil.disk_usage(self.where).used

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.samples.append(os.getloadavg()[0])
            self.disk_peak = max(self.disk_peak, self._disk())

    def __enter__(self) -> "LoadSampler":
        self.before = round(os.getloadavg()[0], 2)
        self.disk_before = self.disk_peak = self._disk()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.after = round(os.getloadavg()[0], 2)
        self.disk_after = self._disk()

    def as_dict(self) -> dict:
        mean = sum(self.samples) / len(self.samples) if self.samples else None
        return {"before": self.before, "after": self.after, "mean_during": None if mean is None else round(mean, 2)}

    def disk(self) -> dict:
        """MB more than at the start: at the peak (sampled) and at the end (what the run left)."""
        mb = lambda b: round((b - self.disk_before) / 2**20)  # noqa: E731
        return {"peak_mb": mb(max(self.disk_peak, self.disk_after)), "end_mb": mb(self.disk_after)}


def accounted(out: Path, expected: int) -> dict:
    """Every document exactly once in a run's clusters table (out/clusters)."""
    return once(sorted((out / "clusters").rglob("*.parquet")), expected)


def once(files: list[Path], expected: int) -> dict:
    """Every id exactly once in the doc_id column of these Parquet files, and as many as expected."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    ids = ds.dataset([str(f) for f in files], format="parquet").to_table(columns=["doc_id"]).column("doc_id")
    rows, distinct = len(ids), pc.count_distinct(ids).as_py()
    return {"expected": expected, "rows": rows, "distinct": distinct, "ok": rows == distinct == expected}


if __name__ == "__main__":  # python -m benchmarks.sparklog EVENT_LOG_DIR
    import sys

    print(json.dumps(costs_by_stage(newest_log(Path(sys.argv[1]))), indent=2))
