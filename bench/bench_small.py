"""Small costs a user meets often: a fan-out's wait beyond its slowest reply, and opening a
session, each beside a baseline run in the same process.

- a fan-out of 3 slots with the echo model, against one turn of it alone (its slowest reply
  is one such turn; the columns run concurrently on one worker thread): <= +5 ms;
- ``Session.open`` of a 100-message session and reading its messages, against a plain
  ``sqlite3`` connect and the same read: <= 2x.

    python bench/bench_small.py
    python bench/bench_small.py --quick    # fewer samples
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from timing import median_ms

from slotmagic import Message, Session


def fan_out(path: Path, samples: int) -> tuple[float, float]:
    with Session.open("fan", db_path=path) as session:
        for name in ("a", "b", "c"):
            session.create_slot(name)
        counter = iter(range(10**6))
        session.fan_out("warm up", slots=["a", "b", "c"])
        many = median_ms(lambda: session.fan_out(f"q {next(counter)}", slots=["a", "b", "c"]), samples)
        one = median_ms(lambda: session.submit_turn(f"q {next(counter)}", slot="a"), samples)
    return many, one


def opening(path: Path, samples: int) -> tuple[float, float]:
    with Session.open("open", db_path=path) as session:
        session.append([m for i in range(50) for m in (Message.user("q" * 300), Message.assistant("a" * 1_500))])

    def ours() -> None:
        with Session.open("open", db_path=path) as session:
            session.messages()

    def plain() -> None:
        db = sqlite3.connect(path)
        db.execute("SELECT role, content FROM messages ORDER BY slot, seq").fetchall()
        db.close()

    ours_ms, plain_ms = [], []
    for _ in range(samples):  # alternating, so a busy moment slows both alike
        ours_ms.append(median_ms(ours, 1))
        plain_ms.append(median_ms(plain, 1))
    return statistics.median(ours_ms), statistics.median(plain_ms)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args()
    samples = 15 if args.quick else 60
    with tempfile.TemporaryDirectory(prefix="slotmagic-bench-") as tmp:
        many, one = fan_out(Path(tmp) / "fan.sqlite3", samples)
        ours, plain = opening(Path(tmp) / "open.sqlite3", samples)
    print(f"slotmagic small-costs benchmark - {samples} samples, medians")
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")  # fmt: skip
    print(f"fan-out of 3 slots (echo)            {many:7.2f} ms | one turn {one:6.2f} ms | +{many - one:.2f} ms")
    print(f"Session.open + read 100 messages     {ours:7.2f} ms | plain connect + read {plain:5.2f} ms | "
          f"{ours / plain:.2f}x")  # fmt: skip
    checks = [
        ("fan-out beyond its slowest reply, ms <= 5", many - one, 5.0),
        ("Session.open / plain connect-and-read <= 2", ours / plain, 2.0),
    ]
    print("\ntargets:")
    for label, value, limit in checks:
        print(f"  {'ok  ' if value <= limit else 'over'} {label:<46} {value:,.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
