"""Committers of one index in separate processes, round after round: every round, each reads
the newest version, waits for the others, then tries to commit the next one."""

from __future__ import annotations

import multiprocessing as mp

from neardup_spark.archive import index as ix
from neardup_spark.archive import versions


def manifest(version: int, parts: list[str]) -> dict:
    return {"format": ix.FORMAT, "version": version, "parts": parts, "batches": {}, "documents": len(parts),
            "params": {}}


def _committer(make_store, where: str, me: int, rounds: int, barrier, results) -> None:
    store = make_store(where)
    barrier.wait()  # every process is ready (a JVM may take seconds)
    won = []
    for _ in range(rounds):
        barrier.wait()
        seen = ix.open_index_store(store).manifest
        barrier.wait()  # everyone has read the same version
        version = seen["version"]
        part = f"part-v{version + 1}-by{me}"
        try:
            versions.commit(store, manifest(version + 1, [*seen["parts"], part]), expected_version=version)
            won.append(part)
        except versions.ConcurrentCommitError:
            pass
    results.put((me, won))


def race(make_store, where: str, committers: int, rounds: int) -> list[str]:
    """The parts whose commit reported success, in the order of their rounds' versions.
    `make_store(where)` (a module-level function) opens the Store in each process."""
    versions.commit(make_store(where), manifest(1, ["part-v1"]), expected_version=0)
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(committers), ctx.Queue()
    procs = [ctx.Process(target=_committer, args=(make_store, where, i, rounds, barrier, results))
             for i in range(committers)]
    for p in procs:
        p.start()
    won = dict(results.get(timeout=600) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return sorted(part for parts in won.values() for part in parts)
