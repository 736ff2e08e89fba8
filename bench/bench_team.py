"""A team on one server: N kernel-like worker processes on one PostgreSQL database, under load
and faults.

Each worker is a process like a kernel: it opens a session (its own, or one it shares with a
few others), runs turns at a set rate against a loopback OpenAI-compatible model server that
streams its replies with delays (``tests/reflect_server.py``: each reply says how many
messages its request held), derives and switches slots, searches, and keeps a tree's data live
through LISTEN/NOTIFY (a subscriber that re-reads the session's slots on every notification,
as the tree widget and the Slots sidebar do). Then each worker checks its own history against
what it sent: every turn it was told was stored is there exactly once, on the slot it went
to, its reply made from exactly the history before it; every turn it was told was not stored
is absent.

Faults while the workers run: ``--terminate-every S`` has the server terminate one of the
team's connections every S seconds (one in the middle of a write when there is one), and
``--restart-at S`` restarts the server S seconds in; a restart needs a server this bench may
restart: ``--own-server`` (a throwaway cluster made with initdb, on a free port; the default
when initdb is found) or ``--restart-command`` (e.g. ``pg_ctlcluster 15 main restart`` on a
machine of your own). The shared server of the tests is never restarted.

It reports throughput, slotmagic's own time per turn (the turn's wall time less the time spent
inside the model's HTTP stream), the server's connections for the team's application name,
notification lag (a turn committed by one member until another member's tree has it), and any
lost, duplicated, mis-stored or mis-reported turn.

    python bench/bench_team.py --workers 10 --seconds 60 --rate 10
    python bench/bench_team.py --workers 50 --seconds 600 --rate 10 --terminate-every 20 --restart-at 300
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the loopback model server the tests use

DEFAULT_URL = os.environ.get("SLOTMAGIC_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
MODEL = "openai:reflect"


@dataclass
class Config:
    url: str = DEFAULT_URL  # an admin URL of the server: the bench makes its own database there
    workers: int = 10
    seconds: float = 60.0
    rate: float = 10.0  # turns per second, all workers together
    group: int = 5  # workers sharing one session
    shared: float = 0.5  # the fraction of workers that share a session with others
    derive_every: int = 8  # a worker derives a new slot from its current one (and switches) every N turns
    search_every: int = 5
    terminate_every: float = 0.0  # seconds between connections terminated by the server (0: none)
    restart_at: float = 0.0  # seconds into the run the server is restarted (0: never)
    restart_command: str = ""
    own_server: bool = False
    delay: float = 0.05  # the model's time to its first byte, plus up to `jitter`
    jitter: float = 0.05
    chunks: int = 4  # the reply streams in this many events, `chunk_delay` apart
    chunk_delay: float = 0.01
    idle_timeout: float = 10.0  # the URL's idle_timeout= for the run (the default is 60)
    grace: float = 3.0  # after the run: notifications still in flight may land
    idle_phase: float = 0.0  # then the workers idle this long, still following: connections are counted
    profile: str = ""  # a file: the first worker's turns are profiled (cProfile, CPU time) into it


# -- a server of the bench's own (it may restart it) -------------------------------------------


class OwnServer:
    """A throwaway PostgreSQL cluster: initdb into a temporary folder, started on a free port
    with room for the team's connections; as the ``postgres`` OS user when run as root."""

    def __init__(self, max_connections: int) -> None:
        initdb = shutil.which("initdb") or next(Path("/usr/lib/postgresql").glob("*/bin/initdb"), None)
        if initdb is None:
            raise RuntimeError("no initdb on this machine: give --url a server, and no --restart-at")
        self.bin = Path(os.path.realpath(initdb)).parent
        self.dir = Path(tempfile.mkdtemp(prefix="slotmagic-team-pg-"))
        self.data = self.dir / "data"
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._as:
            shutil.chown(self.dir, "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        self._options = (
            f"-h 127.0.0.1 -p {self.port} -k {self.dir} -c max_connections={max_connections} "
            "-c shared_buffers=128MB -c fsync=off"
        )
        if (self.bin.parent / "lib" / "pg_stat_statements.so").exists():  # statements counted (see ServerStatements)
            self._options += " -c shared_preload_libraries=pg_stat_statements"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "log"), "-o", self._options, "-w", "start")
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run([*self._as, str(self.bin / tool), *args], check=True, capture_output=True, timeout=120)

    def restart(self) -> None:
        log = str(self.dir / "log")  # the server's output goes there, never to a pipe this process waits on
        self._run("pg_ctl", "-D", str(self.data), "-l", log, "-o", self._options, "-m", "fast", "-w", "restart")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)


def with_database(url: str, database: str, query: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + database, query=query))


