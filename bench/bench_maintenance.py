"""Maintenance benchmark: ``%slot gc`` with nothing to free, and a search for a frequent word,
on a long session (100,000 messages; 10,000 with ``--quick``), each beside a plain baseline
run in the same process:

- ``session.history.gc()`` when nothing is unreachable, against a plain ``VACUUM`` of a copy of the
  same file and the checkpoint that gives its space back (``wal_checkpoint(TRUNCATE)``: the
  file is in WAL mode) (gc is that plus finding what to free; the search index is rebuilt only
  if VACUUM renumbered the messages): <= 1.2x;
- ``session.history.search(word, limit=20)`` for a word in 1 message in 20, against the plain FTS5
  query that ranks the matches and makes the 20 snippets (``ORDER BY rank LIMIT 20``): <= 2x.

    python bench/bench_maintenance.py            # 100,000 messages
    python bench/bench_maintenance.py --quick    # 10,000 messages
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import statistics
import string
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from timing import ms

from slotmagic import Message, Session

WORD = "deposit"


def text(rng: random.Random, chars: int, frequent: bool) -> str:
    words, length = ([WORD], len(WORD)) if frequent else ([], 0)
    while length < chars:
        word = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9)))
        words.append(word)
        length += len(word) + 1
    rng.shuffle(words)
    return " ".join(words)


def filled(path: Path, messages: int) -> None:
    rng = random.Random(7)
    with Session.open("long", db_path=path) as session:
        for start in range(0, messages, 2_000):
            batch = []
            for i in range(start, min(messages, start + 2_000), 2):
                batch.append(Message.user(text(rng, 300, i % 40 == 0)))
                batch.append(Message.assistant(text(rng, 1_500, i % 40 == 2)))
            session.append(batch)
        session.history.search(WORD)  # the index is up to date, as after any search


def plain_vacuum(db: sqlite3.Connection) -> None:
    """A plain VACUUM as a WAL file needs it to give the space back: the new file is written to
    the WAL first, and only a TRUNCATE checkpoint copies it in and shrinks the WAL to nothing
    (without one the WAL keeps the whole file's size on disk)."""
    db.execute("VACUUM")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def traced_gc(session: Session, parts: list[float]) -> Callable[[], object]:
    """``session.history.gc`` with the time of its own VACUUM and of the checkpoint after it
    noted in ``parts`` (each statement runs until the next one starts, or gc returns)."""
    starts: list[tuple[float, str]] = []

    def run() -> object:
        starts.clear()
        db = session.store._db  # type: ignore[attr-defined]
        db.set_trace_callback(lambda sql: starts.append((time.perf_counter(), sql)))
        try:
            return session.history.gc()
        finally:
            end = time.perf_counter()
            db.set_trace_callback(None)
            ends = [t for t, _ in starts[1:]] + [end]
            vacuum = [i for i, (_, sql) in enumerate(starts) if sql.strip() == "VACUUM"]
            after = vacuum[0] + next(i for i, (_, sql) in enumerate(starts[vacuum[0] :]) if "wal_checkpoint" in sql)
            parts.append(sum((ends[i] - starts[i][0]) * 1e3 for i in (vacuum[0], after)))

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10,000 messages, fewer samples")
    args = parser.parse_args()
    messages, samples = (10_000, 4) if args.quick else (100_000, 4)
    gc_ms, vacuum_ms, search_ms, plain_ms, own_vacuum_ms = [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="slotmagic-bench-") as tmp:
        ours, copy = Path(tmp) / "ours.sqlite3", Path(tmp) / "plain.sqlite3"
        filled(ours, messages)
        shutil.copy(ours, copy)
        size = ours.stat().st_size
        with Session.open("long", db_path=ours) as session:
            hits = len(session.history.search(WORD, limit=10**6))
            plain = sqlite3.connect(copy)
            match = f'"{WORD}"'
            query = (
                "SELECT m.slot, m.seq, m.turn, m.role, snippet(messages_fts, 0, '[', ']', '…', 12) FROM messages_fts"
                " JOIN messages m ON m.rowid = messages_fts.rowid WHERE messages_fts MATCH ? ORDER BY rank LIMIT 20"
            )
            pairs = [(gc_ms, traced_gc(session, own_vacuum_ms)), (vacuum_ms, lambda: plain_vacuum(plain))]
            for i in range(samples):  # alternating, each first in turn: the second of a pair runs faster
                for times, run in pairs if i % 2 else pairs[::-1]:
                    times.append(ms(run))
            for _ in range(samples * 5):
                search_ms.append(ms(lambda: session.history.search(WORD, limit=20)))
                plain_ms.append(ms(lambda: plain.execute(query, (match,)).fetchall()))
            plain.close()

    gc, vacuum = statistics.median(gc_ms), statistics.median(vacuum_ms)
    search, base = statistics.median(search_ms), statistics.median(plain_ms)
    print(f"slotmagic maintenance benchmark - {messages:,} messages ({size / 2**20:.0f} MiB), medians")
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")  # fmt: skip
    own = statistics.median(own_vacuum_ms)
    print(f"%slot gc, nothing to free   {gc:9.1f} ms | plain VACUUM {vacuum:8.1f} ms | {gc / vacuum:.2f}x")
    print(f"  of which its own VACUUM and checkpoint {own:9.1f} ms ({own / vacuum:.2f}x the plain one); "
          f"the rest {gc - own:.1f} ms")  # fmt: skip
    print(f"search '{WORD}' ({hits:,} hits), limit 20 {search:6.2f} ms | plain FTS5 query {base:6.2f} ms | "
          f"{search / base:.2f}x")  # fmt: skip
    checks = [
        ("gc with nothing to free / VACUUM <= 1.2", gc / vacuum, 1.2),
        ("frequent-word search / plain indexed query <= 2", search / base, 2.0),
    ]
    print("\ntargets:")
    for label, value, limit in checks:
        print(f"  {'ok  ' if value <= limit else 'over'} {label:<50} {value:,.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
