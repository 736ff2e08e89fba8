"""Scale benchmark: what a cell costs as a session grows around it, each figure as a growth
factor per 10x and as a ratio to a raw SQLite baseline taken in the same process.

Every sample runs in a fresh process (a new kernel: nothing of the file known yet), and the
load average is printed with each block:

- one slot among 100 / 1,000 / 10,000 slots (a new kernel's first ``budget``, ``preview``,
  ``submit_turn``, ``export``, ``switch_slot`` and ``slot`` on it), against a plain read of
  that slot's row and its messages on a new connection: flat in the number of slots;
- ``session.tree()`` and ``%slot tree`` (as text) of those sessions, against the plain query of
  the session's slot rows: linear in slots, ``session.tree()`` at most 3x the query;
- a warm ``submit_turn`` (the echo model) on 100 / 1,000 / 10,000 messages, against a plain
  SQLite append of a turn's rows, and the views it makes and the tool schemas it checks;
- ``Session.open`` of a file of 1,000 / 10,000 / 100,000 messages the last kernel closed,
  against a plain connect and read of the session's row: flat in the file;
- ``import slotmagic`` after ``import IPython``, as a share of IPython's own import (CPU).

With ``--against PATH`` (another checkout of slotmagic, such as ``git worktree add /tmp/old
REV``) it measures only the warm turn, of this tree and of that one, in fresh processes that
alternate between the two, on files each tree writes itself (100 and 10,000 messages), and
prints this tree's cost as a ratio to the other's, with the Python calls a turn makes in each.
Where valgrind is installed it also counts each tree's instructions a warm turn (callgrind: 120
turns less 20, over 100), a figure the machine's speed does not move.

    python bench/bench_scale.py            # the sizes above
    python bench/bench_scale.py --quick    # a tenth of them, fewer samples
    python bench/bench_scale.py --against /tmp/old --rounds 9
    python bench/bench_scale.py --tree     # the tree's two lines alone
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The tree a child measures: this one, or the one --against names (set by fresh()).
SOURCE = Path(os.environ.get("SLOTMAGIC_BENCH_SOURCE", ROOT))
sys.path.insert(0, str(SOURCE))

OPS = ("budget", "preview", "turn", "export", "switch", "show")
QUESTION, ANSWER = "q" * 300, "a" * 1_500


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


# -- files -----------------------------------------------------------------------------------


def build_slots(path: Path, others: int) -> None:
    """``work`` two levels below ``default``, and ``others`` slots: 50 below ``default``, the
    rest below those, a third with a turn of their own."""
    from slotmagic import Message, Session, TurnInfo
    from slotmagic._core.slots import SlotConfig

    with Session.open("scale", db_path=path) as session:
        session.append([Message.user(QUESTION), Message.assistant(ANSWER)])
        store, sid = session.store, session.session_id
        with store.atomic():
            store.derive_slot(sid, "mid", "default", SlotConfig())
            store.derive_slot(sid, "work", "mid", SlotConfig())
            store.append_turn(sid, "work", [Message.user(QUESTION), Message.assistant(ANSWER)], TurnInfo())
            for i in range(others):
                store.derive_slot(sid, f"s{i}", "default" if i < 50 else f"s{(i - 50) % 50}", SlotConfig())
                if i % 3 == 0:
                    turn = [Message.user(f"a question of s{i}"), Message.assistant("an answer")]
                    store.append_turn(sid, f"s{i}", turn, TurnInfo())


def build_messages(path: Path, messages: int) -> None:
    """``messages`` in ``default``, and ``focused`` derived from it showing the last 10 (the
    warm turns go there, as in bench_turns: no compaction in the way)."""
    from slotmagic import FocusedConfig, Message, Session

    with Session.open("scale", db_path=path) as session:
        with session.store.atomic():
            for _ in range(messages // 2):
                session.append([Message.user(QUESTION), Message.assistant(ANSWER)])
        session.derive_slot("focused", strategy=FocusedConfig(recent_messages=10))


# -- what one fresh process measures (--child) -------------------------------------------------


def raw_slot_read(path: str) -> float:
    db = sqlite3.connect(path)
    try:
        start = time.perf_counter()
        key = db.execute(
            "SELECT id FROM slots WHERE session_id = 'scale' AND name = 'work' AND deleted_at IS NULL"  # its index
        ).fetchone()[0]
        db.execute("SELECT role, content, tokens, extra FROM messages WHERE slot = ? ORDER BY seq", (key,)).fetchall()
        return (time.perf_counter() - start) * 1e3
    finally:
        db.close()


def raw_slot_rows(path: str) -> float:
    db = sqlite3.connect(path)
    try:
        return ms(lambda: db.execute("SELECT * FROM slots WHERE session_id = ?", ("scale",)).fetchall())
    finally:
        db.close()


def child_op(path: str, op: str) -> dict[str, float]:
    from slotmagic import Session

    out = Path(tempfile.mkdtemp()) / "work.md"
    calls: dict[str, Callable[[Session], object]] = {
        "budget": lambda s: s.budget("work"),
        "preview": lambda s: s.preview("work"),
        "turn": lambda s: s.submit_turn("one more question", slot="work"),
        "export": lambda s: s.history.export(out, "work"),
        "switch": lambda s: s.switch_slot("work"),
        "show": lambda s: s.slot("work"),
    }
    with Session.open("scale", db_path=path) as session:
        took = ms(lambda: calls[op](session))
    return {"ours": took, "raw": raw_slot_read(path)}


def child_tree(path: str) -> dict[str, float]:
    import contextlib
    import io

    from IPython.core.interactiveshell import InteractiveShell

    import slotmagic
    from slotmagic import Session

    with Session.open("scale", db_path=path) as session:
        tree = ms(session.tree)
    os.environ.update(SLOTMAGIC_DB=path, SLOTMAGIC_SESSION="scale", SLOTMAGIC_MODEL="echo")
    shell = InteractiveShell.instance()
    with contextlib.redirect_stdout(io.StringIO()):
        slotmagic.load_ipython_extension(shell)
        shell.run_cell("%config SlotMagic.widgets = False").raise_error()
        text = ms(lambda: shell.run_cell("%slot tree").raise_error())
    return {"ours": tree, "text": text, "raw": raw_slot_rows(path)}


def child_warm(path: str) -> dict[str, float]:
    import slotmagic._engine.run.turn as turn_module
    import slotmagic.tools._tool as tool_module
    from slotmagic import Session

    counts = {"views": 0, "schemas": 0}

    def counting(module: object, name: str, key: str) -> None:
        real = getattr(module, name)

        def counted(*args: object, **kwargs: object) -> object:
            counts[key] += 1
            return real(*args, **kwargs)

        setattr(module, name, counted)

    counting(turn_module, "make_view", "views")
    counting(tool_module, "schema_problem", "schemas")
    with Session.open("scale", db_path=path) as session:
        for i in range(20):
            session.submit_turn(f"warm {i}", slot="focused")
        counts.update(views=0, schemas=0)
        samples = [ms(lambda i=i: session.submit_turn(f"question {i}", slot="focused")) for i in range(100)]
    raw = raw_append_ms(Path(tempfile.mkdtemp()) / "raw.sqlite3")
    return {
        "ours": statistics.median(samples),
        "raw": raw,
        "views": counts["views"] / 100,
        "schemas": counts["schemas"],
    }


def child_build(path: str, messages: str) -> dict[str, float]:
    build_messages(Path(path), int(messages))
    return {}


def child_turns(path: str) -> dict[str, float]:
    """Warm turns on ``focused`` with nothing in the way (no counting wrappers: the same code
    runs in either tree): the median of 200, then the Python calls of 20 more, a turn."""
    from slotmagic import Session

    calls = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    with Session.open("scale", db_path=path) as session:
        for i in range(20):
            session.submit_turn(f"warm {i}", slot="focused")
        samples, cpu = [], []
        for i in range(200):
            start, start_cpu = time.perf_counter(), time.thread_time()
            session.submit_turn(f"question {i}", slot="focused")
            cpu.append((time.thread_time() - start_cpu) * 1e3)
            samples.append((time.perf_counter() - start) * 1e3)
        sys.setprofile(profile)
        for i in range(20):
            session.submit_turn(f"counted {i}", slot="focused")
        sys.setprofile(None)
    return {"ours": statistics.median(samples), "cpu": statistics.median(cpu), "calls": calls / 20}


def child_instructions(path: str, turns: str) -> dict[str, float]:
    """``turns`` warm turns on ``focused``, on a copy of ``path`` (run under callgrind)."""
    from slotmagic import Session

    work = Path(tempfile.mkdtemp()) / "state.sqlite3"
    shutil.copy(path, work)
    with Session.open("scale", db_path=work) as session:
        for i in range(int(turns)):
            session.submit_turn(f"question {i}", slot="focused")
    return {}


def instructions(path: Path, source: Path) -> float:
    """Instructions a warm turn: callgrind's count of 120 turns less that of 20, over 100."""
    env = {**os.environ, "PYTHONPATH": str(source), "SLOTMAGIC_BENCH_SOURCE": str(source)}
    counts = []
    for turns in (20, 120):
        command = [sys.executable, __file__, "--child", "instructions", str(path), str(turns)]
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        counts.append(int(done.stderr.rsplit("Collected : ", 1)[1].split()[0]))
    return (counts[1] - counts[0]) / 100


