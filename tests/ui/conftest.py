"""A real JupyterLab server and headless Chromium for UI tests.

Each starts once per test worker (seconds of CPU each): a test gets a folder of its own under
the server's root and a new browser context. After each test every session and kernel it
started is shut down, and the lab's settings and saved workspaces are put back as they were;
every page a test loads starts from a new workspace (``?reset``, ``Lab.tree_url``).

Chromium is Debian's (/usr/bin/chromium; playwright never downloads a browser here). Without
it these tests skip, except where SLOTMAGIC_REQUIRE_BROWSER is set (CI sets it): there a
missing browser is a failure.

The lab loads the JupyterLab extension built in this checkout (``slotmagic/labextension``,
made by ``pip install -e .`` or ``jlpm build`` in ``labextension/``), ahead of any installed
copy. Screenshots go to ``tests/ui/artifacts/`` (git ignores it).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]
BUILT_EXTENSION = ROOT / "slotmagic" / "labextension"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _need(condition: bool, what: str) -> None:
    if not condition:
        if os.environ.get("SLOTMAGIC_REQUIRE_BROWSER"):
            pytest.fail(f"{what} is required here (SLOTMAGIC_REQUIRE_BROWSER is set)")
        pytest.skip(f"{what} is not installed: apt-get install chromium; pip install playwright")


# Installed in the kernels of every test's lab (the IPython startup of the server's IPYTHONDIR)
# and idle unless the kernel's folder asks for it (Lab.count_echo_calls): the echo model then
# counts its requests in that file. A function, so a kernel's namespace gains no name from it.
COUNTING_ECHO = """
def _slotmagic_count_echo_calls():
    from pathlib import Path

    calls = Path.cwd() / ".echo-calls"
    if not calls.exists():
        return
    from slotmagic.providers._echo import EchoProvider

    plain_stream, plain_astream = EchoProvider.stream, EchoProvider.astream

    def count():
        with calls.open("a") as f:
            f.write("call\\n")

    def stream(self, request):
        count()
        return plain_stream(self, request)

    def astream(self, request):
        count()
        return plain_astream(self, request)

    EchoProvider.stream, EchoProvider.astream = stream, astream