@contextlib.contextmanager
def team_database(url: str) -> Iterator[tuple[str, str]]:
    """A database of the bench's own, and the application name its connections carry;
    dropped afterwards (its connections first, and only those)."""
    import psycopg

    tag = secrets.token_hex(4)
    database, application = f"slotmagic_team_{tag}", f"slotmagic_team_{tag}"
    admin_url = with_database(url, urlsplit(url).path.strip("/") or "postgres", "")
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {database}")
    try:
        yield with_database(url, database, f"schema=team&application_name={application}"), application
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND application_name = %s",
                (database, application),
            )
            admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


# -- where the CPU goes (Linux /proc; zeros elsewhere) --------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(stat: str, *, children: bool = False) -> float:
    """User plus system CPU seconds from a /proc/.../stat file (0.0 when it cannot be read);
    with ``children``, also those of the children it waited for (a postmaster's backends that
    have exited)."""
    try:
        fields = Path(stat).read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return ticks / _TICK


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each of this process's threads, by thread name."""
    found: dict[str, float] = {}
    for thread in threading.enumerate():
        if thread.native_id is not None:
            seconds = cpu_seconds(f"/proc/self/task/{thread.native_id}/stat")
            found[thread.name] = found.get(thread.name, 0.0) + seconds
    found["process"] = time.process_time()
    return found


def machine_busy() -> float:
    """CPU seconds the whole machine spent busy (all cores) since boot."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return (sum(values[:8]) - idle) / _TICK


def server_pids(data: Path | None) -> list[int]:
    """The processes of the bench's own server: its postmaster and the postmaster's children."""
    if data is None:
        return []
    try:
        postmaster = int((data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return []
    pids = [postmaster]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                    pids.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return pids


class CpuAccount:
    """CPU seconds spent during the run by the workers, the server (a server of the bench's
    own only), the harness (this process: the model server, the sampler, the faults) and
    everything else on the machine (other users of it): taken at the run's start and end."""

    def __init__(self, workers: list[int], data: Path | None) -> None:
        self.workers, self.data = workers, data
        self.start = self._take()

    def _take(self) -> dict[str, float]:
        server = server_pids(self.data)  # backends come and go: summed over those alive now
        return {
            "wall": time.monotonic(),
            "workers": sum(cpu_seconds(f"/proc/{pid}/stat") for pid in self.workers),
            "server": sum(cpu_seconds(f"/proc/{pid}/stat", children=i == 0) for i, pid in enumerate(server)),
            "harness": cpu_seconds("/proc/self/stat"),
            "machine": machine_busy(),
        }

    def cores(self) -> dict[str, float]:
        """Each part's CPU in cores (CPU seconds per second of the run)."""
        end = self._take()
        wall = max(1e-9, end["wall"] - self.start["wall"])
        used = {key: max(0.0, end[key] - self.start[key]) / wall for key in ("workers", "server", "harness", "machine")}
        used["others"] = max(0.0, used["machine"] - used["workers"] - used["server"] - used["harness"])
        return used


class ServerStatements:
    """The statements the team ran on a server of the bench's own (pg_stat_statements)."""

    def __init__(self, url: str, database: str) -> None:
        import psycopg

        self.url, self.database = url, database
        self.error = ""
        try:
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                admin.execute("SELECT pg_stat_statements_reset()")
        except psycopg.Error as exc:
            self.error = " ".join(str(exc).split())[:200]

    def read(self) -> dict[str, Any]:
        import psycopg

        if self.error:
            return {"error": self.error}
        with psycopg.connect(self.url, autocommit=True) as admin:
            rows = admin.execute(
                "SELECT calls, total_exec_time, left(regexp_replace(query, '\\s+', ' ', 'g'), 90)"
                " FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = %s"
                " ORDER BY calls DESC",
                (self.database,),
            ).fetchall()
        return {
            "calls": sum(int(r[0]) for r in rows),
            "exec_ms": sum(float(r[1]) for r in rows),
            "top": [(int(calls), round(float(ms), 1), query) for calls, ms, query in rows[:14]],
        }


# -- a worker: one kernel-like process -----------------------------------------------------------


@dataclass
class Sent:
    id: str
    slot: str
    start: float  # wall clock (time.time), comparable between processes on this machine
    end: float
    status: str  # stored | failed | unknown (the store said it may be stored)
    error: str = ""
    stored_slot: str = ""
    overhead: float = 0.0  # seconds of slotmagic's own time in the turn
    model: float = 0.0  # seconds inside the model's HTTP stream
    replied: float = 0.0  # wall clock: the reply's last event read (the turn is stored after it)
    cpu: float = 0.0  # CPU seconds of the turn's thread (its HTTP client's parsing included)