def against(other: Path, rounds: int) -> None:
    """This tree's warm turn beside ``other``'s, alternating fresh processes."""
    sizes = [100, 10_000]
    trees = {"this tree": ROOT, str(other): other}
    print(f"slotmagic warm turn, this tree ({ROOT}) beside {other}: {rounds} rounds of one fresh process a tree "
          f"and size, alternating (each the median of 200 turns on a focused slot, the echo model)")  # fmt: skip
    found: dict[tuple[str, int], list[dict[str, float]]] = {(name, n): [] for name in trees for n in sizes}
    counted: dict[tuple[str, int], float] = {}
    with tempfile.TemporaryDirectory(prefix="slotmagic-against-") as tmp:
        files = {}
        for name, tree in trees.items():
            for n in sizes:
                path = Path(tmp) / f"{len(files)}" / "state.sqlite3"
                path.parent.mkdir()
                fresh(1, "build", str(path), str(n), source=tree)  # each tree writes its own file
                files[name, n] = path
        print(f"load average {load()}")
        order = list(trees.items())
        for r in range(rounds):
            for name, tree in order if r % 2 == 0 else order[::-1]:
                for n in sizes:
                    found[name, n].append(fresh(1, "turns", str(files[name, n]), source=tree))
        print(f"load average {load()}")
        if shutil.which("valgrind"):
            counted = {(name, n): instructions(files[name, n], tree) for name, tree in trees.items() for n in sizes}
    print(f"\n{'':<24}" + "".join(f"{n:>12,}" for n in sizes) + "  messages")
    medians = {key: statistics.median(f["ours"] for f in runs) for key, runs in found.items()}
    cpu = {key: statistics.median(f["cpu"] for f in runs) for key, runs in found.items()}
    for name in trees:
        print(f"{name[-24:]:<24}" + "".join(f"{medians[name, n] * 1e3:>10.0f}us" for n in sizes))
        print(f"{'  its thread CPU':<24}" + "".join(f"{cpu[name, n] * 1e3:>10.0f}us" for n in sizes))
        calls = [statistics.median(f["calls"] for f in found[name, n]) for n in sizes]
        print(f"{'  Python calls a turn':<24}" + "".join(f"{c:>12,.0f}" for c in calls))
    first, second = trees
    ratios = [medians[first, n] / medians[second, n] for n in sizes]
    print(f"{'ratio (this / other)':<24}" + "".join(f"{r:>11.2f}x" for r in ratios))
    cpu_ratios = [cpu[first, n] / cpu[second, n] for n in sizes]
    print(f"{'  of thread CPU':<24}" + "".join(f"{r:>11.2f}x" for r in cpu_ratios))
    by_count: list[float] = []
    if counted:
        for name in trees:
            print(f"{'instructions, ' + name[-10:]:<24}" + "".join(f"{counted[name, n]:>12,.0f}" for n in sizes))
        by_count = [counted[first, n] / counted[second, n] for n in sizes]
        print(f"{'  ratio':<24}" + "".join(f"{r:>11.3f}x" for r in by_count))
    print(f"\ntargets (load average {load()}):")
    for n, ratio in zip(sizes, ratios, strict=True):
        label = f"warm turn, {n:,} messages: / {other.name}'s <= 1"
        print(f"  {'ok  ' if ratio <= 1 else 'over'} {label:<62} {ratio:,.2f}")
    for n, ratio in zip(sizes, by_count, strict=True) if by_count else ():
        label = f"warm turn, {n:,} messages, instructions: / {other.name}'s <= 1"
        print(f"  {'ok  ' if ratio <= 1 else 'over'} {label:<62} {ratio:,.3f}")


