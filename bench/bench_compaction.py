"""Compaction benchmark: the first turn on a long slot far over its budget (an imported
conversation, bulk ``append``, a switch to a smaller model).

A slot of 2,000 / 10,000 / 100,000 stored messages (a ~300-character question and a ~1,500-
character answer each turn) gets one more turn on a model with an 8,192-token window: the turn
compacts first. Printed: that turn's time (the offline ``echo`` model answers at once, so this
is slotmagic's own work), the biggest summary request it sent against the summarizing model's
window, and the ratio against the same at 10,000 messages — the target is at most 2x at
100,000 ("ok" / "over"). Each size is measured on a fresh file, ``--repeat`` times, median.

    python bench/bench_compaction.py            # 2k, 10k, 100k
    python bench/bench_compaction.py --quick    # 2k and 10k only
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import string
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from slotmagic import Message, Session
from slotmagic._core.compaction import COMPACTION_MARKER
from slotmagic.providers import _echo as echo
from slotmagic.tokens import TokenCounter

USER_CHARS, ASSISTANT_CHARS = 300, 1_500
WINDOW = 8_192


def text(rng: random.Random, chars: int) -> str:
    words, length = [], 0
    while length < chars:
        word = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9)))
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:chars]


def filled(folder: Path, messages: int) -> Path:
    db = folder / f"slot-{messages}.sqlite3"
    rng = random.Random(messages)
    pool = [(text(rng, USER_CHARS), text(rng, ASSISTANT_CHARS)) for _ in range(200)]
    with Session.open("bench", db_path=db, model="echo") as session:
        batch: list[Message] = []
        for i in range(messages // 2):
            question, answer = pool[i % len(pool)]
            batch += [Message.user(f"{i}: {question}"), Message.assistant(answer)]
            if len(batch) >= 2_000:
                session.append(batch)
                batch = []
        if batch:
            session.append(batch)
    return db


def first_turn(db: Path) -> tuple[float, int]:
    """Seconds of the first turn after opening (cold), and the largest summary request's tokens."""
    sent: list[int] = []
    counter = TokenCounter.for_model("echo")
    original = echo.EchoProvider.stream

    def counting(self: echo.EchoProvider, request: object) -> object:
        messages = request.messages  # type: ignore[attr-defined]
        if any(COMPACTION_MARKER in m.content for m in messages):
            sent.append(sum(counter.count_message(m) for m in messages))
        return original(self, request)  # type: ignore[arg-type]

    echo.EchoProvider.stream = counting  # type: ignore[method-assign,assignment]
    try:
        started = time.perf_counter()
        with Session.open("bench", db_path=db, model="echo") as session:
            session.submit_turn("And what follows from all of this?")
            elapsed = time.perf_counter() - started
            assert session.compactions(), "the turn did not compact"
    finally:
        echo.EchoProvider.stream = original  # type: ignore[method-assign]
    return elapsed, max(sent, default=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2k and 10k messages only")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = (2_000, 10_000) if args.quick else (2_000, 10_000, 100_000)
    print(f"machine: {os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'messages':>10}  {'first turn':>11}  {'largest summary request':>24}  {'vs 10k':>7}")
    results: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        first_turn(filled(Path(folder), 1_000))  # warm up: imports, the tokenizer
        for size in sizes:
            times, largest = [], 0
            for _ in range(args.repeat):
                db = filled(Path(folder), size)
                seconds, biggest = first_turn(db)
                times.append(seconds)
                largest = max(largest, biggest)
                db.unlink()
            results[size] = statistics.median(times)
            ratio = results[size] / results[10_000] if 10_000 in results else float("nan")
            within = "ok" if largest <= WINDOW else "over"
            print(
                f"{size:>10,}  {results[size] * 1000:>9.0f} ms  {largest:>10,} of {WINDOW:,} ({within})  {ratio:>6.2f}x"
            )
            print(f"  {within:<4} summary requests at {size:,} fit the window ({largest:,} <= {WINDOW:,} tokens)")
            if size == 100_000:
                print(f"  {'ok' if ratio <= 2 else 'over':<4} first turn at 100k / at 10k <= 2 ({ratio:.2f})")


if __name__ == "__main__":
    main()