@dataclass
class WorkerReport:
    worker: int
    session: str
    sent: list[Sent] = field(default_factory=list)
    seen: dict[str, float] = field(default_factory=dict)  # a group member's turn id -> when the tree had it
    derives: int = 0
    switches: int = 0
    searches: int = 0
    refreshes: int = 0
    other_errors: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    misstored: list[str] = field(default_factory=list)
    misreported: list[str] = field(default_factory=list)  # said not stored, yet stored
    multiline_errors: int = 0
    warmup: float = (
        0.0  # seconds of the kernel's first turn (the provider, HTTP client, tokenizer loaded), before the run
    )
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds of each thread during the run
    notifications: int = 0  # NOTIFY payloads the listener received during the run


_MODEL_TIME = threading.local()


def _time_the_model() -> None:
    """Count the time spent inside the model's HTTP stream (waiting for the server, reading and
    parsing its events): the rest of a turn's wall time is slotmagic's own."""
    from slotmagic.providers._transport import HTTPProvider

    real = HTTPProvider.stream

    def stream(self: Any, request: Any) -> Iterator[Any]:
        events = real(self, request)
        while True:
            started = time.perf_counter()
            try:
                event = next(events)
            except StopIteration:
                _MODEL_TIME.replied = time.time()
                return
            finally:
                _MODEL_TIME.seconds = getattr(_MODEL_TIME, "seconds", 0.0) + time.perf_counter() - started
            yield event

    HTTPProvider.stream = stream  # type: ignore[method-assign]


def run_worker(spec: dict[str, Any]) -> None:
    from reflect_server import parse_reflection

    from slotmagic import ProviderSettings, Session
    from slotmagic._errors import SlotMagicError

    _time_the_model()
    index, session_id, members = spec["worker"], spec["session"], spec["members"]
    cfg = Config(**spec["config"])
    settings = ProviderSettings(openai_base_url=spec["model_url"], openai_api_key="sk-loopback", read_timeout=30)
    session = Session.open(session_id, db_path=spec["db"], model=MODEL, settings=settings, user=f"user{index}")
    session.options.context_windows = {MODEL: 100_000_000}  # no compaction in this bench
    report = WorkerReport(index, session_id)
    current = f"w{index}-b0"
    session.create_slot(current)
    # A kernel's first turn loads the provider, its HTTP client and the tokenizer (seconds, once):
    # made before the run, on a slot of its own, so that 50 kernels starting together do not
    # measure each other's start; its time is reported apart.
    warm = time.perf_counter()
    session.create_slot(f"warm{index}")
    session.submit_turn("warm up", slot=f"warm{index}")
    report.warmup = time.perf_counter() - warm

    # The tree's data, kept live: a subscriber re-reads the session's slots on each notification
    # (on a thread of its own, as a kernel's event loop does between cells) and notes when each
    # turn of another member first appears, reading only the messages new since it last looked
    # (a slot's whole history, read again at each notification, grew with the run and took the
    # turns' thread's time in the same process: what was measured was the harness).
    tree = Session.open(session_id, store=session.store, model=MODEL, settings=settings)
    changed, stop = threading.Event(), threading.Event()
    known: dict[str, int] = {}

    def refresh() -> None:
        with tree.store.consistent():  # one look for others' writes per refresh, as the live widgets make
            for slot in tree.list_slots():
                count = slot.meta.message_count
                if known.get(slot.id) == count:
                    continue
                if members > 1:
                    now = time.time()
                    for message in tree.store.history(session_id, slot.id).messages(known.get(slot.id, 0)):
                        if message.role == "user" and ":" in message.content:
                            report.seen.setdefault(message.content, now)
                known[slot.id] = count
        report.refreshes += 1

    def follow() -> None:
        while not stop.is_set():
            if changed.wait(0.5):
                changed.clear()
                try:
                    refresh()
                except SlotMagicError as exc:  # the server away: the next notification retries
                    report.other_errors.append(f"refresh: {exc}")

    store: Any = session.store
    heard = store._notified

    def notified(payloads: Any) -> None:  # counted: every write to the schema reaches every listener
        report.notifications += len(payloads)
        heard(payloads)

    store._notified = notified
    store.follow(session_id)  # as a kernel does: other sessions' writes do not wake it
    unsubscribe = store.subscribe(changed.set)
    follower = threading.Thread(target=follow, name="tree", daemon=True)
    follower.start()

    print("ready", flush=True)
    start = float(sys.stdin.readline())
    report.notifications = 0
    cpu_before = thread_cpu()
    profiler = None
    if spec.get("profile") and index == 0:  # the first worker's turns, in cProfile (``--profile``)
        import cProfile

        profiler = cProfile.Profile(time.thread_time)  # CPU time: waiting for the server or the model is not counted
    interval = cfg.workers / cfg.rate
    due = start + random.uniform(0, interval)
    end = start + cfg.seconds
    number = 0
    while due < end:
        time.sleep(max(0.0, due - time.time()))
        due += interval
        number += 1
        text = f"w{index}:{number}"
        try:
            if number % cfg.derive_every == 0:
                derived = f"w{index}-b{number}"
                session.derive_slot(derived, current)
                report.derives += 1
                current = derived
                session.switch_slot(current)  # shared: the session's current slot, contended
                report.switches += 1
            if number % cfg.search_every == 0:
                session.history.search(f"w{index}", limit=5)
                report.searches += 1
        except SlotMagicError as exc:
            report.other_errors.append(f"{text}: {exc}")
        _MODEL_TIME.seconds = 0.0
        began, t0, cpu0 = time.time(), time.perf_counter(), time.thread_time()
        try:
            if profiler is not None:
                reply = profiler.runcall(session.submit_turn, text, slot=current)
            else:
                reply = session.submit_turn(text, slot=current)
        except SlotMagicError as exc:
            message = str(exc)
            report.multiline_errors += "\n" in message
            status = "unknown" if "may be stored" in message else "failed"
            import traceback

            where = " <- ".join(f"{f.name}:{f.lineno}" for f in reversed(traceback.extract_tb(exc.__traceback__)[-6:]))
            report.sent.append(Sent(text, current, began, time.time(), status, message[-150:] + " @ " + where))
            continue
        wall, cpu = time.perf_counter() - t0, time.thread_time() - cpu0
        model = _MODEL_TIME.seconds
        report.sent.append(
            Sent(
                text,
                current,
                began,
                time.time(),
                "stored",
                "",
                reply.slot,
                overhead=max(0.0, wall - model),
                model=model,
                cpu=cpu,
                replied=getattr(_MODEL_TIME, "replied", 0.0),
            )
        )
        if reply.slot != current:  # a fork: another writer moved the slot on (never expected here)
            current = reply.slot

    time.sleep(max(0.0, end - time.time()))
    cpu_after = thread_cpu()
    if profiler is not None:
        profiler.dump_stats(spec["profile"])
    report.cpu = {name: cpu_after[name] - cpu_before.get(name, 0.0) for name in cpu_after}
    time.sleep(max(0.0, end + cfg.grace + cfg.idle_phase - time.time()))  # all stop following together
    stop.set()
    follower.join(5)
    unsubscribe()
    check_history(report, spec["db"], session_id, index, parse_reflection)
    session.close()
    Path(spec["out"]).write_text(json.dumps(asdict(report)))