def raw_append_ms(path: Path) -> float:
    """A turn's rows (two messages and a turn record) in one transaction, WAL, synchronous
    NORMAL: the median of 100."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute(
        "CREATE TABLE IF NOT EXISTS m (slot INTEGER, seq INTEGER, role TEXT, content TEXT, PRIMARY KEY (slot, seq))"
    )
    db.execute("CREATE TABLE IF NOT EXISTS t (slot INTEGER, number INTEGER, info TEXT, PRIMARY KEY (slot, number))")
    samples = []
    for i in range(100):
        start = time.perf_counter()
        db.execute("BEGIN")
        db.executemany(
            "INSERT INTO m VALUES (1, ?, ?, ?)", [(2 * i, "user", QUESTION), (2 * i + 1, "assistant", ANSWER)]
        )
        db.execute("INSERT INTO t VALUES (1, ?, '{}')", (i,))
        db.execute("COMMIT")
        samples.append((time.perf_counter() - start) * 1e3)
    db.close()
    return statistics.median(samples)


def child_open(path: str) -> dict[str, float]:
    from slotmagic import Session

    start = time.perf_counter()
    session = Session.open("scale", db_path=path)
    took = (time.perf_counter() - start) * 1e3
    db = sqlite3.connect(path)
    raw = ms(lambda: db.execute("SELECT current_slot FROM sessions WHERE id = 'scale'").fetchone())
    db.close()
    session.close()
    return {"ours": took, "raw": raw}


def child_import() -> dict[str, float]:
    start = time.process_time()
    import IPython  # noqa: F401

    ipython = time.process_time() - start
    start = time.process_time()
    import slotmagic  # noqa: F401

    return {"ours": (time.process_time() - start) * 1e3, "raw": ipython * 1e3}


CHILDREN: dict[str, Callable[..., dict[str, float]]] = {
    "op": child_op,
    "tree": child_tree,
    "warm": child_warm,
    "open": child_open,
    "import": child_import,
    "build": child_build,
    "turns": child_turns,
    "instructions": child_instructions,
}


def fresh(samples: int, *args: str, source: Path = ROOT) -> dict[str, float]:
    """Each figure's median over ``samples`` fresh processes, running the code of ``source``."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(source), os.environ.get("PYTHONPATH", "")]),
        "SLOTMAGIC_BENCH_SOURCE": str(source),
    }
    found: list[dict[str, float]] = []
    for _ in range(samples):
        done = subprocess.run([sys.executable, __file__, "--child", *args], env=env, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr}")
        found.append(json.loads(done.stdout.splitlines()[-1]))
    return {key: statistics.median(f[key] for f in found) for key in found[0]}


