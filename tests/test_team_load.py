"""The team harness (``bench/bench_team.py``) at a small size, with the benchmark's assertions:
5 kernel-like worker processes on one PostgreSQL database for 30 s, some sharing a session,
while the server terminates one of their connections every 3 s (one in the middle of a write
when there is one) and, on a server of the test's own (initdb), restarts 12 s in.

Every turn a worker was told was stored is stored exactly once, on the slot it was told, its
reply made from exactly the history before it; every turn it was told was not stored is not;
each error is one line; every member of a shared session had every other member's turns in its
tree (no live update missed across the faults); each worker stored turns again after the
restart; an idle team holds one connection per kernel (its listener), a busy one at most two."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from conftest import POSTGRES, require_postgres

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from bench_team import Config, run_team, show

pytestmark = pytest.mark.slow

WORKERS = 5


def can_restart() -> bool:
    """A server of the test's own needs initdb (and, as root, the postgres OS user)."""
    import os
    import pwd

    if shutil.which("initdb") is None and not list(Path("/usr/lib/postgresql").glob("*/bin/initdb")):
        return False
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return False
    return True


def test_a_team_under_load_and_faults_loses_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    own = can_restart()
    if not own:
        require_postgres()  # the shared server, never restarted: the restart part is left out
    cfg = Config(
        url=POSTGRES,
        workers=WORKERS,
        seconds=30,
        rate=5,
        terminate_every=3,
        restart_at=12 if own else 0,
        own_server=own,
        idle_timeout=2,
        idle_phase=5,
    )
    report = run_team(cfg, log=lambda *_: None)
    with capsys.disabled():
        print("\n" + show(report))
    assert report["workers_reporting"] == WORKERS and report["workers_failed"] == 0
    assert report["turns_stored"] > 0.8 * cfg.rate * cfg.seconds
    assert report["turns_stored"] + report["turns_failed"] + report["turns_unknown"] == report["turns_sent"]
    assert (report["lost"], report["duplicated"], report["misstored"], report["misreported"]) == (0, 0, 0, 0)
    assert report["multiline_errors"] == 0
    assert sum(report["terminated"].values()) >= 5  # the faults happened
    assert report["missed_updates"] == 0, report["missed_examples"]
    assert report["lag_ms"]["n"] > 0  # the shared session's members followed each other
    assert report["derives"] > 0 and report["searches"] > 0
    assert report["connections"]["max"] <= 2 * WORKERS
    assert report["connections"]["idle"] == WORKERS  # each kernel's listener, nothing more
    if own:
        assert report["fault_error"] == "" and report["restart_seconds"] is not None
        assert report["recovery_s"]["max"] <= 10, report["recovery_s"]