def check_history(report: WorkerReport, db: str, session_id: str, index: int, reflection: Any) -> None:
    """Read the worker's slots back on a new connection and hold each turn it sent against
    what it was told."""
    from slotmagic import Session

    with Session.open(session_id, db_path=db) as fresh:
        where: dict[str, list[tuple[str, int]]] = {}  # turn id -> (slot, position) of each stored copy
        seen_origins: set[tuple[int, int]] = set()
        mine = [s.id for s in fresh.list_slots() if s.id.startswith(f"w{index}-")]
        for slot in mine:
            messages = fresh.messages(slot)
            for turn in fresh.history.turns(slot):
                if turn.origin in seen_origins or turn.count != 2:
                    continue
                seen_origins.add(turn.origin)
                user, answer = messages[turn.start], messages[turn.start + 1]
                where.setdefault(user.content, []).append((slot, turn.start))
                if reflection(answer.content) != (turn.start + 1, user.content):
                    report.misstored.append(f"{user.content}: its reply was made from another history")
        for sent in report.sent:
            copies = where.get(sent.id, [])
            if sent.status == "stored":
                if not copies:
                    report.lost.append(sent.id)
                elif len(copies) > 1:
                    report.duplicated.append(sent.id)
                elif copies[0][0] != sent.stored_slot:  # tree order: the slot it was stored on comes first
                    report.misstored.append(f"{sent.id}: told {sent.stored_slot}, found in {copies[0][0]}")
            elif sent.status == "failed" and copies:
                report.misreported.append(sent.id)
            elif len(copies) > 1:
                report.duplicated.append(sent.id)
        sent_ids = {s.id for s in report.sent}
        report.duplicated += [turn_id for turn_id in where if turn_id not in sent_ids]  # stored, never sent


# -- the coordinator ------------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