# -- the report ------------------------------------------------------------------------------


def growth(values: list[float]) -> float:
    """The growth per 10x: the geometric mean of the steps (sizes go up 10x a step)."""
    steps = [b / a for a, b in itertools.pairwise(values) if a > 0]
    return statistics.geometric_mean(steps) if steps else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes, fewer samples")
    parser.add_argument("--against", type=Path, metavar="PATH", help="only the warm turn, beside this checkout's")
    parser.add_argument("--rounds", type=int, default=7, help="with --against: fresh processes a tree and size")
    parser.add_argument("--tree", action="store_true", help="only session.tree() and %%slot tree")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(CHILDREN[args.child[0]](*args.child[1:])))
        return 0
    if args.against is not None:
        against(args.against.resolve(), args.rounds)
        return 0
    slots = [10, 100, 1_000] if args.quick else [100, 1_000, 10_000]
    messages = [100, 1_000] if args.quick else [100, 1_000, 10_000]
    files = [100, 1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    samples = 3 if args.quick else 7
    print(f"slotmagic scale benchmark - {os.cpu_count()} cores, {platform.machine()}, Python "
          f"{platform.python_version()}, SQLite {sqlite3.sqlite_version}")  # fmt: skip
    print(f"{samples} fresh processes a figure, medians; raw: the baseline named, in the same process")
    checks: list[tuple[str, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="slotmagic-scale-") as tmp:
        among = "the tree of" if args.tree else "one slot among"
        print(f"\n-- {among} {' / '.join(f'{n:,}' for n in slots)} slots (load average {load()})")
        paths = []
        for n in slots:
            paths.append(Path(tmp) / f"slots{n}.sqlite3")
            build_slots(paths[-1], n)
        time.sleep(0.1)  # the builders' records of the files as whole settle
        print(f"{'a new kernel, first':<24}" + "".join(f"{n:>10,}" for n in slots) + "   per 10x   raw read   ratio")
        for op in () if args.tree else OPS:
            found = [fresh(samples, "op", str(p), op) for p in paths]
            ours = [f["ours"] for f in found]
            ratio = ours[-1] / found[-1]["raw"]
            print(f"{op:<24}" + "".join(f"{v:>8.2f}ms" for v in ours)
                  + f"   {growth(ours):6.2f}x  {found[-1]['raw']:6.2f}ms  {ratio:6.1f}x")  # fmt: skip
            checks.append((f"{op}: growth per 10x slots <= 1.3", growth(ours), 1.3))
        trees = [fresh(samples, "tree", str(p)) for p in paths]
        for key, label in (("ours", "session.tree()"), ("text", "%slot tree (text)")):
            ours = [t[key] for t in trees]
            ratio = ours[-1] / trees[-1]["raw"]
            print(f"{label:<24}" + "".join(f"{v:>8.2f}ms" for v in ours)
                  + f"   {growth(ours):6.2f}x  {trees[-1]['raw']:6.2f}ms  {ratio:6.1f}x  (raw: slot rows)")  # fmt: skip
            checks.append((f"{label}: growth per 10x slots <= 11 (linear)", growth(ours), 11.0))
            checks.append((f"{label}: / plain slot-rows query, {slots[-1]:,} slots <= 3", ratio, 3.0))
        if args.tree:
            report(checks)
            return 0

        print(f"\n-- a warm turn on {' / '.join(f'{n:,}' for n in messages)} messages (load average {load()})")
        warm = []
        for n in messages:
            path = Path(tmp) / f"messages{n}" / "state.sqlite3"
            path.parent.mkdir()
            build_messages(path, n)
            warm.append(fresh(samples, "warm", str(path)))
        ours = [w["ours"] for w in warm]
        ratio = ours[-1] / warm[-1]["raw"]
        print(f"{'warm submit_turn':<24}" + "".join(f"{v * 1e3:>8.0f}us" for v in ours)
              + f"   {growth(ours):6.2f}x  {warm[-1]['raw'] * 1e3:6.0f}us  {ratio:6.1f}x  (raw: its rows)")  # fmt: skip
        print(f"{'  views made a turn':<24}" + "".join(f"{w['views']:>10.2f}" for w in warm))
        print(f"{'  schemas checked':<24}" + "".join(f"{w['schemas']:>10.0f}" for w in warm) + "   (in 100 turns)")
        checks.append(("warm turn: growth per 10x messages <= 1.3", growth(ours), 1.3))
        checks.append(("warm turn: / plain append of its rows <= 15", ours[-1] / warm[-1]["raw"], 15.0))
        checks.append(("warm turn: views made a turn <= 1", max(w["views"] for w in warm), 1.0))
        checks.append(("warm turn: tool schemas checked in 100 turns <= 0", max(w["schemas"] for w in warm), 0.0))

        print(
            f"\n-- Session.open, {' / '.join(f'{n:,}' for n in files)} messages, closed cleanly (load average {load()})"
        )
        opened = []
        for n in files:
            path = Path(tmp) / f"file{n}" / "state.sqlite3"
            path.parent.mkdir()
            build_messages(path, n)
            time.sleep(0.1)
            opened.append(fresh(samples, "open", str(path)))
        ours = [o["ours"] for o in opened]
        sizes = [(Path(tmp) / f"file{n}" / "state.sqlite3").stat().st_size / 2**20 for n in files]
        ratio = ours[-1] / opened[-1]["raw"]
        print(f"{'Session.open':<24}" + "".join(f"{v:>8.2f}ms" for v in ours)
              + f"   {growth(ours):6.2f}x  {opened[-1]['raw']:6.2f}ms  {ratio:6.1f}x  (raw: its row)")  # fmt: skip
        print(f"{'  file size':<24}" + "".join(f"{s:>8.1f}MB" for s in sizes))
        checks.append(("Session.open: growth per 10x messages <= 1.3", growth(ours), 1.3))

    print(f"\n-- import (load average {load()})")
    imported = fresh(samples, "import")
    share = imported["ours"] / imported["raw"]
    print(f"import slotmagic after IPython: +{imported['ours']:.0f} ms CPU, IPython's {imported['raw']:.0f} ms "
          f"({share:.2f}x)")  # fmt: skip
    checks.append(("import slotmagic CPU / import IPython's <= 0.55", share, 0.55))
    report(checks)
    return 0


def report(checks: list[tuple[str, float, float]]) -> None:
    print(f"\ntargets (load average {load()}):")
    for label, value, limit in checks:
        print(f"  {'ok  ' if value <= limit else 'over'} {label:<62} {value:,.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
