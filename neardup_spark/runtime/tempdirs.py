"""Temporary folders of one process, removed when it exits or, if it was killed, by the next one."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile


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
