"""State survives other processes, restarts and crashes."""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest
from reflect_server import ReflectServer, parse_reflection

from slotmagic import Session

HERE = Path(__file__).resolve().parent


@pytest.fixture
def db_path(store_target: str) -> str:
    """Every test here runs on a SQLite file and on a PostgreSQL schema."""
    return store_target


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


def check_intact(db_path: Path) -> tuple[int, set[str]]:
    """Every slot's counters match its rows, every turn is whole and every model turn's reply
    was made from exactly the history stored before it; returns (slots, tags stored)."""
    if not str(db_path).startswith("postgresql://"):  # PostgreSQL keeps its own files whole
        with sqlite3.connect(db_path) as db:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        db.close()
    tags: set[str] = set()
    with Session.open("crash", db_path=db_path) as session:
        slots = session.list_slots()
        for slot in slots:
            messages = session.messages(slot.id)
            turns = session.history.turns(slot.id)
            assert slot.meta.message_count == len(messages)
            assert slot.meta.total_tokens == sum(m.tokens for m in messages)
            assert [t.number for t in turns] == list(range(1, len(turns) + 1))
            assert sum(t.count for t in turns) == len(messages)
            for turn in turns:
                part = messages[turn.start : turn.end]
                if turn.info.kind == "turn":
                    assert [m.role for m in part] == ["user", "assistant"]
                    assert parse_reflection(part[1].content) == (turn.start + 1, part[0].content)
                    tags.add(part[0].content.split(" ")[0])
                else:
                    tag, n = turn.info.extra["tag"], turn.info.extra["n"]
                    assert [m.content.split(" ")[:2] for m in part] == [[tag, f"{i}/{n}"] for i in range(1, n + 1)]
                    tags.add(tag)
    return len(slots), tags


@pytest.mark.slow
def test_sigkill_while_streaming_and_writing_never_tears_or_loses_a_turn(db_path: Path) -> None:
    """The crash loop: writers stream turns over HTTP, append and derive, and are SIGKILLed at
    random moments, often mid-stream; after every kill the store (a SQLite file passing its
    integrity check, or a PostgreSQL schema) holds only whole turns, and holds every turn a
    writer said it had stored. Each writer is killed once it has stored a few turns, at a
    random moment after: the loop exercises the store as much on a slow, busy machine."""
    rng = random.Random(8)
    kills, mid_stream, reported = 60, 0, set()
    started = time.monotonic()
    with ReflectServer(chunks=4, chunk_delay=0.01) as server:
        spawner = subprocess.Popen(
            [sys.executable, str(HERE / "crash_writer.py"), str(db_path), server.url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        assert spawner.stdin is not None and spawner.stdout is not None
        out = lines_of(spawner.stdout)
        try:
            assert out.get(timeout=60).strip() == "serving"
            for round_ in range(kills):
                spawner.stdin.write(f"{round_}\n")
                spawner.stdin.flush()
                line = out.get(timeout=60).strip()
                assert line == f"ready {round_}", line
                lines = until_stored(out, STORED_BEFORE_KILL)
                time.sleep(rng.uniform(0.0, 0.3))
                lines += kill_writer(spawner, out, round_)
                reported |= {line.split()[1] for line in lines if line.startswith("stored ")}
                last = next((line for line in reversed(lines) if line.split()[0] in ("streaming", "stored")), "")
                mid_stream += last.startswith("streaming")
                slots, stored = check_intact(db_path)
                missing = reported - stored
                assert not missing, f"round {round_}: reported stored but missing: {sorted(missing)[:5]}"
        finally:
            spawner.kill()
            spawner.wait(timeout=10)
    elapsed = time.monotonic() - started
    print(f"{kills} kills ({mid_stream} mid-stream), {len(reported)} writes, {slots} slots in {elapsed:.1f} s")
    assert mid_stream >= kills // 10, f"only {mid_stream} kills landed mid-stream"
    assert slots > 3


STORED_BEFORE_KILL = 3  # writes a writer makes before its kill may come


def lines_of(stream: IO[str]) -> queue.Queue[str]:
    """The lines ``stream`` prints, as they come (read on a thread, so a wait can time out)."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
        lines.put("")  # the fork server stopped

    threading.Thread(target=read, daemon=True).start()
    return lines


def until_stored(out: queue.Queue[str], writes: int) -> list[str]:
    """The writer's lines until it has reported ``writes`` stored writes (at most 60 s)."""
    lines: list[str] = []
    while sum(line.startswith("stored ") for line in lines) < writes:
        line = out.get(timeout=60).strip()
        assert line and not line.startswith("dead "), f"the writer stopped before {writes} writes: {lines[-3:]}"
        lines.append(line)
    return lines


def kill_writer(spawner: subprocess.Popen[str], out: queue.Queue[str], round_: int) -> list[str]:
    """SIGKILL the writer of this round; the lines it printed until it died."""
    pid = writer_pid(spawner.pid)
    os.kill(pid, signal.SIGKILL)
    lines: list[str] = []
    while True:
        line = out.get(timeout=60).strip()
        assert line, "the fork server stopped"
        if line.startswith(f"dead {round_} "):
            status = int(line.split()[2])
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, "the writer stopped by itself"
            return lines
        lines.append(line)


def writer_pid(parent: int) -> int:
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])
