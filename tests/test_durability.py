"""State survives other processes, restarts and crashes."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slotmagic import Session

HERE = Path(__file__).resolve().parent


def run_python(code: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_reopen_in_a_second_process(db_path: Path) -> None:
    with Session.open("nb", db_path=db_path, model="echo") as session:
        session.submit_turn("entry")
        session.derive_slot("branch")
        session.switch_slot("branch")
        session.submit_turn("in branch")
        expected = {s.id: [m.to_dict() for m in session.messages(s.id)] for s in session.list_slots()}

    out = run_python(
        "import json, sys\n"
        "from slotmagic import Session\n"
        "s = Session.open('nb', db_path=sys.argv[1])\n"
        "print(json.dumps({'current': s.current_slot,"
        " 'slots': {x.id: [m.to_dict() for m in s.messages(x.id)] for x in s.list_slots()},"
        " 'parent': s.slot('branch').meta.parent_id}))\n"
        "s.submit_turn('from the second process')\n",
        str(db_path),
    )
    seen = json.loads(out)
    assert seen == {"current": "branch", "slots": expected, "parent": "default"}
    with Session.open("nb", db_path=db_path) as session:
        assert session.messages()[-2].content == "from the second process"


def check_intact(db_path: Path) -> tuple[int, int]:
    """Every slot's counters match its rows and every turn is whole; returns (slots, turns)."""
    with sqlite3.connect(db_path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    turns_seen = 0
    with Session.open("crash", db_path=db_path) as session:
        slots = session.list_slots()
        for slot in slots:
            messages = session.messages(slot.id)
            turns = session.turns(slot.id)
            assert slot.meta.message_count == len(messages)
            assert slot.meta.total_tokens == sum(m.tokens for m in messages)
            assert [t.number for t in turns] == list(range(1, len(turns) + 1))
            assert sum(t.count for t in turns) == len(messages)
            for turn in turns:
                part = messages[turn.start : turn.end]
                if turn.info.kind == "turn":
                    assert [m.role for m in part] == ["user", "assistant"]
                    assert part[1].content.endswith("last user message: " + part[0].content)
                else:
                    tag, n = turn.info.extra["tag"], turn.info.extra["n"]
                    assert [m.content.split(" ")[:2] for m in part] == [[tag, f"{i}/{n}"] for i in range(1, n + 1)]
            turns_seen += len(turns)
    return len(slots), turns_seen


@pytest.mark.slow
def test_sigkill_while_writing_never_tears_a_turn(db_path: Path) -> None:
    rng = random.Random(7)
    kills = 25
    for round_ in range(kills):
        writer = subprocess.Popen(
            [sys.executable, str(HERE / "crash_writer.py"), str(db_path), str(round_)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready", writer.stderr.read() if writer.stderr else ""
        time.sleep(rng.uniform(0.02, 0.25))
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(timeout=10)
        assert writer.returncode == -signal.SIGKILL, "the writer stopped before it was killed"
        check_intact(db_path)
    slots, turns = check_intact(db_path)
    assert turns > kills * 5, f"only {turns} turns written: the test did not exercise the store"
    assert slots > 3