class Sampler(threading.Thread):
    """The server's connections carrying the team's application name, once a second."""

    def __init__(self, url: str, application: str) -> None:
        super().__init__(daemon=True)
        self.url, self.application = url, application
        self.counts: list[int] = []
        self.stop = threading.Event()

    def run(self) -> None:
        import psycopg

        while not self.stop.wait(1.0):
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=2) as admin:
                    found = admin.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (self.application,)
                    ).fetchone()
                    self.counts.append(int(found[0]) if found else 0)
            except psycopg.Error:
                pass  # the server restarting


class Faults(threading.Thread):
    """Terminates one of the team's connections every so often (one in the middle of a write
    when there is one) and restarts the server once, if asked."""

    def __init__(self, cfg: Config, url: str, application: str, start: float, restart: Any) -> None:
        super().__init__(daemon=True)
        self.cfg, self.url, self.application, self.start_at, self.restart = cfg, url, application, start, restart
        self.terminated: dict[str, int] = {"in a write": 0, "other": 0}
        self.restarted: tuple[float, float] | None = None
        self.error = ""
        self.stop = threading.Event()

    def run(self) -> None:
        import psycopg

        next_kill = self.start_at + self.cfg.terminate_every if self.cfg.terminate_every else float("inf")
        restart_at = self.start_at + self.cfg.restart_at if self.cfg.restart_at else float("inf")
        while not self.stop.wait(0.05):
            now = time.time()
            if now >= restart_at:
                restart_at = float("inf")
                began = time.time()
                try:
                    self.restart()
                except Exception as exc:  # reported, and the run goes on without it
                    self.error = f"the restart failed: {exc}"
                    continue
                self.restarted = (began, time.time())
            if now >= next_kill:
                next_kill += self.cfg.terminate_every
                with contextlib.suppress(psycopg.Error):
                    self._terminate_one()

    def _terminate_one(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True, connect_timeout=2) as admin:
            deadline = time.time() + 0.5
            while True:  # a write in progress if one comes up within half a second
                rows = admin.execute(
                    "SELECT pid, state FROM pg_stat_activity WHERE application_name = %s AND pid <> pg_backend_pid()",
                    (self.application,),
                ).fetchall()
                writing = [pid for pid, state in rows if state == "idle in transaction"]
                if writing or time.time() > deadline:
                    break
                time.sleep(0.002)
            victims = writing or [pid for pid, _ in rows]
            if victims:
                admin.execute("SELECT pg_terminate_backend(%s)", (random.choice(victims),))
                self.terminated["in a write" if writing else "other"] += 1


