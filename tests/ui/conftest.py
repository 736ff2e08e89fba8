"""A real JupyterLab server and headless Chromium for UI tests.

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


class Lab:
    """A JupyterLab server serving ``root``, with its own settings and runtime folders, on a
    port the system gives it (read back from the server's runtime file): labs started at once
    by parallel test workers never meet."""

    def __init__(self, root: Path, home: Path) -> None:
        self.root = root
        settings = home / "settings"
        news = settings / "@jupyterlab" / "apputils-extension"
        news.mkdir(parents=True)
        # The news toast would cover the page.
        (news / "notification.jupyterlab-settings").write_text(
            json.dumps({"fetchNews": "false", "checkForUpdates": False})
        )
        # Every cell rendered, scrolled into view or not: with JupyterLab's default windowing
        # (content-visibility) a cell off screen is not rendered and its text reads empty, so a
        # check of what a widget says would pass or fail by where the page happened to scroll.
        tracker = settings / "@jupyterlab" / "notebook-extension"
        tracker.mkdir(parents=True)
        (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
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
            "JUPYTERLAB_SETTINGS_DIR": str(settings),
            "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
            "JUPYTER_RUNTIME_DIR": str(self.runtime),
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
                with urllib.request.urlopen(f"{self.url}/api/status", timeout=2):
                    break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not start; see {self.log.name}") from None
                time.sleep(0.3)

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.runtime, ignore_errors=True)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    _need(Path(CHROMIUM).exists(), "Debian's chromium")
    root = tmp_path / "work"
    root.mkdir()
    server = Lab(root, tmp_path / "lab-home")
    yield server
    server.close()


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
def page(lab: Lab) -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _need(False, "playwright")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        page.set_default_timeout(60_000)
        yield page
        browser.close()
