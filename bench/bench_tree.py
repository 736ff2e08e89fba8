"""Tree benchmark: a session of many slots (5,000 with ``--full``), as a user meets it.

Each figure beside a baseline run in the same process:

- ``session.tree()`` on a newly opened session (nothing cached), against the plain SQLite query
  of the session's slot rows on a new connection;
- ``%slot tree`` as text (widgets off), the first in a kernel after ``%load_ext``: <= 200 ms;
- ``%load_ext slotmagic`` on that session in a new process each time (a new kernel: nothing
  of the file is known yet), against the same on a session of 100 slots: flat, less the file's
  integrity check at opening, which reads every page of a file up to 64 MiB and so grows with
  the file (printed beside it, its own line, with no target);
- a ``%%turn`` cell with 3 tree widgets on screen, against the same cell without: <= +50 ms.

The tree has 50 branches off the root and 20 below each of those, a third of them with a turn
of their own (so the tree's last questions are not all one shared read).

    python bench/bench_tree.py            # 5,000 slots
    python bench/bench_tree.py --quick    # 1,000 slots, fewer samples
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from timing import median_ms

from slotmagic import Message, Session, TurnInfo


def build(path: Path, slots: int) -> None:
    """A session of ``slots`` slots: 50 off the root, the rest 20 below each of those."""
    with Session.open("tree", db_path=path) as session:
        session.append([Message.user("the root question"), Message.assistant("an answer")])
        store = session.store
        for i in range(slots - 1):
            name = f"s{i}"
            session.derive_slot(name, "default" if i < 50 else f"s{(i - 50) // 20}")
            if i % 3 == 0:
                turn = [Message.user(f"a question of {name}"), Message.assistant("an answer")]
                store.append_turn(session.session_id, name, turn, TurnInfo(model="echo"))
        session.switch_slot("default")


def tree_vs_query(path: Path, samples: int) -> tuple[float, float]:
    def ours() -> None:
        with Session.open("tree", db_path=path) as session:
            start = time.perf_counter()
            session.tree()
            took.append((time.perf_counter() - start) * 1e3)

    def plain() -> None:
        db = sqlite3.connect(path)
        start = time.perf_counter()
        db.execute("SELECT * FROM slots WHERE session_id = ?", ("tree",)).fetchall()
        took.append((time.perf_counter() - start) * 1e3)
        db.close()

    results = []
    for fn in (ours, plain):
        took: list[float] = []
        for _ in range(samples):
            fn()
        results.append(statistics.median(took))
    return results[0], results[1]


# A new kernel: IPython and slotmagic imported first (startup is bench_startup's), then
# ``%load_ext`` timed, and the integrity check within it (wrapped where the store calls it).
COLD_LOAD = """
import contextlib, io, json, os, sys, time
from IPython.core.interactiveshell import InteractiveShell
import slotmagic, slotmagic._magics
from slotmagic._store import sqlite as store
checked = []
def timed(check):
    def run(*args, **kwargs):
        start = time.perf_counter()
        try:
            return check(*args, **kwargs)
        finally:
            checked.append((time.perf_counter() - start) * 1e3)
    return run
store.check_integrity = timed(store.check_integrity)  # through a read-only connection first
store.check_whole = timed(store.check_whole)  # through the connection the store keeps
shell = InteractiveShell.instance()
with contextlib.redirect_stdout(io.StringIO()):
    start = time.perf_counter()
    slotmagic.load_ipython_extension(shell)
    took = (time.perf_counter() - start) * 1e3
