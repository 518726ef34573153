"""Independent Spark actions run at once.

Small jobs spend more time waiting on scheduling than working, and several
writes of one stage need nothing from each other: each gets its own thread,
so Spark runs their jobs side by side.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, TypeVar

T = TypeVar("T")


def in_background(fn: Callable[[], T]) -> "Future[T]":
    """fn() started in a thread of its own, for driver-side Python work (no Spark
    jobs) that would otherwise hold up the stages; `.result()` waits for it."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="neardup-background")
    try:
        return pool.submit(fn)
    finally:
        pool.shutdown(wait=False)


def _thread(target: Callable[[], None], session=None):
    """A thread that keeps the caller's Spark job description (classic sessions) or, under
    Spark Connect, the session it must be given (pyspark 4)."""
    from pyspark import InheritableThread

    if session is not None and "connect" in type(session).__module__:
        return InheritableThread(target=target, session=session)
    return InheritableThread(target=target)


def started(fn: Callable[[], T], session=None) -> "Future[T]":
    """fn() started now in a thread that keeps the caller's Spark job description, so a
    small Spark action overlaps the caller's own; `.result()` waits for it and re-raises
    its error. `session`: the SparkSession fn uses (needed under Spark Connect)."""
    future: Future = Future()

    def go():
        try:
            future.set_result(fn())
        except BaseException as exc:  # handed to whoever asks for the result
            future.set_exception(exc)

    thread = _thread(go, session)
    thread.daemon = True
    thread.start()
    return future


def run_all(tasks: list, parallel: bool = True, session=None) -> None:
    """Call every task; with `parallel`, each in its own thread (Spark runs their jobs
    at once: small jobs wait on scheduling more than on work). The first error is raised
    after all have finished. `session`: the SparkSession the tasks use (needed under
    Spark Connect)."""
    if not parallel or len(tasks) < 2:
        for task in tasks:
            task()
        return
    errors: list[BaseException] = []

    def guarded(task):
        def go():
            try:
                task()
            except BaseException as exc:  # re-raised below, in the caller's thread
                errors.append(exc)
        return go

    threads = [_thread(guarded(task), session) for task in tasks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
