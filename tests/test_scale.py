"""What a cell on one slot reads grows with that slot, not with the session's other slots.

A session of 10 slots and one of 10,000, built alike around the slot worked on (``work``, two
levels below ``default``), then opened anew: a budget, a turn, an export, a switch and a show
on ``work`` (and a cell run, run again and edited there) run the same statements and read
the same rows in both. Counted at the store's
connection (statements sent, rows fetched), not timed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from slotmagic import Message, Session, TurnInfo
from slotmagic._core.slots import SlotConfig
from slotmagic._store.connection import GuardedCursor


def build(path: Path, others: int) -> None:
    """``default`` with a turn, ``mid`` below it, ``work`` below that with a turn of its own,
    and ``others`` more slots: a third with a turn, 50 below ``default``, the rest below those."""
    with Session.open("scale", db_path=path) as session:
        session.append([Message.user("the root question"), Message.assistant("an answer")])
        store, sid = session.store, session.session_id
        with store.atomic():
            store.derive_slot(sid, "mid", "default", SlotConfig())
            store.derive_slot(sid, "work", "mid", SlotConfig())
            store.append_turn(sid, "work", [Message.user("work's question"), Message.assistant("ok")], TurnInfo())
            for i in range(others):
                store.derive_slot(sid, f"s{i}", "default" if i < 50 else f"s{(i - 50) % 50}", SlotConfig())
                if i % 3 == 0:
                    turn = [Message.user(f"a question of s{i}"), Message.assistant("an answer")]
                    store.append_turn(sid, f"s{i}", turn, TurnInfo())


@dataclass
class Read:
    statements: list[str] = field(default_factory=list)
    rows: int = 0


@pytest.fixture
def reading(monkeypatch: pytest.MonkeyPatch) -> Callable[[Session, Callable[[], object]], Read]:
    """The statements a session's store runs and the rows it fetches while ``call()`` runs."""
    counting: list[Read] = []

    def wrap(name: str, size: Callable[[Any], int]) -> None:
        real = getattr(GuardedCursor, name)

        def counted(self: GuardedCursor, *args: Any) -> Any:
            found = real(self, *args)
            if counting:
                counting[-1].rows += size(found)
            return found

        monkeypatch.setattr(GuardedCursor, name, counted)

    wrap("fetchall", len)
    wrap("fetchone", lambda found: 0 if found is None else 1)
    wrap("fetchmany", len)

    def read(session: Session, call: Callable[[], object]) -> Read:
        found = Read()
        session.store._db.set_trace_callback(  # type: ignore[attr-defined]
            lambda sql: None if sql.startswith("--") else found.statements.append(" ".join(sql.split()))
        )
        counting.append(found)
        try:
            call()
        finally:
            counting.pop()
            session.store._db.set_trace_callback(None)  # type: ignore[attr-defined]
        return found

    return read


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Path]]:
    paths = {}
    for others in (10, 10_000):
        paths[others] = tmp_path_factory.mktemp(f"scale{others}") / "state.sqlite3"
        build(paths[others], others)
    yield paths


OPERATIONS: dict[str, Callable[[Session, Path], object]] = {
    "budget": lambda s, tmp: s.budget("work"),
    "preview": lambda s, tmp: s.preview("work"),
    "turn": lambda s, tmp: s.submit_turn("one more", slot="work"),
    "export": lambda s, tmp: s.history.export(tmp / "work.md", "work"),
    "switch": lambda s, tmp: s.switch_slot("work"),
    "show": lambda s, tmp: s.slot("work"),
    # a cell run, then run again unchanged (replayed), then edited (a sibling forked)
    "cell": lambda s, tmp: [s.submit_turn(text, slot="work", cell_id="c1") for text in ("ask", "ask", "edited")],
}


@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_one_slot_reads_the_same_among_10_or_10000_slots(
    operation: str,
    sessions: dict[int, Path],
    tmp_path: Path,
    reading: Callable[[Session, Callable[[], object]], Read],
) -> None:
    found: dict[int, Read] = {}
    for others, path in sessions.items():
        copy = tmp_path / f"{others}.sqlite3"
        copy.write_bytes(path.read_bytes())
        with Session.open("scale", db_path=copy) as session:
            first = reading(session, lambda: OPERATIONS[operation](session, tmp_path))
            again = reading(session, lambda: OPERATIONS[operation](session, tmp_path))
        found[others] = first
        assert again.rows <= first.rows
    small, large = found[10], found[10_000]
    assert large.rows == small.rows, (operation, small, large)
    assert len(large.statements) == len(small.statements), (operation, small.statements, large.statements)
    assert large.rows < 60, large  # the slot's chain of rows and its few messages, not the session's