_slotmagic_count_echo_calls()
del _slotmagic_count_echo_calls
"""


class LabServer:
    """A JupyterLab server serving ``root``, with its own settings, workspaces, IPython and
    runtime folders, on a port the system gives it (read back from the server's runtime file):
    labs started at once by parallel test workers never meet. One serves the UI tests of a
    worker, each test in a folder of its own under ``root`` (see ``Lab``)."""

    def __init__(self, root: Path, home: Path) -> None:
        self.root = root
        self.settings = home / "settings"
        self.workspaces = home / "workspaces"
        news = self.settings / "@jupyterlab" / "apputils-extension"
        news.mkdir(parents=True)
        # The news toast would cover the page.
        (news / "notification.jupyterlab-settings").write_text(
            json.dumps({"fetchNews": "false", "checkForUpdates": False})
        )
        # Every cell rendered, scrolled into view or not: with JupyterLab's default windowing
        # (content-visibility) a cell off screen is not rendered and its text reads empty, so a
        # check of what a widget says would pass or fail by where the page happened to scroll.
        tracker = self.settings / "@jupyterlab" / "notebook-extension"
        tracker.mkdir(parents=True)
        (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
        # The settings every test starts from: what a test changes (a theme) is undone after it.
        self.initial_settings = {p.relative_to(self.settings): p.read_bytes() for p in self.settings.rglob("*.*")}
        startup = home / "ipython" / "profile_default" / "startup"
        startup.mkdir(parents=True)
        (startup / "00-counting-echo.py").write_text(COUNTING_ECHO)
        # Its kernels on Unix sockets beside their connection files (as conftest.py has the
        # tests' own kernels): a socket path must stay short, so the runtime folder is.
        self.runtime = Path(tempfile.mkdtemp(prefix="slotmagic-lab-"))
        # The extension built in this checkout, found first on the data path.
        data = home / "jupyter-data"
        (data / "labextensions").mkdir(parents=True)
        if BUILT_EXTENSION.is_dir():
            (data / "labextensions" / "slotmagic").symlink_to(BUILT_EXTENSION, target_is_directory=True)
        # A venv made with --system-site-packages sees the base interpreter's packages, but
        # JupyterLab looks for their front ends (ipywidgets', anywidget's) under the venv only.
        base = str(Path(sys.base_prefix) / "share" / "jupyter") if sys.base_prefix != sys.prefix else None
        env = {
            **os.environ,
            "JUPYTER_PATH": os.pathsep.join(filter(None, [str(data), os.environ.get("JUPYTER_PATH"), base])),
            "JUPYTERLAB_SETTINGS_DIR": str(self.settings),
            "JUPYTERLAB_WORKSPACES_DIR": str(self.workspaces),
            "JUPYTER_RUNTIME_DIR": str(self.runtime),
            "IPYTHONDIR": str(home / "ipython"),
        }
        # As for a user: the store beside the notebook, replies streamed at the default rate.
        for name in ("SLOTMAGIC_DB", "SLOTMAGIC_STREAM_THROTTLE"):
            env.pop(name, None)
        self.log = (home / "lab.log").open("w")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyterlab",
                "--allow-root",
                "--no-browser",
                "--IdentityProvider.token=",
                "--ServerApp.ip=127.0.0.1",
                "--ServerApp.port=0",
                "--ServerApp.port_retries=0",
                "--KernelManager.transport=ipc",
                f"--ServerApp.root_dir={root}",
                "--ServerApp.open_browser=False",
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 90
        runtime = self.runtime / f"jpserver-{self.process.pid}.json"
        while not runtime.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"JupyterLab did not start; see {self.log.name}")
            time.sleep(0.1)
        while True:  # written as the server starts listening: its port, then its answer
            try:
                self.port = int(json.loads(runtime.read_text())["port"])
                break
            except (ValueError, KeyError):  # being written
                if time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab wrote no port to {runtime}") from None
                time.sleep(0.1)
        self.url = f"http://127.0.0.1:{self.port}"
        while True:
            try:
                self.api("GET", "status")
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not start; see {self.log.name}") from None
                time.sleep(0.3)

    def api(self, method: str, path: str) -> Any:
        """A call to the server's REST API; its JSON answer (None when it has no body)."""
        # The double-submit XSRF check a change (DELETE) must pass: the same token as cookie and header.
        xsrf = secrets.token_hex(16)
        request = urllib.request.Request(
            f"{self.url}/api/{path}", method=method, headers={"Cookie": f"_xsrf={xsrf}", "X-XSRFToken": xsrf}
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            body = answer.read()
        return json.loads(body) if body else None

    def reset(self) -> None:
        """As the next test must find it: no session or kernel left running (a kernel a test
        started would go on burning CPU), no saved workspace, the settings as the server
        started with."""
        shutil.rmtree(self.workspaces, ignore_errors=True)
        shutil.rmtree(self.settings)
        for relative, content in self.initial_settings.items():
            (self.settings / relative).parent.mkdir(parents=True, exist_ok=True)
            (self.settings / relative).write_bytes(content)
        for session in self.api("GET", "sessions"):
            self.api("DELETE", f"sessions/{session['id']}")
        for kernel in self.api("GET", "kernels"):
            self.api("DELETE", f"kernels/{kernel['id']}")
        left = self.api("GET", "sessions"), self.api("GET", "kernels")
        assert left == ([], []), f"still running after the test: {left}"

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.runtime, ignore_errors=True)


class Lab:
    """What a UI test gets: the worker's JupyterLab server, with ``root`` a folder of the test's
    own under the server's root (its notebooks, their ``.slotmagic/`` store and their kernels'
    working folder are the test's alone)."""

    def __init__(self, server: LabServer, root: Path) -> None:
        self.server = server
        self.url = server.url
        self.root = root
        self.path = root.relative_to(server.root).as_posix()  # the folder as the server names it
        self.settings = server.settings  # JupyterLab's user settings, put back after each test

    def tree_url(self, name: str) -> str:
        """JupyterLab with the test's notebook ``name`` open, in a new workspace (``?reset``):
        nothing of a page loaded before shows."""
        return f"{self.url}/lab/tree/{self.path}/{name}?reset"

    def notebook7_url(self, name: str) -> str:
        """The test's notebook ``name`` in Notebook 7."""
        return f"{self.url}/notebooks/{self.path}/{name}"

    def count_echo_calls(self) -> Path:
        """A file where the echo model of the kernels started from now on in this test's folder
        counts its requests, a line each (COUNTING_ECHO)."""
        calls = self.root / ".echo-calls"
        calls.write_text("")
        return calls


@pytest.fixture(scope="session")
def _lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """One JupyterLab for the UI tests of this worker: starting one takes seconds of CPU. Its
    root is the worker's temporary folder, so each test's ``tmp_path`` is inside it."""
    _need(Path(CHROMIUM).exists(), "Debian's chromium")
    server = LabServer(tmp_path_factory.getbasetemp(), tmp_path_factory.mktemp("lab-home"))
    yield server
    server.close()


@pytest.fixture
def lab(_lab_server: LabServer, tmp_path: Path) -> Iterator[Lab]:
    root = tmp_path / "work"
    root.mkdir()
    yield Lab(_lab_server, root)
    _lab_server.reset()


@pytest.fixture
def built_extension() -> Path:
    """The checkout's built JupyterLab extension; a test of the sidebar fails without it."""
    if not (BUILT_EXTENSION / "static" / "style.js").exists():
        pytest.fail(
            f"the JupyterLab extension is not built in {BUILT_EXTENSION}: "
            "pip install -e . (or jlpm install && jlpm build in labextension/)"
        )
    return BUILT_EXTENSION


@pytest.fixture
def artifacts(request: pytest.FixtureRequest) -> Path:
    """A folder for this test's screenshots, kept after the run to look at."""
    folder = ARTIFACTS / request.node.name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def _browser() -> Iterator[Any]:
    """A headless Chromium for this test. Not one a worker: while playwright's sync API is
    started its event loop counts as running in this thread, and every later test on the
    worker that calls ``asyncio.run`` would fail (the JupyterLab server is what is shared)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _need(False, "playwright")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(lab: Lab, _browser: Any) -> Iterator[Any]:
    """A page in a new browser context (no cookies, storage or cache of a test before)."""
    context = _browser.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    page.set_default_timeout(60_000)
    yield page
    context.close()
