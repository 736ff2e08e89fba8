"""One mypy cache per test run, for the tests that run mypy (test_lint.py, test_turn_args.py):
both type-check slotmagic and the standard library's stubs, which is nearly all of a cold run,
so whichever runs second checks little more than what differs.

An incremental run reports what a cold one does: mypy reuses a module's entry only when its
source, its options and the interfaces it depends on are unchanged, and an entry keeps the
module's errors, which are reported again. The cache starts empty with each run (a checkout's
own .mypy_cache is never read), and runs on parallel workers take turns under a lock: mypy's
cache is not made for two writers at once.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def shared_mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The run's mypy cache folder, held for the caller alone until it is done."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # a worker's base is a folder of the run's, shared by every worker
    if sys.platform == "win32":  # no flock: a cache of the caller's own, cold as it ever was
        yield tmp_path_factory.mktemp("mypy-cache")
        return
    import fcntl

    folder = base / "mypy-cache"
    with open(base / "mypy-cache.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            folder.mkdir(exist_ok=True)
            yield folder
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