def test_a_tree_reads_each_slot_row_and_each_last_question_once(
    sessions: dict[int, Path], tmp_path: Path, reading: Callable[[Session, Callable[[], object]], Read]
) -> None:
    """``session.tree()`` (and ``%slot tree``, its text) in a new kernel: the session's slot rows
    in one statement and each row's own last question in another, a row each, for 13 slots as
    for 10,003; made again after a turn, the tree reads that slot's last question alone."""
    again: dict[int, Read] = {}
    for others, path in sessions.items():
        copy = tmp_path / f"{others}.sqlite3"
        copy.write_bytes(path.read_bytes())
        with Session.open("scale", db_path=copy) as session:
            first = reading(session, session.tree)
            tree = session.tree()
            session.submit_turn("one more", slot="work")
            again[others] = reading(session, session.tree)
            assert session.tree().node("work").last_user == "one more"
        slots = others + 3
        with_question = 2 + len(range(0, others, 3))  # default, work and every third s<i> asked one
        selects = [s for s in first.statements if s.startswith("SELECT")]
        assert len(tree) == slots and len(selects) == 2, first.statements
        looks = first.statements.count("PRAGMA data_version")  # a row each: has another connection written?
        assert first.rows == slots + with_question + looks, first
        assert tree.node("s3").last_user == "a question of s3"
        assert tree.node("s4").last_user == "the root question"  # none of its own: its parent's
    small, large = again[10], again[10_000]
    assert (large.rows, large.statements) == (small.rows, small.statements), (small, large)
    assert [s for s in large.statements if s.startswith("SELECT")] == [large.statements[-1]]
    assert large.rows - large.statements.count("PRAGMA data_version") == 2  # work's question, and default's