print(json.dumps({"load": took, "check": sum(checked)}))
"""


def cold_load(db: Path, samples: int) -> tuple[float, float]:
    """``%load_ext`` in a new process, each sample: (median ms, median ms of its file check)."""
    env = {**os.environ, "SLOTMAGIC_DB": str(db), "SLOTMAGIC_SESSION": "tree", "SLOTMAGIC_MODEL": "echo"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parent.parent), env.get("PYTHONPATH", "")])
    loads, checks = [], []
    for _ in range(samples):
        found = subprocess.run(
            [sys.executable, "-c", COLD_LOAD], env=env, capture_output=True, text=True, check=True
        ).stdout.splitlines()[-1]
        took = json.loads(found)
        loads.append(took["load"])
        checks.append(took["check"])
    return statistics.median(loads), statistics.median(checks)


def in_shell(path: Path, samples: int, small: Path) -> dict[str, float]:
    from IPython.core.interactiveshell import InteractiveShell

    import slotmagic

    shell = InteractiveShell.instance()
    os.environ["SLOTMAGIC_SESSION"] = "tree"
    os.environ["SLOTMAGIC_MODEL"] = "echo"

    out: dict[str, float] = {}
    with contextlib.redirect_stdout(io.StringIO()):
        os.environ["SLOTMAGIC_DB"] = str(path)
        slotmagic.load_ipython_extension(shell)
        shell.run_cell("%config SlotMagic.widgets = False").raise_error()
        start = time.perf_counter()
        shell.run_cell("%slot tree").raise_error()
        out["text_first"] = (time.perf_counter() - start) * 1e3
        out["text_again"] = median_ms(lambda: shell.run_cell("%slot tree").raise_error(), samples)
        shell.run_cell("%config SlotMagic.widgets = True").raise_error()

        counter = iter(range(10**6))

        def turn() -> None:
            shell.run_cell(f"%%turn\nquestion {next(counter)}").raise_error()

        turn()
        out["turn_alone"] = median_ms(turn, samples)
        for _ in range(3):
            shell.run_cell("%slot tree").raise_error()
        turn()
        out["turn_widgets"] = median_ms(turn, samples)
        slotmagic.unload_ipython_extension(shell)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1,000 slots, fewer samples")
    args = parser.parse_args()
    slots, samples = (1_000, 5) if args.quick else (5_000, 15)
    with tempfile.TemporaryDirectory(prefix="slotmagic-bench-") as tmp:
        big, small = Path(tmp) / "big.sqlite3", Path(tmp) / "small.sqlite3"
        build(big, slots)
        build(small, 100)
        ours, plain = tree_vs_query(big, samples)
        shell = in_shell(big, samples, small)
        shell["load_small"], shell["check_small"] = cold_load(small, samples)
        shell["load_big"], shell["check_big"] = cold_load(big, samples)
        sizes = {n: p.stat().st_size / 2**20 for n, p in ((slots, big), (100, small))}

    print(f"slotmagic tree benchmark - {slots:,} slots, {samples} samples, medians")
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")  # fmt: skip
    print(
        f"session.tree(), newly opened session  {ours:8.1f} ms | plain slot query {plain:6.1f} ms | {ours / plain:.2f}x"
    )
    print(f"%slot tree (text), first after load   {shell['text_first']:8.1f} ms | again {shell['text_again']:.1f} ms")
    load_big, load_small = shell["load_big"], shell["load_small"]
    rest_big, rest_small = load_big - shell["check_big"], load_small - shell["check_small"]
    print(f"%load_ext, new process, {slots:,} slots {load_big:8.1f} ms | 100 slots {load_small:.1f} ms "
          f"| {load_big / load_small:.2f}x")  # fmt: skip
    print(f"  of which the file's integrity check {shell['check_big']:6.1f} ms ({sizes[slots]:.1f} MiB) "
          f"| {shell['check_small']:.1f} ms ({sizes[100]:.1f} MiB): "
          "every page up to 64 MiB, so it grows with the file")  # fmt: skip
    print(
        f"  the rest                            {rest_big:6.1f} ms | {rest_small:.1f} ms | {rest_big / rest_small:.2f}x"
    )
    extra, alone = shell["turn_widgets"] - shell["turn_alone"], shell["turn_alone"]
    print(f"%%turn cell, 3 tree widgets on screen {shell['turn_widgets']:8.1f} ms | without {alone:.1f} ms "
          f"| +{extra:.1f} ms")  # fmt: skip
    checks = [
        ("session.tree() / plain slot query <= 3", ours / plain, 3.0),
        ("%slot tree (text), first, ms <= 200", shell["text_first"], 200.0),
        (f"%load_ext less its file check, {slots:,}/100 slots <= 1.5", rest_big / rest_small, 1.5),
        ("%%turn with 3 tree widgets, extra ms <= 50", extra, 50.0),
    ]
    print("\ntargets:")
    for label, value, limit in checks:
        print(f"  {'ok  ' if value <= limit else 'over'} {label:<52} {value:,.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
