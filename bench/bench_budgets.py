"""Budget benchmark: what asking a slot's budget costs as a session grows, each beside a
baseline run in the same process:

- the first ``budget()`` of a 10-message focused slot in a new kernel (a session opened anew),
  at 100 and at 100,000 stored messages (10,000 with ``--quick``): flat (<= 1.5x);
- the first sidebar snapshot with that slot current: flat alike;
- a full slot's ``budget()`` after a change (a turn), against a plain read of its rows: <= 1.5x;
- the memory that budget holds (tracemalloc), against the text of its messages: <= 1.3x.

    python bench/bench_budgets.py
    python bench/bench_budgets.py --quick
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_turns import grow
from timing import ms

from slotmagic import ContextBudget, FocusedConfig, Session
from slotmagic._snapshot import session_snapshot


def focused(path: Path, samples: int) -> tuple[float, float]:
    budgets, snapshots = [], []
    for _ in range(samples):
        with Session.open("b", db_path=path) as session:
            budgets.append(ms(lambda: session.budget("f")))
        with Session.open("b", db_path=path) as session:
            session.switch_slot("f")
            snapshots.append(ms(lambda: session_snapshot(session)))
    return statistics.median(budgets), statistics.median(snapshots)


def build(path: Path, n: int) -> None:
    with Session.open("b", db_path=path) as session:
        grow(session, n, random.Random(n))
        session.derive_slot("f", strategy=FocusedConfig(recent_messages=10))
        session.switch_slot("default")


def full_slot(path: Path, samples: int) -> dict[str, float]:
    """A full slot whose budget holds all of it (no compaction), after each change."""
    with Session.open("b", db_path=path) as session:
        session.options.context_windows = {"echo": 2 * 10**9}
        session.configure_slot("default", budget=ContextBudget(system=10**6, history=10**9))
        ours, plain = [], []
        db = sqlite3.connect(path)
        rows = "SELECT role, content, tokens, extra FROM messages WHERE slot = 1 ORDER BY seq"
        for i in range(samples):
            session.submit_turn(f"a change {i}")
            ours.append(ms(lambda: session.budget("default")))
            plain.append(ms(lambda: db.execute(rows).fetchall()))
        text = sum(len(content.encode()) for (content,) in db.execute("SELECT content FROM messages WHERE slot = 1"))
        db.close()
    with Session.open("b", db_path=path) as session:
        tracemalloc.start()
        session.budget("default")
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
    return {"ours": statistics.median(ours), "plain": statistics.median(plain), "held": held, "text": text}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10,000 messages at most, fewer samples")
    args = parser.parse_args()
    big, samples = (10_000, 5) if args.quick else (100_000, 9)
    with tempfile.TemporaryDirectory(prefix="slotmagic-bench-") as tmp:
        results = {}
        for n in (100, big):
            path = Path(tmp) / f"b{n}.sqlite3"
            build(path, n)
            results[n] = focused(path, samples)
        full = full_slot(Path(tmp) / f"b{big}.sqlite3", samples)

    print(f"slotmagic budget benchmark - {samples} samples, medians")
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")  # fmt: skip
    for n, (budget, snapshot) in results.items():
        print(f"{n:>8,} messages | focused slot's first budget() {budget:7.2f} ms | first sidebar snapshot "
              f"{snapshot:7.2f} ms")  # fmt: skip
    (b_small, s_small), (b_big, s_big) = results[100], results[big]
    print(f"full slot of {big:,} messages: budget() after a turn {full['ours']:.1f} ms | plain read of its rows "
          f"{full['plain']:.1f} ms | {full['ours'] / full['plain']:.2f}x")  # fmt: skip
    print(f"  memory held by its budget {full['held'] / 2**20:.1f} MiB for {full['text'] / 2**20:.1f} MiB of text "
          f"({full['held'] / full['text']:.2f}x)")  # fmt: skip
    checks = [
        (f"focused budget(), {big:,} / 100 messages <= 1.5", b_big / b_small, 1.5),
        (f"sidebar snapshot, {big:,} / 100 messages <= 1.5", s_big / s_small, 1.5),
        ("full slot budget() after a change / plain read <= 1.5", full["ours"] / full["plain"], 1.5),
        ("memory held by it / its text <= 1.3", full["held"] / full["text"], 1.3),
    ]
    print("\ntargets:")
    for label, value, limit in checks:
        print(f"  {'ok  ' if value <= limit else 'over'} {label:<56} {value:,.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