@pytest.fixture
def scale_kernel(sessions: dict[int, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """The session of 10,003 slots as the store a new kernel opens (asked for before ``ip``)."""
    (tmp_path / "state.sqlite3").write_bytes(sessions[10_000].read_bytes())  # _private_store's file
    monkeypatch.setenv("SLOTMAGIC_SESSION", "scale")
    return 10_000 + 3


def test_slot_tree_as_text_reads_as_the_tree_and_makes_each_words_once(
    scale_kernel: int,
    ip: Any,
    reading: Callable[[Session, Callable[[], object]], Read],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``%slot tree`` as text, the first cell after ``%load_ext`` on 10,003 slots: the tree's two
    statements and its rows, a line a slot, and the words of those lines (mode, counts, fork
    point) made once for the slots that share them, not once a line."""
    from slotmagic._magics import SlotMagic
    from slotmagic._tree import _counts

    ip.run_cell("%config SlotMagic.widgets = False")
    session = next(c for c in ip.configurables if isinstance(c, SlotMagic)).session()
    _counts.cache_clear()
    capsys.readouterr()
    found = reading(session, lambda: ip.run_cell("%slot tree"))
    lines = capsys.readouterr().out.splitlines()
    selects = [s for s in found.statements if s.startswith("SELECT")]
    assert len(selects) == 2, found.statements
    with_question = 2 + len(range(0, scale_kernel - 3, 3))
    assert found.rows == scale_kernel + with_question + found.statements.count("PRAGMA data_version"), found
    assert lines[0] == f"session scale · {scale_kernel:,} slots · current slot default"
    assert len(lines) == 1 + scale_kernel
    assert "  │  └─ work  (full · 2 turns, 4 messages, " in lines[3] and lines[3].endswith("“work's question”)")
    made = _counts.cache_info()
    assert made.hits + made.misses == scale_kernel and made.misses < 10, made


def test_a_missing_slot_still_names_the_closest(sessions: dict[int, Path], tmp_path: Path) -> None:
    """Rows read in part still tell an unknown name's nearest, from every slot of the session."""
    copy = tmp_path / "state.sqlite3"
    copy.write_bytes(sessions[10].read_bytes())
    with Session.open("scale", db_path=copy) as session:
        with pytest.raises(KeyError, match="did you mean 's9'"):
            session.slot("s9x")
        assert session.has_slot("s9") and not session.has_slot("s9x")
        # a slot made by another connection meanwhile is found by name
        with Session.open("scale", db_path=copy) as other:
            other.derive_slot("late", "s3")
        assert session.slot("late").meta.parent_id == "s3"
        assert [s.id for s in session.list_slots()].count("late") == 1


# -- what an open reads -------------------------------------------------------------------------

_WRITE = """
import os, sys
from slotmagic import Message, Session
session = Session.open("s", db_path=sys.argv[1])
session.append([Message.user("q " * 200), Message.assistant("a " * 800)] * int(sys.argv[2]))
if sys.argv[3] == "close":
    session.close()
else:
    os._exit(0)  # killed: nothing closed, the WAL keeps its frames
"""


def _in_another_process(path: Path, pairs: int, how: str, cache: Path) -> None:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    env = {
        **os.environ,
        "XDG_CACHE_HOME": str(cache),
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    subprocess.run([sys.executable, "-c", _WRITE, str(path), str(pairs), how], env=env, check=True, timeout=120)


def _opening_reads(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements opening ``path`` runs, on every connection it makes, in a process that
    knows nothing of the file yet."""
    import sqlite3

    from slotmagic._store import opening

    monkeypatch.setattr(opening, "_FOUND_WHOLE", {})
    seen: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db = connect(*args, **kwargs)
        db.set_trace_callback(lambda sql: None if sql.startswith("--") else seen.append(" ".join(sql.split())))
        return db

    monkeypatch.setattr(sqlite3, "connect", traced)
    try:
        with Session.open("s", db_path=path):
            pass
    finally:
        monkeypatch.setattr(sqlite3, "connect", connect)
    return seen


def test_opening_a_file_closed_cleanly_reads_none_of_it_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file the last kernel closed cleanly, unchanged since, is opened by a new kernel without
    reading it whole, whatever its size; a file a killed process left, or one another program
    changed since, is read whole (``PRAGMA quick_check``) at its next opening."""
    import sqlite3
    import time

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    small, large = tmp_path / "small.sqlite3", tmp_path / "large.sqlite3"
    _in_another_process(small, 10, "close", tmp_path / "cache")
    _in_another_process(large, 1_000, "close", tmp_path / "cache")  # ~2.5 MB
    time.sleep(0.1)  # the closing stores' records wait for the files' times to settle
    found = {path: _opening_reads(path, monkeypatch) for path in (small, large)}
    for statements in found.values():
        assert not any("quick_check" in s or "application_id" in s for s in statements), statements
    assert len(found[small]) == len(found[large]) <= 6, found

    _in_another_process(small, 1, "kill", tmp_path / "cache")
    assert sum("quick_check" in s for s in _opening_reads(small, monkeypatch)) == 1  # after a crash: whole
    time.sleep(0.1)
    assert not any("quick_check" in s for s in _opening_reads(small, monkeypatch))  # closed cleanly since

    with sqlite3.connect(large) as db:  # another program's change
        db.execute("UPDATE sessions SET created_at = created_at + 1")
    db.close()
    assert sum("quick_check" in s for s in _opening_reads(large, monkeypatch)) == 1


# -- what an import loads -----------------------------------------------------------------------


def test_import_slotmagic_loads_no_store_engine_or_session() -> None:
    """``import slotmagic`` loads plain values (core records, errors) and the providers'
    registry (it says which models count exactly: ``slotmagic.tokens`` alone counts OpenAI's
    models exactly), not a provider's wire module; the session, the turn engine, the stores
    and the tools load when first named, all at once."""
    import json
    import os
    import subprocess
    import sys

    code = (
        "import json, sys, slotmagic; before = sorted(m for m in sys.modules if m.startswith('slotmagic'));"
        " slotmagic.Session; after = sorted(m for m in sys.modules if m.startswith('slotmagic'));"
        " print(json.dumps([before, after]))"
    )
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    found = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    before, after = json.loads(found.stdout.splitlines()[-1])
    heavy = ("slotmagic._store", "slotmagic._engine", "slotmagic.session", "slotmagic.tools")
    assert not [m for m in before if m.startswith(heavy)], before
    wire = ("slotmagic.providers._openai", "slotmagic.providers._anthropic", "slotmagic.providers._ollama")
    assert not [m for m in before if m.startswith(wire)], before
    assert len(before) <= 40, before
    assert all(any(m == h or m.startswith(h + ".") for m in after) for h in heavy), after


def test_a_state_marker_kept_per_row_is_the_one_made_afresh(tmp_path: Path) -> None:
    """Each row's part of a recorded cell's state marker is kept on the row while what it shows
    stands: after any change, the marker is the one a store that kept nothing makes."""
    from slotmagic._store import open_store

    path = tmp_path / "state.sqlite3"
    with Session.open("m", db_path=path) as session:
        session.derive_slot("a")
        changes: list[Callable[[], object]] = [
            lambda: session.submit_turn("a question", slot="a"),
            lambda: session.rename_slot("a", "b"),
            lambda: session.configure_slot("b", system="be brief"),
            lambda: session.switch_slot("b"),
            lambda: session.derive_slot("c", "b"),
            lambda: session.history.pin(0, "b"),
            lambda: session.delete_slot("c"),
            lambda: session.history.undo("b"),
        ]
        seen = {session.store.state_marker("m")}
        for change in changes:
            change()
            kept = session.store.state_marker("m")
            with open_store(str(path)) as fresh:
                assert kept == fresh.state_marker("m"), change
            seen.add(kept)
        assert len(seen) == len(changes) + 1  # every change shows
