"""Progress lines while a run works: a line as each stage starts and ends, and for a long
stage its Spark tasks done out of all (the status tracker).

On a terminal the running line updates in place; elsewhere (a log file, a
notebook, spark-submit on a cluster) a plain line is added every `every`
seconds instead. Off unless asked for: the CLI and the spark-submit job turn
it on (`progress_to(sys.stderr)`) unless --quiet; in a library call, wrap the
call in `with neardup_spark.progress():`.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import IO

# A stage shorter than this shows no task counts: its start and end lines say enough.
QUIET_SECONDS = 2.0


class Progress:
    """Where progress goes (a text stream), and how often a plain running line is added."""

    def __init__(self, stream: IO[str], every: float = 30.0, poll: float = 0.5):
        self.stream, self.every, self.poll = stream, every, poll
        try:
            self.tty = stream.isatty()
        except (AttributeError, ValueError):
            self.tty = False
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        with self._lock:
            self.stream.write(("\r\033[K" if self.tty else "") + text + "\n")
            self.stream.flush()

    def _running(self, text: str) -> None:
        with self._lock:
            self.stream.write("\r\033[K" + text if self.tty else text + "\n")
            self.stream.flush()

    @contextmanager
    def stage(self, name: str, tasks, figures: Mapping[str, int]) -> Iterator[None]:
        """Lines around a stage. `tasks()` -> (done, all) Spark tasks of the running stages, or
        None; `figures` is read at the end for the counts recorded meanwhile."""
        before = dict(figures)
        start = time.perf_counter()
        self._running(f"neardup: {name} ...")
        stop = threading.Event()
        watcher = threading.Thread(target=self._watch, args=(name, start, tasks, stop), daemon=True,
                                   name="neardup-progress")
        watcher.start()
        ended = "failed after"
        try:
            yield
            ended = "done in"
        finally:
            stop.set()
            watcher.join()
            found = {k: v for k, v in figures.items() if before.get(k) != v}
            rows = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in found.items())
            self.line(f"neardup: {name} {ended} {time.perf_counter() - start:.1f} s" + (f" ({rows})" if rows else ""))

    def _watch(self, name: str, start: float, tasks, stop: threading.Event) -> None:
        last_line = start
        while not stop.wait(self.poll):
            now = time.perf_counter()
            if now - start < QUIET_SECONDS:
                continue
            if not self.tty and now - last_line < self.every:
                continue
            counted = tasks() if tasks is not None else None
            shown = f", tasks {counted[0]:,}/{counted[1]:,}" if counted and counted[1] else ""
            self._running(f"neardup: {name} ... {now - start:.0f} s{shown}")
            last_line = now


_CURRENT: ContextVar[Progress | None] = ContextVar("neardup_progress", default=None)


def current_progress() -> Progress | None:
    return _CURRENT.get()


@contextmanager
def progress_to(stream: IO[str] | None = None, every: float = 30.0) -> Iterator[Progress]:
    """Runs started inside this block print their progress to `stream` (default stderr)."""
    token = _CURRENT.set(Progress(stream if stream is not None else sys.stderr, every))
    try:
        yield _CURRENT.get()
    finally:
        _CURRENT.reset(token)


def task_counter(context):
    """() -> (tasks done, tasks) over the active Spark stages of a SparkContext, or None."""
    if context is None:
        return None
    tracker = context.statusTracker()

    def count():
        done = total = 0
        try:
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    done += info.numCompletedTasks
                    total += info.numTasks
        except Exception:  # the session stopping under us: no counts, no error
            return None
        return done, total

    return count
