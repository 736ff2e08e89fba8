"""Every benchmark in one command: the figures the docs state, each with the machine and the
load it was measured under.

Each ``bench/bench_*.py`` runs in its own interpreter (so imports and caches start cold as in
a new kernel), one after another; its output is printed as it is, framed by the load average
(``os.getloadavg``) before and after, so a figure taken on a busy machine says so. Every target
line reads "ok" or "over"; the summary at the end lists the ones over.

    python bench/run_all.py            # small, fast sizes (minutes)
    python bench/run_all.py --full     # the sizes the docs state (100,000 messages ...)
    python bench/run_all.py --only tree startup
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = re.compile(r"^\s*(ok|over)\b")


def machine() -> str:
    return (
        f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.release()}"
    )


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def benches(only: list[str]) -> list[Path]:
    found = sorted(HERE.glob("bench_*.py"))
    if only:
        found = [p for p in found if any(name in p.stem for name in only)]
    return found


def run(script: Path, full: bool) -> tuple[int, list[tuple[str, str]]]:
    """Run one benchmark, echoing its output; its exit code and its target lines."""
    command = [sys.executable, str(script)] + ([] if full else ["--quick"])
    print(f"\n=== {script.name} {'(full)' if full else '(--quick)'} - load average {load()}", flush=True)
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=HERE.parent)
    assert process.stdout is not None
    targets = []
    for line in process.stdout:
        print(line, end="", flush=True)
        if found := TARGET.match(line):
            targets.append((found.group(1), f"{script.stem}: {line.strip()}"))
    code = process.wait()
    print(f"--- {script.name}: {time.perf_counter() - started:.0f} s, exit {code}, load average {load()}")
    return code, targets


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="the sizes the docs state (slow)")
    parser.add_argument("--only", nargs="*", default=[], help="run the benchmarks whose name holds one of these")
    args = parser.parse_args()
    print(f"slotmagic benchmarks - {machine()}")
    print(f"load average at the start (1, 5, 15 min): {load()}")
    if "SLOTMAGIC_BENCH_POSTGRES" not in os.environ:
        print("(bench_postgres uses postgresql://postgres@127.0.0.1:5432/test; set SLOTMAGIC_BENCH_POSTGRES)")
    failed, over, counted = [], [], 0
    for script in benches(args.only):
        code, targets = run(script, args.full)
        if code:
            failed.append(script.name)
        counted += len(targets)
        over += [line for verdict, line in targets if verdict == "over"]
    print(f"\n=== summary - {machine()}; load average at the end {load()}")
    print(f"{counted} target lines, {counted - len(over)} ok, {len(over)} over")
    for line in over:
        print(f"  {line}")
    if failed:
        print(f"exited with an error: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
