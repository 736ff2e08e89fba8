"""Store benchmark: persist a turn, load a slot, derive a slot, at 100 / 1,000 / 10,000 messages.

Each figure is printed beside a plain-sqlite3 baseline run in the same process, on the same
kind of file, with the same journal (WAL) and synchronous (NORMAL) settings: one row per
message, one transaction per turn, a fork is one row. Samples of ours and of the baseline
alternate, so a noisy machine slows both alike.

    python bench/bench_store.py            # figures and ratios
    python bench/bench_store.py --quick    # fewer samples
"""

from __future__ import annotations

import argparse
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

from slotmagic import Message, Session, SQLiteStore, TurnInfo
from slotmagic._core.tokens import estimate_message_tokens

SIZES = (100, 1_000, 10_000)
USER_CHARS, ASSISTANT_CHARS = 300, 1_500  # a typical question and answer


def text(rng: random.Random, chars: int) -> str:
    words = []
    length = 0
    while length < chars:
        word = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9)))
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:chars]


def turn_messages(rng: random.Random) -> list[Message]:
    return [
        Message.user(text(rng, USER_CHARS)).with_tokens(0),
        Message.assistant(text(rng, ASSISTANT_CHARS)),
    ]


class Baseline:
    """The plainest sqlite3 chat store: one row per message, one transaction per turn."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute(
            "CREATE TABLE messages (slot TEXT, seq INTEGER, role TEXT, content TEXT, PRIMARY KEY (slot, seq))"
        )
        self.db.execute("CREATE TABLE forks (slot TEXT PRIMARY KEY, parent TEXT, at INTEGER)")
        self.length = 0

    def persist(self, messages: list[Message]) -> None:
        self.db.execute("BEGIN")
        self.db.executemany(
            "INSERT INTO messages VALUES ('main', ?, ?, ?)",
            [(self.length + i, m.role, m.content) for i, m in enumerate(messages)],
        )
        self.db.execute("COMMIT")
        self.length += len(messages)

    def load(self) -> list[tuple[str, str]]:
        return self.db.execute("SELECT role, content FROM messages WHERE slot = 'main' ORDER BY seq").fetchall()

    def fork(self, name: str) -> None:
        self.db.execute("BEGIN")
        self.db.execute("INSERT INTO forks VALUES (?, 'main', ?)", (name, self.length))
        self.db.execute("COMMIT")


def file_size(db: sqlite3.Connection, path: Path) -> int:
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


def timed_us(fn: Callable[[], object]) -> float:
    start = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - start) / 1_000


def bench_size(n: int, samples: int, workdir: Path) -> dict[str, float]:
    rng = random.Random(n)
    ours_path, base_path = workdir / f"ours-{n}.sqlite3", workdir / f"base-{n}.sqlite3"
    session = Session.open("bench", db_path=ours_path)
    baseline = Baseline(base_path)
    # Build the history: n messages, in turns of two, as a real conversation grows.
    while baseline.length < n:
        messages = turn_messages(rng)
        counted = [m.with_tokens(estimate_message_tokens(m)) for m in messages]
        session.store.append_turn("bench", "default", counted, TurnInfo())
        baseline.persist(messages)

    persist_ours, persist_base = [], []
    for _ in range(samples):
        messages = [m.with_tokens(estimate_message_tokens(m)) for m in turn_messages(rng)]
        persist_ours.append(
            timed_us(lambda m=messages: session.store.append_turn("bench", "default", m, TurnInfo(model="bench")))
        )
        persist_base.append(timed_us(lambda m=messages: baseline.persist(m)))

    load_ours, load_base = [], []
    store = session.store
    assert isinstance(store, SQLiteStore)
    for _ in range(max(5, samples // 20)):
        store._forget()  # a cold read from the file, as in a new kernel (a warm one is served from memory)
        load_ours.append(timed_us(lambda: session.messages("default")) / 1_000)
        load_base.append(timed_us(baseline.load) / 1_000)
    assert len(session.messages("default")) == baseline.length

    ours_db = session.store._db  # the same connection, to checkpoint before measuring the file
    derive_ours, derive_base = [], []
    forks = max(20, samples // 2)
    size_before = file_size(ours_db, ours_path), file_size(baseline.db, base_path)
    for i in range(forks):
        derive_ours.append(timed_us(lambda i=i: session.derive_slot(f"fork-{i}", parent="default")))
        derive_base.append(timed_us(lambda i=i: baseline.fork(f"fork-{i}")))
    grow_ours = (file_size(ours_db, ours_path) - size_before[0]) / forks
    grow_base = (file_size(baseline.db, base_path) - size_before[1]) / forks
    wal_before = (ours_path.with_name(ours_path.name + "-wal")).stat().st_size
    session.derive_slot("fork-wal", parent="default")
    wal_one = (ours_path.with_name(ours_path.name + "-wal")).stat().st_size - wal_before

    session.close()
    baseline.db.close()
    med = statistics.median
    return {
        "persist_us": med(persist_ours),
        "persist_base_us": med(persist_base),
        "load_ms": min(load_ours),
        "load_base_ms": min(load_base),
        "load_med_ms": med(load_ours),
        "load_base_med_ms": med(load_base),
        "derive_us": med(derive_ours),
        "derive_base_us": med(derive_base),
        "derive_bytes": grow_ours,
        "derive_base_bytes": grow_base,
        "derive_wal_bytes": wal_one,
    }


HEADER = (
    f"{'messages':>9} | {'persist turn µs':>15} {'base':>7} {'ratio':>6} | {'load ms':>8} {'base':>7}"
    f" {'ratio':>6} | {'derive µs':>9} {'base':>6} {'ratio':>6}"
)


def row(n: int, r: dict[str, float]) -> str:
    """One history size of the table: persist, load and derive beside their baselines."""
    return (
        f"{n:>9,} | {r['persist_us']:>15.1f} {r['persist_base_us']:>7.1f} "
        f"{r['persist_us'] / r['persist_base_us']:>5.2f}x | {r['load_ms']:>8.2f} {r['load_base_ms']:>7.2f} "
        f"{r['load_ms'] / r['load_base_ms']:>5.2f}x | {r['derive_us']:>9.1f} {r['derive_base_us']:>6.1f} "
        f"{r['derive_us'] / r['derive_base_us']:>5.2f}x"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    args = parser.parse_args()
    samples = 60 if args.quick else 400

    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="slotmagic-bench-") as tmp:
        for n in SIZES:
            results[n] = bench_size(n, samples, Path(tmp))

    print(
        f"slotmagic store benchmark - {samples} turn samples per size, SQLite {sqlite3.sqlite_version},"
        f" Python {sys.version.split()[0]}, {os.cpu_count()} cores"
    )
    print("WAL journal, synchronous=NORMAL for both; messages of ~300 (user) and ~1,500 (assistant) chars\n")
    header = f"{HEADER} | {'derive B':>8} {'base':>6}"
    print(header)
    print("-" * len(header))
    for n, r in results.items():
        print(f"{row(n, r)} | {r['derive_bytes']:>8.0f} {r['derive_base_bytes']:>6.0f}")

    big, small = results[SIZES[-1]], results[SIZES[0]]
    checks = [
        ("persist at 10k / persist at 100 <= 1.3", big["persist_us"] / small["persist_us"], 1.3),
        ("persist at 10k / baseline <= 3", big["persist_us"] / big["persist_base_us"], 3.0),
        ("derive at 10k < 1,000 µs", big["derive_us"], 1_000.0),
        ("derive at 10k file growth < 4,096 B", big["derive_bytes"], 4_096.0),
        ("load 10k / baseline <= 1.5", big["load_ms"] / big["load_base_ms"], 1.5),
    ]
    print("\ntargets:")
    for label, value, limit in checks:
        print(f"  {'ok  ' if value <= limit else 'over'} {label:<40} {value:,.2f}")
    print(
        f"\n(medians; load is the best of {max(5, samples // 20)} runs, median "
        f"{big['load_med_ms']:.2f} ms vs {big['load_base_med_ms']:.2f} ms at 10k;"
        f" derive bytes: main-file growth per fork after a checkpoint, averaged;"
        f" one fork adds {big['derive_wal_bytes']:,.0f} B of WAL until the next checkpoint)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
