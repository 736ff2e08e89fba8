"""Test set-up shared by every test, notebooks included.

Kernels and subprocesses started by the tests import slotmagic from this checkout, and every
test gets a store of its own: nothing touches a user's real state.
"""

from __future__ import annotations

import functools
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent

# Subprocesses (nbval and nbclient kernels, crash-test writers) inherit this environment.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
_run_dir = tempfile.mkdtemp(prefix="slotmagic-tests-")
os.environ["SLOTMAGIC_DB"] = str(Path(_run_dir) / "notebooks.sqlite3")
os.environ["XDG_CACHE_HOME"] = str(Path(_run_dir) / "cache")  # the store's whole-file records: not the user's
# nbval records a display but not its later updates: a reply must be shown once, whole. The
# echo model answers in far less than the stream throttle; a long throttle keeps it so on a
# loaded machine too.
os.environ.setdefault("SLOTMAGIC_STREAM_THROTTLE", "5")


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` (addopts): two workers a core. The suite waits more than it computes (kernels,
    servers and browsers starting, replies held for an event), so while one test waits another
    has the core; PYTEST_XDIST_AUTO_NUM_WORKERS, when set, decides instead."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return 2 * cores


def pytest_configure(config: pytest.Config) -> None:
    if os.name == "posix":
        kernels_over_unix_sockets(_run_dir)


# -- how the tests are spread over the workers ----------------------------------------------------
# ``--dist loadgroup`` (addopts): a test goes to whichever worker is free next, except tests that
# share state, which stay together on one worker: a notebook's cells (one kernel, in order) and
# a module whose fixtures outlive a test. The longest tests start first (browsers, then the rest
# marked slow, then the notebooks), so that none starts late and keeps one worker busy while
# the others stand idle at the end.

_SHARED_SCOPES = {"module", "class", "package"}


def _shared_state(item: pytest.Item) -> str | None:
    """The group ``item`` must run in with others, or None when it can run anywhere."""
    file = item.nodeid.split("::", 1)[0]
    if file.endswith(".ipynb"):
        return file
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.values() if info is not None else ()
    if any(d.scope in _SHARED_SCOPES for defs in definitions for d in defs):
        return file
    return None


def _start_rank(item: pytest.Item) -> int:
    if item.get_closest_marker("browser"):
        return 0
    if item.get_closest_marker("slow"):
        return 1
    return 2 if item.nodeid.split("::", 1)[0].endswith(".ipynb") else 3


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A worker reads its controller's --dist as option.loadgroup (its own dist is "no").
    if config.getoption("dist", "no") != "loadgroup" and not getattr(config.option, "loadgroup", False):
        return
    unit_of: dict[pytest.Item, str] = {}
    rank: dict[str, int] = {}
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        group = _shared_state(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        unit = unit_of[item] = group or item.nodeid
        rank[unit] = min(rank.get(unit, 3), _start_rank(item))
        first.setdefault(unit, index)
    # a group's tests stay next to each other, ranked by its longest kind of test
    items.sort(key=lambda item: (rank[unit_of[item]], first[unit_of[item]]))


def kernels_over_unix_sockets(folder: str) -> None:
    """The kernels this process starts (nbval's, nbclient's, jupyter_client's) talk over Unix
    sockets in ``folder``, never TCP. jupyter_client picks a kernel's TCP ports by binding port
    0 and letting go, and the kernel binds them after: another process starting a kernel
    meanwhile can take one, and the kernel dies with "Address already in use" (parallel
    workers make that likely). Each kernel manager gets socket paths of its own."""
    from jupyter_client.connect import ConnectionFileMixin

    def own_paths(manager: object) -> str:
        return os.path.join(folder, f"kernel-{secrets.token_hex(4)}")

    ConnectionFileMixin.class_traits()["transport"].default_value = "ipc"
    # traitlets keeps each class's default makers, copied from its bases when it is made
    classes: list[type] = [ConnectionFileMixin]
    while classes:
        cls = classes.pop()
        for generators in ("_trait_default_generators", "_all_trait_default_generators"):
            made = cls.__dict__.get(generators)
            if made is not None and "ip" in made:
                made["ip"] = own_paths
        classes += cls.__subclasses__()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_run_dir, ignore_errors=True)  # the notebooks' store of this run


@pytest.fixture(autouse=True)
def _private_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SLOTMAGIC_DB", str(tmp_path / "state.sqlite3"))
    yield


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "slots.sqlite3"


# -- a real IPython shell for the magics ----------------------------------------------------------


@pytest.fixture(scope="session")
def _testing_shell() -> object:
    from IPython.core.interactiveshell import InteractiveShell

    class TestingShell(InteractiveShell):
        """A real shell whose ``run_cell`` re-raises what the cell raised (IPython only prints
        a UsageError, and a test must see it)."""

        def run_cell(self, raw_cell: str, *args: object, **kwargs: object) -> object:  # type: ignore[override]
            result = super().run_cell(raw_cell, *args, **kwargs)  # type: ignore[arg-type]
            result.raise_error()
            return result

    return TestingShell.instance()


@pytest.fixture
def ip(_testing_shell: object, _private_store: None) -> Iterator[object]:
    """The shell with slotmagic freshly loaded on this test's private store."""
    import slotmagic

    shell = _testing_shell
    slotmagic.load_ipython_extension(shell)
    yield shell
    slotmagic.unload_ipython_extension(shell)
    shell.user_ns.pop("__session__", None)  # type: ignore[attr-defined]
    shell.config.pop("SlotMagic", None)  # type: ignore[attr-defined]  # %config outlives a reload
    if hasattr(shell, "_slotmagic_cell_identity"):
        delattr(shell, "_slotmagic_cell_identity")  # cells counted again in the next "kernel"
    if hasattr(shell, "_slotmagic_session_id"):
        delattr(shell, "_slotmagic_session_id")  # the next test is a new kernel
    # Out[n] and _ are the next test's own, as in a new kernel (whichever test ran here before)
    shell.history_manager.output_hist.clear()  # type: ignore[attr-defined]
    for name in ("_", "__", "___"):
        setattr(shell.displayhook, name, "")  # type: ignore[attr-defined]
        shell.user_ns[name] = ""  # type: ignore[attr-defined]
    servers = getattr(shell, "_slotmagic_mcp", None)
    if servers is not None:  # the kernel's MCP servers stop with it
        servers.close()
        delattr(shell, "_slotmagic_mcp")
    live = getattr(shell, "_slotmagic_live_widgets", None)
    if live is not None:  # widgets a test showed do not follow the next test's session
        for widget in live.widgets():
            widget.close()
        delattr(shell, "_slotmagic_live_widgets")


# -- the store contract: every store ------------------------------------------------------------
# ``store_target`` is a SQLite file, then a fresh schema on the PostgreSQL server at
# $SLOTMAGIC_TEST_POSTGRES (default postgresql://postgres@127.0.0.1:5432/test), dropped
# afterwards. A test module joins the contract by defining ``db_path`` from ``store_target``
# (test_session.py, test_concurrency.py, test_durability.py). Without a server the PostgreSQL
# runs skip, unless SLOTMAGIC_REQUIRE_POSTGRES=1 (set by .ci/run): then they fail.

POSTGRES = os.environ.get("SLOTMAGIC_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


@functools.cache
def postgres_problem() -> str | None:
    """Why no PostgreSQL test can run here (None: the server answers)."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed: pip install -e '.[test]'"
    try:
        psycopg.connect(POSTGRES, connect_timeout=3).close()
    except psycopg.Error as exc:
        return f"no PostgreSQL server at {POSTGRES} ({' '.join(str(exc).split())[:200]})"
    return None


def require_postgres() -> None:
    problem = postgres_problem()
    if problem is None:
        return
    if os.environ.get("SLOTMAGIC_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"{problem}; SLOTMAGIC_REQUIRE_POSTGRES=1 needs one (see docs/guide/postgres.md)")
    pytest.skip(problem)


def count_rows(target: str | Path, table: str, where: str = "") -> int:
    """Rows in a table of either store, read with the database's own client."""
    target = str(target)
    if target.startswith("postgresql://"):
        import psycopg

        from slotmagic._store.urls import parse_postgres_url

        schema = parse_postgres_url(target).schema
        with psycopg.connect(POSTGRES) as db:
            return int(db.execute(f"SELECT COUNT(*) FROM {schema}.{table} {where}").fetchone()[0])  # type: ignore[index]
    import sqlite3

    with sqlite3.connect(target) as db:
        return int(db.execute(f"SELECT COUNT(*) FROM {table} {where}").fetchone()[0])


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A URL of a fresh schema of its own, dropped after the test. Its connections carry an
    application name of their own too, so a test that has the server drop connections
    (``pg_stat_activity``) drops only its own, never another test run's."""
    require_postgres()
    import psycopg

    schema = "t_" + secrets.token_hex(6)
    yield f"{POSTGRES}?schema={schema}&application_name=slotmagic_{schema}"
    with psycopg.connect(POSTGRES, autocommit=True) as db:
        db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture(params=["sqlite", "postgres"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where the store under test lives: a SQLite file, then a PostgreSQL schema."""
    if request.param == "sqlite":
        yield str(tmp_path / "slots.sqlite3")
        return
    yield request.getfixturevalue("postgres_url")


# -- the tutorials under nbval: as committed ------------------------------------------------------
# JupyterLab autosaves a tutorial a user runs, and a notebook of one's own may sit beside them:
# nbval checks each tracked tutorial as git holds it, skips what git does not track, and a
# failure on a tutorial whose working copy differs says so first, in one line (tools/tutorials.py).

from tools.tutorials import NOTEBOOKS, changed, changed_note, committed_text, is_tutorial  # noqa: E402


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.suffix == ".ipynb" and collection_path.parent.resolve() == NOTEBOOKS.resolve():
        return True if not is_tutorial(collection_path) else None
    return None


@functools.cache
def _committed_tutorial() -> type:
    import nbformat
    from nbval.plugin import IPyNbFile

    class CommittedTutorial(IPyNbFile):  # type: ignore[misc]
        """nbval's notebook, read from its committed text rather than the file."""

        def collect(self) -> Iterator[object]:
            text, read = committed_text(Path(self.path)), nbformat.read
            nbformat.read = lambda *args, as_version, **kwargs: nbformat.reads(text, as_version=as_version)
            try:
                cells = list(super().collect())
            finally:
                nbformat.read = read
            # A cell tagged nbval-skip names cells by execution count ({Err[7]}), which nbval's
            # runs (no history kept) lack: tests/test_nbconvert.py runs it in order and checks it.
            yield from (cell for cell in cells if not cell.options.get("skip"))

    return CommittedTutorial


@pytest.hookimpl(hookwrapper=True)
def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> Iterator[None]:
    outcome = yield
    if file_path.suffix != ".ipynb" or not is_tutorial(file_path):
        return
    from nbval.plugin import IPyNbFile

    tutorial = _committed_tutorial()
    made = [
        tutorial.from_parent(parent, path=file_path) if isinstance(n, IPyNbFile) else n for n in outcome.get_result()
    ]
    outcome.force_result(made)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    notebook = getattr(item.parent, "path", None)
    tutorial = isinstance(notebook, Path) and notebook.suffix == ".ipynb" and is_tutorial(notebook)
    if report.failed and tutorial and changed(notebook):
        report.longrepr = f"{changed_note(notebook)}\n{report.longrepr}"
