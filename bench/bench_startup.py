"""Startup benchmark: what every new kernel pays before its first reply, each in fresh
interpreters (median of several), beside a baseline in the same interpreter:

- ``import slotmagic`` after ``import IPython``: <= +100 ms;
- ``%load_ext slotmagic`` in a new IPython shell (the import included): <= +150 ms over the
  shell alone;
- the first turn with a real provider (OpenAI's protocol, from a server on 127.0.0.1 that
  streams its replies at once) against the turns after it: <= +100 ms. What the first would
  pay (the provider module, the HTTP stack and its TLS settings, the model's prices and facts,
  the tokenizer) a session loads on a thread of its own as it opens (``_engine/run/warm.py``); the
  figure is taken once that is done, as when a user types the first question, and the first
  turn sent at once after opening is shown beside it.

    python bench/bench_startup.py
    python bench/bench_startup.py --quick    # fewer runs
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

IMPORT = """
import time
start = time.perf_counter()
import IPython
middle = time.perf_counter()
import slotmagic
end = time.perf_counter()
print({"ipython": (middle - start) * 1e3, "extra": (end - middle) * 1e3})
"""

LOAD_EXT = """
import contextlib, io, os, tempfile, time
from IPython.core.interactiveshell import InteractiveShell
os.environ["SLOTMAGIC_DB"] = os.path.join(tempfile.mkdtemp(), "s.sqlite3")
shell = InteractiveShell.instance()
with contextlib.redirect_stdout(io.StringIO()):
    start = time.perf_counter()
    shell.run_line_magic("load_ext", "slotmagic")
    end = time.perf_counter()
print({"extra": (end - start) * 1e3})
"""

FIRST_TURN = """
import os, statistics, sys, tempfile, time
sys.path.insert(0, os.path.join(ROOT, "tests"))
from reflect_server import ReflectServer
from slotmagic import Session
with ReflectServer() as server:
    with Session.open("s", db_path=os.path.join(tempfile.mkdtemp(), "s.sqlite3"), model="openai:gpt-4o-mini",
                      settings=server.settings()) as session:
        os.environ["OPENAI_API_KEY"] = "sk-local-server"
        if WAIT and session._warming is not None:
            session._warming.join(timeout=30)  # the user typing the first question meanwhile
        start = time.perf_counter()
        session.submit_turn("the first question")
        first = (time.perf_counter() - start) * 1e3
        warm = []
        for i in range(8):
            start = time.perf_counter()
            session.submit_turn(f"question {i}")
            warm.append((time.perf_counter() - start) * 1e3)
print({"first": first, "warm": statistics.median(warm), "extra": first - statistics.median(warm)})
"""


# Byte-compiled files, as an installed package has them (pip compiles at install): written once
# to a folder of their own (an environment may set PYTHONDONTWRITEBYTECODE, which would make
# every interpreter compile every module from source).
PYCACHE = tempfile.mkdtemp(prefix="slotmagic-bench-pycache-")


def fresh(code: str, runs: int) -> dict[str, float]:
    """Medians over ``runs`` new interpreters of the figures ``code`` prints."""
    found: dict[str, list[float]] = {}
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-local-server", "PYTHONPYCACHEPREFIX": PYCACHE}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", f"ROOT = {str(ROOT)!r}\n{code}"],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            cwd=ROOT,
        ).stdout
        for key, value in json.loads(out.strip().splitlines()[-1].replace("'", '"')).items():
            found.setdefault(key, []).append(value)
    return {key: statistics.median(values) for key, values in found.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    args = parser.parse_args()
    runs = 3 if args.quick else 7
    fresh("WAIT = True\n" + FIRST_TURN, 1)  # byte-compiled files written once, outside the figures
    imported, loaded = fresh(IMPORT, runs), fresh(LOAD_EXT, runs)
    turn, at_once = fresh("WAIT = True\n" + FIRST_TURN, runs), fresh("WAIT = False\n" + FIRST_TURN, runs)
    print(f"slotmagic startup benchmark - medians of {runs} fresh interpreters")
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")  # fmt: skip
    print(f"import slotmagic after IPython       +{imported['extra']:6.1f} ms (IPython {imported['ipython']:.0f} ms)")
    print(f"%load_ext slotmagic in a new shell   +{loaded['extra']:6.1f} ms")
    ipython = imported["ipython"]
    print(f"  (as parts of IPython's own import, which a busy machine slows alike: import "
          f"{imported['extra'] / ipython:.2f}, %load_ext {loaded['extra'] / ipython:.2f})")  # fmt: skip
    print(f"first turn, real provider            {turn['first']:7.1f} ms | warm turn {turn['warm']:.1f} ms | "
          f"+{turn['extra']:.1f} ms")  # fmt: skip
    print(f"  (sent at once after opening, before the warm-up ends: {at_once['first']:.1f} ms, "
          f"+{at_once['extra']:.1f} ms)")  # fmt: skip
    shutil.rmtree(PYCACHE, ignore_errors=True)
    checks = [
        ("import slotmagic over IPython, ms <= 100", imported["extra"], 100.0),
        ("%load_ext over the shell, ms <= 150", loaded["extra"], 150.0),
        ("first turn over a warm one, ms <= 100", turn["extra"], 100.0),
    ]
    print("\ntargets:")
    for label, value, limit in checks:
        print(f"  {'ok  ' if value <= limit else 'over'} {label:<46} {value:,.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
