"""A real Spark standalone cluster for tests: a Master and Workers, separate JVMs on 127.0.0.1,
started from the classes inside the pyspark package (it ships no start-master.sh).

`private_dir` gives every Worker (and so its executors) its own empty tmpfs over that
directory, in a mount namespace of its own: a path the driver and the executors see as
different places, as a driver-local directory is on a multi-node cluster.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pyspark


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(predicate, timeout: float, what: str, logs: list[Path]) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return
        time.sleep(0.3)
    tails = "\n".join(p.read_text(errors="replace")[-2000:] for p in logs if p.exists())
    raise RuntimeError(f"standalone cluster: {what} not ready in {timeout:.0f} s\n{tails}")


def can_make_private_mounts() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True)
    return probe.returncode == 0


@contextmanager
def standalone_cluster(work: Path, workers: int = 2, cores: int = 1, memory: str = "1g",
                       private_dir: Path | None = None) -> Iterator[str]:
    """Yields the master URL (spark://127.0.0.1:PORT); every daemon is stopped after."""
    home = Path(pyspark.__file__).parent
    spark_class = str(home / "bin" / "spark-class")
    env = {**os.environ, "SPARK_HOME": str(home), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1"}
    work.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    logs: list[Path] = []

    def start(name: str, cmd: list[str]) -> None:
        log = work / f"{name}.log"
        logs.append(log)
        with open(log, "wb") as fh:
            procs.append(subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True))

    try:
        start("master", [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                         "--port", str(port), "--webui-port", str(_free_port())])
        for i in range(workers):
            cmd = [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                   "--cores", str(cores), "--memory", memory, "--webui-port", str(_free_port()),
                   "--work-dir", str(work / f"worker-{i}")]
            if private_dir is not None:
                private_dir.mkdir(parents=True, exist_ok=True)
                cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                       'mount -t tmpfs neardup-private "$0" && exec "$@"', str(private_dir), *cmd]
            start(f"worker-{i}", cmd)
        master_log = logs[0]

        def registered() -> bool:
            text = master_log.read_text(errors="replace") if master_log.exists() else ""
            return text.count("Registering worker") >= workers

        _wait_for(registered, 90, f"{workers} worker(s)", logs)
        yield url
    finally:
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
