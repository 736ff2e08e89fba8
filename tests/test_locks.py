"""SQLite's locks are POSIX advisory locks, held by the process: closing any descriptor of the
file drops every lock the process holds on it (https://www.sqlite.org/howtocorrupt.html, 2.2).
Opening a store must never open and close the file itself while another connection of the
process may be writing, or another process writes under that connection's lock."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from slotmagic import Session, StoreError
from slotmagic._store import opening

# Another process tries, without waiting, what a lock held here must stop.
OTHER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)
try:
    db.execute(sys.argv[2])
    print("done")
except sqlite3.OperationalError as exc:
    print(exc)
"""


def other_process(path: Path, statement: str) -> str:
    done = subprocess.run([sys.executable, "-c", OTHER, str(path), statement], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "state.sqlite3"
    with Session.open("nb", db_path=path) as s:
        s.submit_turn("hello")
    return path


def test_opening_a_store_keeps_the_write_lock_another_connection_of_the_process_holds(store: Path) -> None:
    writer = sqlite3.connect(store, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE sessions SET created_at = created_at")
        # In WAL mode leaving WAL needs the file's exclusive lock: refused while this process writes.
        assert other_process(store, "PRAGMA journal_mode = DELETE") == "database is locked"
        opening.check_header(str(store))  # what opening a second session on the file does first
        assert other_process(store, "PRAGMA journal_mode = DELETE") == "database is locked"
        writer.execute("COMMIT")
    finally:
        writer.close()
    with Session.open("nb", db_path=store) as s:
        assert [m.content for m in s.messages() if m.role == "user"] == ["hello"]


def test_a_rollback_journal_writer_keeps_its_lock_while_a_session_opens(tmp_path: Path) -> None:
    path = tmp_path / "plain.sqlite3"
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("CREATE TABLE notes (text TEXT)")
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("INSERT INTO notes VALUES ('mine')")
        assert other_process(path, "BEGIN IMMEDIATE") == "database is locked"
        with pytest.raises(StoreError, match="not a slotmagic store"):
            Session.open("nb", db_path=path)  # someone else's file: refused, and read through SQLite
        assert other_process(path, "BEGIN IMMEDIATE") == "database is locked"
        writer.execute("COMMIT")
    finally:
        writer.close()


def test_a_file_that_is_not_a_database_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("my notes, not a database\n" * 100)
    with pytest.raises(StoreError) as caught:
        Session.open("nb", db_path=path)
    message = str(caught.value)
    assert "\n" not in message and "it is not an SQLite database" in message
    assert path.read_text() == "my notes, not a database\n" * 100