def run_team(cfg: Config, log: Any = print) -> dict[str, Any]:
    """Run the team; the report (see ``summarise``)."""
    from reflect_server import ReflectServer

    own: OwnServer | None = None
    url = cfg.url
    if cfg.own_server:
        own = OwnServer(max_connections=max(100, 3 * cfg.workers + 20))
        url = own.url
    restart: Any = None
    if cfg.restart_at:
        if own is not None:
            restart = own.restart
        elif cfg.restart_command:
            restart = lambda: subprocess.run(cfg.restart_command, shell=True, check=True, timeout=120)  # noqa: E731
        else:
            raise SystemExit("--restart-at needs --own-server or --restart-command")
    loads = [os.getloadavg()[0]]
    try:
        with (
            team_database(url) as (db, application),
            ReflectServer(cfg.delay, cfg.jitter, cfg.chunks, cfg.chunk_delay) as model,
            tempfile.TemporaryDirectory() as folder,
        ):
            db = f"{db}&idle_timeout={cfg.idle_timeout:g}"
            from slotmagic._store import open_store

            open_store(db).close()  # the schema, made once before the team starts
            # The first `shared` of the workers share sessions, in groups of at most `group`
            # (at least two: a group of one shares nothing).
            shared = math.ceil(cfg.workers * cfg.shared)
            shared = 0 if shared < 2 else shared
            groups = math.ceil(shared / cfg.group) if shared else 0
            specs = []
            for index in range(cfg.workers):
                group = index % groups if index < shared else None
                specs.append(
                    {
                        "worker": index,
                        "session": f"g{group}" if group is not None else f"w{index}",
                        "members": sum(1 for i in range(shared) if i % groups == group) if group is not None else 1,
                        "config": asdict(cfg),
                        "db": db,
                        "model_url": model.url,
                        "out": str(Path(folder) / f"w{index}.json"),
                        "profile": cfg.profile,
                    }
                )
            log(f"starting {cfg.workers} workers ({shared} sharing {groups} sessions) ...")
            procs = [
                subprocess.Popen(
                    [sys.executable, __file__, "--worker", json.dumps(spec)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for spec in specs
            ]
            for proc in procs:
                assert proc.stdout is not None
                line = proc.stdout.readline()
                if line.strip() != "ready":
                    raise RuntimeError(f"a worker did not start: {line!r}")
            start = time.time() + 1.0
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write(f"{start}\n")
                proc.stdin.flush()
            sampler = Sampler(with_database(url, urlsplit(url).path.strip("/") or "postgres", ""), application)
            faults = Faults(cfg, sampler.url, application, start, restart)
            statements = ServerStatements(sampler.url, urlsplit(db).path.strip("/")) if own is not None else None
            time.sleep(max(0.0, start - time.time()))
            account = CpuAccount([proc.pid for proc in procs], own.data if own is not None else None)
            sampler.start()
            faults.start()
            log(f"running for {cfg.seconds:g} s at {cfg.rate:g} turns/s ...")
            while time.time() < start + cfg.seconds:
                time.sleep(min(10.0, max(0.1, start + cfg.seconds - time.time())))
                loads.append(os.getloadavg()[0])
            cores = account.cores()
            server_statements = statements.read() if statements is not None else None
            faults.stop.set()
            sampler.stop.set()
            idle: int | None = None
            if cfg.idle_phase:  # the workers idle, each still following the store
                time.sleep(max(0.0, start + cfg.seconds + cfg.grace + cfg.idle_phase - 1.0 - time.time()))
                idle = count_connections(sampler.url, application)
            for proc in procs:
                proc.wait(timeout=cfg.grace + cfg.idle_phase + 300)
            reports = [json.loads(Path(spec["out"]).read_text()) for spec in specs if Path(spec["out"]).exists()]
            failed_workers = sum(1 for proc in procs if proc.returncode != 0)
            report = summarise(cfg, reports, specs, sampler, faults, start, loads, failed_workers, idle)
            return report | {"cpu_cores": cores, "server_statements": server_statements}
    finally:
        if own is not None:
            own.close()


def count_connections(url: str, application: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        found = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (application,)
        ).fetchone()
        return int(found[0]) if found else 0


def summarise(
    cfg: Config,
    reports: list[dict[str, Any]],
    specs: list[dict[str, Any]],
    sampler: Sampler,
    faults: Faults,
    start: float,
    loads: list[float],
    failed_workers: int,
    idle: int | None,
) -> dict[str, Any]:
    sent = [s for r in reports for s in r["sent"]]
    stored = [s for s in sent if s["status"] == "stored"]
    # A kernel's first turn also loads the provider, its HTTP client and the tokenizer, once:
    # counted apart from the steady state.
    firsts = {r["worker"]: min((s["start"] for s in r["sent"]), default=0.0) for r in reports}
    first_ids = {s["id"] for r in reports for s in r["sent"] if s["start"] == firsts[r["worker"]]}
    overhead = [s["overhead"] * 1000 for s in stored if s["id"] not in first_ids]
    first_overhead = [s["overhead"] * 1000 for s in stored if s["id"] in first_ids]
    cpu = [s["cpu"] * 1000 for s in stored if s["id"] not in first_ids]
    model = [s["model"] * 1000 for s in stored]
    # From the reply's last event: the turn is stored after it, so the lag is never understated
    # (it includes the writer storing the turn); submit_turn's return comes after the commit
    # and the calibration write, and another kernel may see the turn before it.
    committed = {s["id"]: s["replied"] or s["end"] for s in stored}
    group_of = {spec["worker"]: spec["session"] for spec in specs}
    lags, missed = [], []
    for r in reports:
        if next(spec["members"] for spec in specs if spec["worker"] == r["worker"]) < 2:
            continue
        for other in reports:
            if other["worker"] == r["worker"] or group_of[other["worker"]] != group_of[r["worker"]]:
                continue
            for s in other["sent"]:
                if s["status"] != "stored":
                    continue
                seen = r["seen"].get(s["id"])
                if seen is None:
                    missed.append(f"w{r['worker']} never had {s['id']}")
                else:
                    lags.append(max(0.0, seen - committed[s["id"]]) * 1000)
    threads: dict[str, float] = {}
    for r in reports:
        for name, seconds in r["cpu"].items():
            threads[name] = threads.get(name, 0.0) + seconds
    recovery: list[float] = []
    if faults.restarted is not None:
        back = faults.restarted[1]
        for r in reports:
            after = [s["end"] for s in r["sent"] if s["status"] == "stored" and s["start"] >= faults.restarted[0]]
            recovery.append((min(after) - back) if after else float("inf"))
    problems = {key: sum(len(r[key]) for r in reports) for key in ("lost", "duplicated", "misstored", "misreported")}
    return {
        "workers": cfg.workers,
        "workers_reporting": len(reports),
        "workers_failed": failed_workers,
        "seconds": cfg.seconds,
        "rate": cfg.rate,
        "idle_phase": cfg.idle_phase,
        "turns_sent": len(sent),
        "turns_stored": len(stored),
        "turns_failed": sum(1 for s in sent if s["status"] == "failed"),
        "turns_unknown": sum(1 for s in sent if s["status"] == "unknown"),
        "multiline_errors": sum(r["multiline_errors"] for r in reports),
        "throughput": len(stored) / cfg.seconds,
        "overhead_ms": {p: percentile(overhead, p) for p in (50, 95, 99)} | {"max": max(overhead, default=0.0)},
        "first_turn_ms": {50: percentile(first_overhead, 50), "max": max(first_overhead, default=0.0)},
        "slowest": sorted(((s["overhead"] * 1000, s["id"], s["start"] - start) for s in stored), reverse=True)[:5],
        "model_ms": {p: percentile(model, p) for p in (50, 99)},
        "cpu_ms": {p: percentile(cpu, p) for p in (50, 95, 99)},
        "lag_ms": {p: percentile(lags, p) for p in (50, 95, 99)} | {"max": max(lags, default=0.0), "n": len(lags)},
        "missed_updates": len(missed),
        "missed_examples": missed[:5],
        "connections": {
            "max": max(sampler.counts, default=0),
            "mean": statistics.fmean(sampler.counts) if sampler.counts else 0.0,
            "per_worker_max": max(sampler.counts, default=0) / cfg.workers,
            "idle": idle,  # after idle_timeout with no turns: the listeners only
        },
        "terminated": faults.terminated,
        "fault_error": faults.error,
        "restart_seconds": None if faults.restarted is None else faults.restarted[1] - faults.restarted[0],
        "recovery_s": {"max": max(recovery), "median": statistics.median(recovery)} if recovery else None,
        "derives": sum(r["derives"] for r in reports),
        "switches": sum(r["switches"] for r in reports),
        "searches": sum(r["searches"] for r in reports),
        "refreshes": sum(r["refreshes"] for r in reports),
        "other_errors": sum(len(r["other_errors"]) for r in reports),
        "other_error_examples": [e for r in reports for e in r["other_errors"]][:5],
        "failed_examples": [s["error"] for s in sent if s["status"] != "stored"][:3],
        "misreported_examples": [s["error"] for r in reports for s in r["sent"] if s["id"] in set(r["misreported"])][
            :5
        ],
        "worker_cpu_cores": {name: seconds / cfg.seconds for name, seconds in sorted(threads.items())},
        "worker_cpu_ms_per_turn": {
            name: 1000 * seconds / max(1, len(sent)) for name, seconds in sorted(threads.items())
        },
        "notifications": sum(r["notifications"] for r in reports),
        "warmup_ms": {
            50: percentile([r["warmup"] * 1000 for r in reports], 50),
            "max": max((r["warmup"] * 1000 for r in reports), default=0.0),
        },
        "load_average": {"mean": statistics.fmean(loads), "max": max(loads)},
        **problems,
    }


def show(report: dict[str, Any]) -> str:
    o, lag, c = report["overhead_ms"], report["lag_ms"], report["connections"]
    lines = [
        f"workers {report['workers']} ({report['workers_reporting']} reported), {report['seconds']:g} s at "
        f"{report['rate']:g} turns/s; load average mean {report['load_average']['mean']:.1f}, "
        f"max {report['load_average']['max']:.1f}",
        f"turns: {report['turns_stored']} stored, {report['turns_failed']} failed (said so), "
        f"{report['turns_unknown']} 'may be stored'; throughput {report['throughput']:.2f} turns/s",
        f"lost {report['lost']}, duplicated {report['duplicated']}, mis-stored {report['misstored']}, "
        f"mis-reported {report['misreported']}, multi-line errors {report['multiline_errors']}",
        f"slotmagic's time per turn: p50 {o[50]:.1f} ms, p95 {o[95]:.1f} ms, p99 {o[99]:.1f} ms, "
        f"max {o['max']:.1f} ms (a kernel's first turn: p50 {report['first_turn_ms'][50]:.0f} ms, max "
        f"{report['first_turn_ms']['max']:.0f} ms; the model's time: p50 {report['model_ms'][50]:.0f} ms)",
        f"CPU time of a turn's thread: p50 {report['cpu_ms'][50]:.1f} ms, p95 {report['cpu_ms'][95]:.1f} ms, "
        f"p99 {report['cpu_ms'][99]:.1f} ms",
        f"notification lag: p50 {lag[50]:.0f} ms, p95 {lag[95]:.0f} ms, p99 {lag[99]:.0f} ms, "
        f"max {lag['max']:.0f} ms over {lag['n']} updates; missed {report['missed_updates']}",
        f"server connections: max {c['max']} ({c['per_worker_max']:.2f} per worker), mean {c['mean']:.1f}"
        + ("" if c["idle"] is None else f"; idle (no turn for {report['idle_phase']:g} s): {c['idle']}"),
        f"faults: terminated {report['terminated']}; restart "
        + (
            "none"
            if report["restart_seconds"] is None
            else f"took {report['restart_seconds']:.1f} s, every worker stored a turn again within "
            f"{report['recovery_s']['max']:.1f} s of it (median {report['recovery_s']['median']:.1f} s)"
        ),
        f"notifications received by the listeners: {report['notifications']} "
        f"({report['notifications'] / report['seconds']:.0f}/s); "
        f"a kernel's warm-up turn: p50 {report['warmup_ms'][50]:.0f} ms, max {report['warmup_ms']['max']:.0f} ms",
        "workers' CPU by thread (cores; ms per turn): "
        + ", ".join(
            f"{name} {cores:.2f} ({report['worker_cpu_ms_per_turn'][name]:.1f})"
            for name, cores in report["worker_cpu_cores"].items()
        ),
        f"also: {report['derives']} derives, {report['switches']} switches, {report['searches']} searches, "
        f"{report['refreshes']} tree refreshes, {report['other_errors']} other errors",
    ]
    cores = report.get("cpu_cores")
    if cores:
        lines.append(
            "CPU during the run (cores of 2): "
            + ", ".join(f"{key} {cores[key]:.2f}" for key in ("workers", "server", "harness", "others", "machine"))
        )
    statements = report.get("server_statements")
    if statements and "error" not in statements:
        lines.append(
            f"server statements: {statements['calls']} ({statements['calls'] / report['seconds']:.0f}/s, "
            f"{statements['calls'] / max(1, report['turns_sent']):.1f} per turn), "
            f"executing {statements['exec_ms']:.0f} ms"
        )
        lines += [f"  {calls:7d} {ms:9.1f} ms  {query}" for calls, ms, query in statements["top"]]
    elif statements:
        lines.append(f"server statements: not counted ({statements['error']})")
    return "\n".join([*lines, "targets:", *targets(report)])


def targets(report: dict[str, Any]) -> list[str]:
    """The issue's targets, each "ok" or "over" (bench/run_all.py collects these lines)."""
    wrong = sum(report[k] for k in ("lost", "duplicated", "misstored", "misreported"))
    checks = [
        ("lost, duplicated, mis-stored or mis-reported turns = 0", wrong, wrong == 0),
        ("slotmagic's time per turn p99, ms <= 20", report["overhead_ms"][99], report["overhead_ms"][99] <= 20),
        ("notification lag p99, ms <= 500", report["lag_ms"][99], report["lag_ms"][99] <= 500),
        ("missed live updates = 0", report["missed_updates"], report["missed_updates"] == 0),
        ("server connections per worker <= 2", report["connections"]["per_worker_max"],
         report["connections"]["per_worker_max"] <= 2),
    ]  # fmt: skip
    return [f"  {'ok  ' if ok else 'over'} {what:<56} {value:g}" for what, value, ok in checks]


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        run_worker(json.loads(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=DEFAULT_URL, help="an admin URL of the server (default %(default)s)")
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=10.0, help="turns per second, all workers together")
    parser.add_argument("--terminate-every", type=float, default=0.0, metavar="S")
    parser.add_argument("--restart-at", type=float, default=0.0, metavar="S")
    parser.add_argument("--restart-command", default="", help="how to restart the server at --url")
    parser.add_argument("--own-server", action="store_true", help="a throwaway cluster (initdb) of the bench's own")
    parser.add_argument("--idle-timeout", type=float, default=10.0, help="the URL's idle_timeout= (s)")
    parser.add_argument("--idle-phase", type=float, default=0.0, metavar="S", help="idle S s after, then count")
    parser.add_argument("--json", type=Path, help="write the report here too")
    parser.add_argument("--profile", default="", help="profile the first worker's turns (CPU time) into this file")
    parser.add_argument("--quick", action="store_true", help="5 workers for 20 s at 5 turns/s (bench/run_all.py)")
    args = parser.parse_args()
    if args.quick:
        args.workers, args.seconds, args.rate = 5, 20.0, 5.0
    cfg = Config(
        url=args.url,
        workers=args.workers,
        seconds=args.seconds,
        rate=args.rate,
        terminate_every=args.terminate_every,
        restart_at=args.restart_at,
        restart_command=args.restart_command,
        own_server=args.own_server,
        idle_timeout=args.idle_timeout,
        idle_phase=args.idle_phase,
        profile=str(Path(args.profile).resolve()) if args.profile else "",
    )
    report = run_team(cfg)
    print(show(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
