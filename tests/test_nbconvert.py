"""The tutorials read right where no widget manager runs: ``jupyter nbconvert --to html
--execute`` (which saves the widgets' state, so its HTML would pick the widget views and,
offline, show nothing) shows every widget's static form, logs no unhandled comm, and names the
session after the notebook, as the tutorials say.
"""

from __future__ import annotations

import html
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from tools.tutorials import committed_text, copy_committed, tutorials

NOTEBOOKS = ROOT / "notebooks"

# What each widget's static form starts with, in the order the tutorial shows them.
# Sessions a tutorial's own Python code opens by name (Session.open), beside the notebook's.
OPENED_BY_CODE = {"08-mcp-servers-and-schemas": {"tutorial-08-python"}}
STATIC_FORMS = {
    "01-getting-started": ["slot focused (focused: last 2 messages"],
    "02-branching": [
        "session 02-branching.ipynb · 3 slots · current slot court",
        "slot court · echo",
        "letter echo · done",
        "default.echo (from default) echo · done",
        "letter echo · last reply",
    ],
    "03-budgets-and-compaction": [
        "slot lease-review · echo",
        "slot lease-review · echo",
        "slot lease-review (full) would send",
        "summary previewed for slot lease-review",
        "slot follow-up (full) would send",
    ],
    "04-tools-and-namespace": ["slot default (full) would send"],
    "05-working-context-and-workflow": [
        "slot default (full) would send 3 messages",
        "slot default (full) would send 11 messages",
        "workflow claim · 3 of 5 done",
    ],
    "06-exploring-branches": [],
    "07-the-notebook-as-context": [],
    "08-mcp-servers-and-schemas": [],
}

# What a cell that names cells by execution count shows (nbval, which keeps no history, leaves
# it out: see conftest.py), as text of the executed page.
BY_EXECUTION_COUNT = {
    "07-the-notebook-as-context": [
        "last user message: The landlord deducts 200 EUR, computed by deductions = "
        '{"paint": 120, "cleaning": 80} sum(deductions.values()) . Then I tried this: KeyError: \'carpet\'',
        "Cell In[7]:",
        "Variables it names: deductions: dict, length 2: {'paint': 120, 'cleaning': 80}",
    ],
}

WIDGET_VIEW = '<script type="application/vnd.jupyter.widget-view+json">'
STATIC = re.compile(r'<div class="slotmagic-static [^"]*">')


def test_every_tutorial_is_listed() -> None:
    assert sorted(STATIC_FORMS) == sorted(p.stem for p in tutorials())


def test_tutorials_carry_the_kernelspec_jupyterlab_writes() -> None:
    """Else JupyterLab marks each tutorial changed as soon as it is opened."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    for path in tutorials():
        kernelspec = json.loads(committed_text(path))["metadata"]["kernelspec"]
        assert kernelspec == {"display_name": spec.display_name, "language": spec.language, "name": "python3"}, path


def text_of(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(STATIC_FORMS))
def test_nbconvert_execute_shows_each_widget_as_its_static_form(name: str, tmp_path: Path) -> None:
    copy_committed(NOTEBOOKS / f"{name}.ipynb", tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("SLOTMAGIC_DB", "JPY_SESSION_NAME")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--execute", f"{name}.ipynb"]
    done = subprocess.run(
        # the kernel on Unix sockets in tmp_path, not on TCP ports another process may take
        # between their choice and the kernel's bind (see conftest.kernels_over_unix_sockets)
        [*command, "--KernelManager.transport=ipc"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "No handler found for comm target" not in done.stderr
    page = (tmp_path / f"{name}.html").read_text(encoding="utf-8")

    # Each widget view is followed by its static form, before any other widget view.
    views = [m.start() for m in re.finditer(re.escape(WIDGET_VIEW), page)]
    statics = list(STATIC.finditer(page))
    assert len(views) == len(statics) == len(STATIC_FORMS[name])
    for view, static, following in zip(views, statics, [*views[1:], len(page)], strict=False):
        assert view < static.start() < following
    # ... and shows the widget's text, as of its cell.
    for static, expected in zip(statics, STATIC_FORMS[name], strict=True):
        shown = text_of(page[static.end() : static.end() + 4000])
        assert shown.startswith(expected), (expected, shown[:200])

    text = text_of(page)
    for expected in BY_EXECUTION_COUNT.get(name, []):
        assert expected in text, expected

    # The session is named after the notebook, in the store beside it.
    with sqlite3.connect(tmp_path / ".slotmagic" / "state.sqlite3") as db:
        ids = [row[0] for row in db.execute("SELECT id FROM sessions")]
    opened = OPENED_BY_CODE.get(name, set())
    assert ids[0] == f"{name}.ipynb" and all(i.startswith(f"{name}.ipynb") or i in opened for i in ids)  # and fan-outs
