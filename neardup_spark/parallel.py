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


def started(fn: Callable[[], T]) -> "Future[T]":
    """fn() started now in a thread that keeps the caller's Spark job description, so a
    small Spark action overlaps the caller's own; `.result()` waits for it and re-raises
    its error."""
    from pyspark import InheritableThread

    future: Future = Future()

    def go():
        try:
            future.set_result(fn())
        except BaseException as exc:  # handed to whoever asks for the result
            future.set_exception(exc)

    InheritableThread(target=go, daemon=True).start()
    return future


def run_all(tasks: list, parallel: bool = True) -> None:
    """Call every task; with `parallel`, each in its own thread (Spark runs their jobs
    at once: small jobs wait on scheduling more than on work). The first error is raised
    after all have finished."""
    if not parallel or len(tasks) < 2:
        for task in tasks:
            task()
        return
    from pyspark import InheritableThread  # keeps the job description (the stage name)

    errors: list[BaseException] = []

    def guarded(task):
        def go():
            try:
                task()
            except BaseException as exc:  # re-raised below, in the caller's thread
                errors.append(exc)
        return go

    threads = [InheritableThread(target=guarded(task)) for task in tasks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
