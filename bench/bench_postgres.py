"""PostgreSQL store benchmark: persist a turn, load a slot, derive a slot, at 100 / 1,000 /
10,000 messages - on both stores, each beside a plain baseline, in the same run.

The PostgreSQL baseline is the plainest psycopg chat store on the same server, with the same
``synchronous_commit`` as the store (off: the store's ``durability="normal"``): one row per
message, one transaction per turn (``executemany``), a fork is one row; a load is one
``SELECT`` in order. The SQLite store is measured beside ``bench_store.py``'s sqlite3
baseline, so both stores' figures come from one run on one machine. Samples of ours and of
the baselines alternate, so a noisy machine slows all alike.

    python bench/bench_postgres.py                      # postgresql://postgres@127.0.0.1:5432/test
    python bench/bench_postgres.py --url postgresql://me@db.example/chat --quick
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_store import HEADER, SIZES, Baseline, row, timed_us, turn_messages

from slotmagic import Message, Session, TurnInfo
from slotmagic._core.tokens import estimate_message_tokens
from slotmagic._store.urls import shown_target


class PgBaseline:
    """The plainest psycopg chat store: one row per message, one transaction per turn."""

    def __init__(self, url: str, schema: str) -> None:
        self.db = psycopg.connect(url, autocommit=True, options=f"-c search_path={schema} -c synchronous_commit=off")
        self.db.execute(f"CREATE SCHEMA {schema}")
        self.db.execute(
            "CREATE TABLE messages (slot TEXT, seq INTEGER, role TEXT, content TEXT, PRIMARY KEY (slot, seq))"
        )
        self.db.execute("CREATE TABLE forks (slot TEXT PRIMARY KEY, parent TEXT, at INTEGER)")
        self.length = 0

    def persist(self, messages: list[Message]) -> None:
        with self.db.transaction():
            self.db.cursor().executemany(
                "INSERT INTO messages VALUES ('main', %s, %s, %s)",
                [(self.length + i, m.role, m.content) for i, m in enumerate(messages)],
            )
        self.length += len(messages)

    def load(self) -> list[tuple[Any, ...]]:
        return self.db.execute("SELECT role, content FROM messages WHERE slot = 'main' ORDER BY seq").fetchall()

    def fork(self, name: str) -> None:
        with self.db.transaction():
            self.db.execute("INSERT INTO forks VALUES (%s, 'main', %s)", (name, self.length))


def bench_store(session: Session, baseline: Any, n: int, samples: int) -> dict[str, float]:
    """One store at ``n`` messages against its baseline (both already empty)."""
    rng = random.Random(n)
    store: Any = session.store
    while baseline.length < n:  # the history, in turns of two, as a real conversation grows
        messages = turn_messages(rng)
        counted = [m.with_tokens(estimate_message_tokens(m)) for m in messages]
        store.append_turn("bench", "default", counted, TurnInfo())
        baseline.persist(messages)

    persist_ours, persist_base = [], []
    for _ in range(samples):
        messages = [m.with_tokens(estimate_message_tokens(m)) for m in turn_messages(rng)]
        persist_ours.append(timed_us(lambda m=messages: store.append_turn("bench", "default", m, TurnInfo())))
        persist_base.append(timed_us(lambda m=messages: baseline.persist(m)))

    load_ours, load_base = [], []
    for _ in range(max(5, samples // 20)):
        store._forget()  # a cold read, as in a new kernel (a warm one is served from memory)
        load_ours.append(timed_us(lambda: session.messages("default")) / 1_000)
        load_base.append(timed_us(baseline.load) / 1_000)
    assert len(session.messages("default")) == baseline.length

    derive_ours, derive_base = [], []
    for i in range(max(20, samples // 2)):
        derive_ours.append(timed_us(lambda i=i: session.derive_slot(f"fork-{i}", parent="default")))
        derive_base.append(timed_us(lambda i=i: baseline.fork(f"fork-{i}")))
    med = statistics.median
    return {
        "persist_us": med(persist_ours),
        "persist_base_us": med(persist_base),
        "load_ms": min(load_ours),
        "load_base_ms": min(load_base),
        "derive_us": med(derive_ours),
        "derive_base_us": med(derive_base),
    }


def run(url: str, samples: int) -> dict[str, dict[int, dict[str, float]]]:
    results: dict[str, dict[int, dict[str, float]]] = {"postgres": {}, "sqlite": {}}
    made: list[str] = []
    try:
        with tempfile.TemporaryDirectory(prefix="slotmagic-bench-") as tmp:
            for n in SIZES:
                ours, base = "bench_" + secrets.token_hex(4), "bench_base_" + secrets.token_hex(4)
                made += [ours, base]
                sep = "&" if "?" in url else "?"
                with Session.open("bench", db_path=f"{url}{sep}schema={ours}") as session:
                    baseline = PgBaseline(url, base)
                    results["postgres"][n] = bench_store(session, baseline, n, samples)
                    baseline.db.close()
                with Session.open("bench", db_path=Path(tmp) / f"ours-{n}.sqlite3") as session:
                    sqlite_base = Baseline(Path(tmp) / f"base-{n}.sqlite3")
                    results["sqlite"][n] = bench_store(session, sqlite_base, n, samples)
                    sqlite_base.db.close()
    finally:
        with psycopg.connect(url, autocommit=True) as db:
            for schema in made:
                db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    return results


def report(results: dict[str, dict[int, dict[str, float]]]) -> list[tuple[str, float, float]]:
    checks: list[tuple[str, float, float]] = []
    for name, by_size in results.items():
        base = "psycopg" if name == "postgres" else "sqlite3"
        print(f"\n{name} store vs a plain {base} baseline")
        print(HEADER)
        print("-" * len(HEADER))
        for n, r in by_size.items():
            print(row(n, r))
        big, small = by_size[SIZES[-1]], by_size[SIZES[0]]
        checks += [
            (f"{name}: persist at 10k / baseline <= 3", big["persist_us"] / big["persist_base_us"], 3.0),
            (f"{name}: persist at 10k / persist at 100 <= 1.3", big["persist_us"] / small["persist_us"], 1.3),
            (f"{name}: load 10k / baseline <= 1.5", big["load_ms"] / big["load_base_ms"], 1.5),
            (f"{name}: derive at 10k / derive at 100 <= 1.3 (O(1))", big["derive_us"] / small["derive_us"], 1.3),
        ]
    return checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--url", default=os.environ.get("SLOTMAGIC_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
    )
    parser.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    args = parser.parse_args()
    samples = 60 if args.quick else 300
    results = run(args.url, samples)
    with psycopg.connect(args.url) as db:
        server = db.info.parameter_status("server_version")
    print(
        f"slotmagic PostgreSQL store benchmark - {samples} turn samples per size, PostgreSQL {server} at "
        f"{shown_target(args.url)}, psycopg {psycopg.__version__}, Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} cores"
    )
    print("synchronous_commit=off for both (durability='normal'); messages of ~300 and ~1,500 chars")
    checks = report(results)
    print("\ntargets:")
    for label, value, limit in checks:
        print(f"  {'ok  ' if value <= limit else 'over'} {label:<52} {value:,.2f}")
    print("\n(medians; load is the best of the cold reads)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
