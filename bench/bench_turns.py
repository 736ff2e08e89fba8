"""Turn benchmark: what slotmagic costs per turn, beside what it must cost, at growing histories.

Every figure is printed with a ratio against a baseline run in the same process:

- a turn (echo model, from a notebook cell) on a *focused* slot, and the replay of a re-run
  cell, at 100 / 1,000 / 10,000 / 100,000 stored messages, against the same at 100: nothing
  may grow with the history (the request holds the last 10 messages);
- a focused ``view()`` at 100,000 messages asked again, the first after a change elsewhere,
  and cold (a new kernel: nothing cached), against the plain SQLite query for the rows it shows;
- re-running a cell in a session of 200 slots, against one of 2;
- ``session.append`` of a turn (a ~300-character question and a ~1,500-character answer),
  against plain one-row-per-message inserts of the same rows in one transaction (same journal
  and synchronous settings);
- Run All of a 100-cell notebook on a 10,000-message session after a restart, through the
  real ``%%turn`` magic in an IPython shell: total slotmagic time.

    python bench/bench_turns.py            # figures and ratios
    python bench/bench_turns.py --quick    # fewer samples, 10k messages at most
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import sqlite3
import statistics
import string
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from slotmagic import ContextBudget, FocusedConfig, Message, Session, SQLiteStore, TurnInfo
from slotmagic._core.records import CellRef
from slotmagic._core.tokens import estimate_message_tokens

USER_CHARS, ASSISTANT_CHARS = 300, 1_500


def text(rng: random.Random, chars: int) -> str:
    words, length = [], 0
    while length < chars:
        word = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9)))
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:chars]


def counted(message: Message) -> Message:
    return message.with_tokens(estimate_message_tokens(message))


def timed_us(fn: Callable[[], object]) -> float:
    start = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - start) / 1_000


def grow(session: Session, n: int, rng: random.Random, cell_prefix: str | None = None) -> None:
    """Append n messages to the current slot as stored turns (fast: straight into the store)."""
    store, slot = session.store, session.current_slot
    turns = n // 2
    for i in range(turns):
        user = counted(Message.user(text(rng, USER_CHARS)))
        info = TurnInfo(model="echo")
        if cell_prefix is not None:
            info = info.replace(cell=CellRef(f"{cell_prefix}{i}", user.content))
        store.append_turn(
            session.session_id, slot, [user, counted(Message.assistant(text(rng, ASSISTANT_CHARS)))], info
        )


def bench_history(n: int, samples: int, workdir: Path) -> dict[str, float]:
    rng = random.Random(n)
    path = workdir / f"turns-{n}.sqlite3"
    with Session.open("bench", db_path=path) as session:
        grow(session, n, rng)
        session.derive_slot("focused", strategy=FocusedConfig(recent_messages=10))
        session.submit_turn("the cell to replay", cell_id="replayed-cell")
    with Session.open("bench", db_path=path) as session:  # a new kernel
        turn, replay_focused, replay_full = [], [], []
        for i in range(samples):
            turn.append(timed_us(lambda i=i: session.submit_turn(f"question {i}", cell_id=f"cell-{i}", slot="focused")))
            replay_full.append(timed_us(lambda: session.submit_turn("the cell to replay", cell_id="replayed-cell")))
        session.switch_slot("focused")
        session.submit_turn("focused cell", cell_id="focused-cell")
        for _ in range(samples):
            replay_focused.append(timed_us(lambda: session.submit_turn("focused cell", cell_id="focused-cell")))
    med = statistics.median
    return {"turn": med(turn), "replay_full": med(replay_full), "replay_focused": med(replay_focused)}


def bench_view(n: int, samples: int, workdir: Path) -> dict[str, float]:
    """A focused view of a long history three ways: asked again with nothing changed (widgets
    and ``%slot preview`` ask often), the first after a change (a turn on another slot), and
    cold (a new kernel: nothing read yet), each beside the plain query for its rows."""
    rng = random.Random(7)
    path = workdir / f"view-{n}.sqlite3"
    with Session.open("bench", db_path=path) as session:
        grow(session, n, rng)
        session.derive_slot("focused", strategy=FocusedConfig(recent_messages=10))
        session.create_slot("elsewhere")
    plain = sqlite3.connect(path)
    key, length = plain.execute("SELECT id, length FROM slots WHERE name = 'default'").fetchone()

    def plain_query() -> object:
        return plain.execute(
            "SELECT role, content, tokens, extra FROM messages WHERE slot = ? AND seq >= ? ORDER BY seq",
            (key, length - 10),
        ).fetchall()

    again, changed, cold, base = [], [], [], []
    with Session.open("bench", db_path=path) as session:
        store = session.store
        assert isinstance(store, SQLiteStore)
        assert len(session.view("focused")) == 10
        for i in range(samples):
            store._segments.clear()  # a new kernel: no history read yet, no view made
            session._engine._views.clear()
            cold.append(timed_us(lambda: session.view("focused")))
            again.append(timed_us(lambda: session.view("focused")))
            session.append([Message.user(f"elsewhere {i}")], slot="elsewhere")
            changed.append(timed_us(lambda: session.view("focused")))
            base.append(timed_us(plain_query))
    plain.close()
    med = statistics.median
    return {"again": med(again), "changed": med(changed), "cold": med(cold), "base": med(base)}


def bench_exact_view(n: int, samples: int, workdir: Path) -> float:
    """Assembling the view a turn sends, counted exactly (o200k_base), on a compacted full
    slot: the counts come from the store, not from counting again, so it stays flat. (A turn's
    view holds its new message, so it is made each time, never a kept preview.)"""
    rng = random.Random(n + 1)
    path = workdir / f"exact-{n}.sqlite3"
    with Session.open("bench", db_path=path, model="openai:gpt-4o") as session:
        grow(session, n, rng)
        session.configure_slot(budget=ContextBudget.auto(8_000))
        session.compactions.compact(keep=20)
        session.preview()  # counts the kept messages once, and stores the counts
    with Session.open("bench", db_path=path, model="openai:gpt-4o") as session:
        engine, question = session._engine, Message.user("the next question")

        def turn_view() -> object:
            history = session.store.history(session.session_id, None)
            assert history.slot is not None
            return engine.view(history.slot, history, new=question)

        turn_view()  # a new kernel: read back, not counted again
        return statistics.median(timed_us(turn_view) for _ in range(samples))


def bench_slots(slots: int, samples: int, workdir: Path) -> float:
    """Re-running a cell whose turn every slot shares, in a session of ``slots`` slots."""
    rng = random.Random(3)
    path = workdir / f"slots-{slots}.sqlite3"
    with Session.open("bench", db_path=path) as session:
        grow(session, 200, rng, cell_prefix="cell-")
        for i in range(slots - 1):
            session.derive_slot(f"branch-{i}", parent="default")
            session.submit_turn(f"branch question {i}", slot=f"branch-{i}", cell_id=f"branch-cell-{i}")
    with Session.open("bench", db_path=path) as session:
        cells = [(f"cell-{i}", m.content) for i, m in enumerate(session.messages("default")[::2])]
        times = []
        for i in range(samples):
            cell_id, cell_text = cells[i % len(cells)]
            times.append(timed_us(lambda c=cell_id, t=cell_text: session.submit_turn(t, cell_id=c)))
    return statistics.median(times)


def bench_append(samples: int, workdir: Path) -> dict[str, float]:
    rng = random.Random(5)
    base_db = sqlite3.connect(workdir / "append-base.sqlite3", isolation_level=None)
    base_db.execute("PRAGMA journal_mode = WAL")
    base_db.execute("PRAGMA synchronous = NORMAL")
    base_db.execute("CREATE TABLE messages (slot TEXT, seq INTEGER, role TEXT, content TEXT, PRIMARY KEY (slot, seq))")
    seq = 0
    ours, base = [], []
    with Session.open("bench", db_path=workdir / "append.sqlite3") as session:
        for _ in range(samples):
            question, answer = text(rng, USER_CHARS), text(rng, ASSISTANT_CHARS)
            turn = [Message.user(question), Message.assistant(answer)]
            ours.append(timed_us(lambda t=turn: session.append(t)))

            def insert(rows: tuple[str, str] = (question, answer)) -> None:
                nonlocal seq
                base_db.execute("BEGIN")
                base_db.executemany(
                    "INSERT INTO messages VALUES ('main', ?, ?, ?)",
                    [(seq, "user", rows[0]), (seq + 1, "assistant", rows[1])],
                )
                base_db.execute("COMMIT")
                seq += 2

            base.append(timed_us(insert))
    base_db.close()
    med = statistics.median
    return {"ours": med(ours), "base": med(base)}


def bench_run_all(cells: int, history: int, workdir: Path) -> dict[str, float]:
    """Restart + Run All of a notebook whose turn cells all ran before, through the magic."""
    from IPython.core.interactiveshell import InteractiveShell

    import slotmagic

    rng = random.Random(11)
    path = workdir / "run-all.sqlite3"
    with Session.open("notebook.ipynb", db_path=path) as session:
        grow(session, history - 2 * cells, rng)
        for i in range(cells):
            session.submit_turn(f"cell {i}: {text(rng, 200)}", cell_id=f"cell-{i}")
        sources = [(f"cell-{i}", m.content) for i, m in enumerate(session.messages()[-2 * cells :: 2])]
    os.environ["SLOTMAGIC_DB"] = str(path)
    os.environ["SLOTMAGIC_SESSION"] = "notebook.ipynb"
    shell = InteractiveShell.instance()
    with contextlib.redirect_stdout(io.StringIO()):
        start = time.perf_counter()
        slotmagic.load_ipython_extension(shell)
        loaded = time.perf_counter()
        for cell_id, source in sources:
            result = shell.run_cell(f"%%turn\n{source}", cell_id=cell_id)
            result.raise_error()
            assert shell.user_ns["_"].replayed
        done = time.perf_counter()
        slotmagic.unload_ipython_extension(shell)
    return {
        "load_ms": (loaded - start) * 1e3,
        "cells_ms": (done - loaded) * 1e3,
        "per_cell_ms": (done - loaded) * 1e3 / cells,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer samples, histories up to 10,000 messages")
    args = parser.parse_args()
    samples = 30 if args.quick else 200
    sizes = (100, 1_000, 10_000) if args.quick else (100, 1_000, 10_000, 100_000)

    with tempfile.TemporaryDirectory(prefix="slotmagic-bench-") as tmp:
        work = Path(tmp)
        histories = {n: bench_history(n, samples, work) for n in sizes}
        exact = {n: bench_exact_view(n, samples, work) for n in sizes[:3]}
        view = bench_view(sizes[-1], samples, work)
        two, many = bench_slots(2, samples, work), bench_slots(200, samples, work)
        append = bench_append(samples * 5, work)
        run_all = bench_run_all(100, 10_000, work)

    print(
        f"slotmagic turn benchmark - {samples} samples, SQLite {sqlite3.sqlite_version}, "
        f"Python {sys.version.split()[0]}, {os.cpu_count()} cores; medians in µs\n"
    )
    small = histories[sizes[0]]
    print(f"{'messages':>9} | {'turn, focused':>13} {'ratio':>6} | {'replay, full':>12} {'ratio':>6} | "
          f"{'replay, focused':>15} {'ratio':>6}")  # fmt: skip
    for n, r in histories.items():
        print(
            f"{n:>9,} | {r['turn']:>13.0f} {r['turn'] / small['turn']:>5.2f}x | {r['replay_full']:>12.0f} "
            f"{r['replay_full'] / small['replay_full']:>5.2f}x | {r['replay_focused']:>15.0f} "
            f"{r['replay_focused'] / small['replay_focused']:>5.2f}x"
        )
    print("\nassembling a view counted exactly (o200k_base) on a compacted full slot:")
    for n, us in exact.items():
        print(f"{n:>9,} messages | {us:>7.0f} µs | {us / exact[sizes[0]]:.2f}x")
    big = histories[sizes[-1]]
    print(f"\nfocused view() at {sizes[-1]:,} messages: again {view['again']:.0f} µs, after a change "
          f"{view['changed']:.0f} µs, cold {view['cold']:.0f} µs; plain query for its 10 rows {view['base']:.0f} µs "
          f"(ratios {view['again'] / view['base']:.2f}x, {view['changed'] / view['base']:.2f}x, "
          f"{view['cold'] / view['base']:.2f}x)")  # fmt: skip
    print(f"re-run a cell: 200 slots {many:.0f} µs, 2 slots {two:.0f} µs")
    print(f"session.append of a turn {append['ours']:.0f} µs; plain inserts of its rows {append['base']:.0f} µs")
    print(
        f"Run All after a restart, 100 turn cells on {10_000:,} messages: load {run_all['load_ms']:.1f} ms, "
        f"cells {run_all['cells_ms']:.0f} ms ({run_all['per_cell_ms']:.2f} ms a cell)"
    )
    checks = [
        ("turn, focused: largest / 100 <= 1.5", big["turn"] / small["turn"], 1.5),
        ("exact view, 10k / 100 <= 1.5", exact[sizes[2]] / exact[sizes[0]], 1.5),
        ("replay, full: largest / 100 <= 1.5", big["replay_full"] / small["replay_full"], 1.5),
        ("replay, focused: largest / 100 <= 1.5", big["replay_focused"] / small["replay_focused"], 1.5),
        ("focused view again / plain query <= 2", view["again"] / view["base"], 2.0),
        ("re-run cell, 200 slots / 2 slots <= 2", many / two, 2.0),
        ("session.append / plain inserts <= 3", append["ours"] / append["base"], 3.0),
        ("Run All, 100 cells, seconds < 1", (run_all["load_ms"] + run_all["cells_ms"]) / 1e3, 1.0),
    ]
    print("\ntargets:")
    for label, value, limit in checks:
        print(f"  {'ok  ' if value <= limit else 'over'} {label:<42} {value:.2f}")
    return 0  # a line over is a reading, not a failure: run_all.py reports non-zero exits as errors


if __name__ == "__main__":
    raise SystemExit(main())
