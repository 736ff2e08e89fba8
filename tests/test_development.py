"""The worked examples of docs/development.md run: a view step, a provider, a ``%slot``
subcommand and a store column, each taken from the page as written. And the paths the sidebar's
TypeScript names on the Python side exist."""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import POSTGRES, ROOT
from slotmagic import ContextBudget, Message, Session, SlotConfig, current_session
from slotmagic._engine.steps import Step
from slotmagic._engine.view import pipeline
from slotmagic._engine.view.inputs import Counting, Source, ViewInputs
from slotmagic._magics import slot_commands
from slotmagic._store import open_store, postgres
from slotmagic._store.base import History
from slotmagic._store.migrations import MIGRATIONS, migrate
from slotmagic._store.opening import backup_before_migrating
from slotmagic._store.postgres_schema import MIGRATIONS as POSTGRES_MIGRATIONS
from slotmagic._store.urls import parse_postgres_url
from slotmagic.providers import FixedWindow, ProviderSpec
from slotmagic.providers._registry import REGISTRY
from slotmagic.tokens import TokenCounter

PAGE = ROOT / "docs" / "development.md"


def examples(heading: str) -> list[str]:
    """The Python code blocks of the page's section ``heading``, in order, as written."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    found = re.findall(r"^( *)```python\n(.*?)^\1```", section, re.M | re.S)
    assert found, f"no example under {heading!r}"
    return [textwrap.dedent(code) for _, code in found]


def as_module(name: str, code: str) -> types.ModuleType:
    """``code`` run as the module ``name`` would be (its relative imports resolved)."""
    module = types.ModuleType(name)
    module.__package__ = name.rpartition(".")[0]
    exec(compile(code, f"<{PAGE.name}: {name}>", "exec"), module.__dict__)
    return module


# -- a view step ---------------------------------------------------------------------------------


def test_the_view_step_example_is_the_workflow_step_and_runs(tmp_path: Path) -> None:
    [code] = examples("How to add a view step")
    real = (ROOT / "slotmagic" / "_engine" / "steps" / "workflow.py").read_text(encoding="utf-8")
    assert code.strip() in real  # the page shows the module as it is
    example = as_module("slotmagic._engine.steps.example", code).workflow_block
    assert isinstance(example, Step) and example.reads == frozenset({"workflow"})

    with Session.open("steps", db_path=tmp_path / "s.sqlite3") as session:
        workflow = session.workflows.define("claim", "draft -> file")
    made = ViewInputs(
        "s", SlotConfig(), Source(History.of([Message.user("hi")])), "be brief",
        Counting(TokenCounter.for_model("echo")), ContextBudget(), workflow=workflow,
    )  # fmt: skip
    steps = [example if s.name == "workflow_block" else s for s in pipeline.STEPS]
    assert steps != list(pipeline.STEPS)
    view = pipeline.make_view(made, steps)
    assert [m.content for m in view.messages] == [m.content for m in pipeline.make_view(made).messages]
    assert any("draft" in m.content and m.role == "system" for m in view.messages)
    without = pipeline.make_view(dataclasses.replace(made, workflow=None), steps)
    assert not any("draft" in m.content for m in without.messages)


# -- a provider ----------------------------------------------------------------------------------


@pytest.fixture
def reverse(monkeypatch: pytest.MonkeyPatch) -> ProviderSpec:
    """The page's provider, registered for this test only."""
    module_code, spec_code = examples("How to add a provider")
    module = as_module("slotmagic.providers._reverse", module_code)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    spec = eval(spec_code, {"ProviderSpec": ProviderSpec, "FixedWindow": FixedWindow})
    monkeypatch.setattr(REGISTRY, "_specs", dict(REGISTRY._specs))
    return REGISTRY.register(spec)


def test_the_provider_example_answers_a_turn_and_a_cell(reverse: ProviderSpec, tmp_path: Path, ip: Any) -> None:
    with Session.open("rev", db_path=tmp_path / "s.sqlite3", model="reverse") as session:
        reply = session.submit_turn("stressed")
        assert reply.text == "desserts" and reply.model == "reverse"
        assert session.budget().window == 8_192
        assert [m.content for m in session.messages()] == ["stressed", "desserts"]
    ip.run_cell('%config SlotMagic.model = "reverse"\n%config SlotMagic.widgets = False')
    ip.run_cell("%%turn\nlevel up")
    assert current_session().messages()[-1].content == "pu level"


# -- a %slot subcommand --------------------------------------------------------------------------


def test_the_subcommand_example_runs_in_the_magic(
    ip: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from IPython.core.error import UsageError

    handlers, command_line = examples("How to add a `%slot` subcommand")
    namespace = {**vars(slot_commands), "Counter": collections.Counter}  # the import the page names
    exec(compile(handlers, f"<{PAGE.name}: %slot roles>", "exec"), namespace)
    command = eval(command_line, namespace)
    monkeypatch.setitem(slot_commands.COMMANDS, command.name, command)

    ip.run_cell('%config SlotMagic.model = "echo"\n%config SlotMagic.widgets = False')
    capsys.readouterr()
    ip.run_cell("%slot roles")
    assert capsys.readouterr().out.strip() == "no messages"
    ip.run_cell("%%turn\nhello")
    ip.run_cell("%slot derive draft")
    capsys.readouterr()
    ip.run_cell("%slot roles draft")
    assert capsys.readouterr().out.strip() == "assistant 1, user 1"
    ip.run_cell("%slot --help")
    assert "roles" in capsys.readouterr().out and "Count a slot's messages by role." in slot_commands.overview()
    with pytest.raises(UsageError) as refused:
        ip.run_cell("%slot roles nowhere")
    assert "nowhere" in str(refused.value) and "\n" not in str(refused.value)
    assert isinstance(command.parser.parse_args(["draft"]), argparse.Namespace)


# -- a store column ------------------------------------------------------------------------------


def column_migrations() -> tuple[Any, tuple[str, ...]]:
    sqlite_code, postgres_code, _ = examples("How to add a store column")
    namespace: dict[str, Any] = {"sqlite3": sqlite3}
    exec(compile(sqlite_code, f"<{PAGE.name}: migration>", "exec"), namespace)
    [step] = [v for k, v in namespace.items() if k.startswith("_v")]
    return step, eval(postgres_code)


def test_the_column_example_migrates_a_sqlite_file(tmp_path: Path) -> None:
    step, _ = column_migrations()
    path = tmp_path / "state.sqlite3"
    with Session.open("col", db_path=path) as session:
        session.submit_turn("kept")
    db = sqlite3.connect(path, isolation_level=None)
    try:
        assert migrate(db, (*MIGRATIONS, step), backup=backup_before_migrating) == len(MIGRATIONS) + 1
        db.execute("UPDATE slots SET color = 'teal' WHERE name = 'default'")
        assert db.execute("SELECT name, color FROM slots").fetchall() == [("default", "teal")]
    finally:
        db.close()
    assert (tmp_path / f"state.sqlite3.v{len(MIGRATIONS)}.bak").exists()  # backed up first


def test_the_column_example_migrates_a_postgres_schema(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _, statements = column_migrations()
    open_store(postgres_url).close()  # a schema at this version
    monkeypatch.setattr(postgres, "MIGRATIONS", (*POSTGRES_MIGRATIONS, statements))
    with Session.open("col", db_path=postgres_url) as session:  # upgraded as it opens
        session.submit_turn("kept")
    schema = parse_postgres_url(postgres_url).schema
    with psycopg.connect(POSTGRES, autocommit=True) as db:
        assert db.execute(f"SELECT version FROM {schema}.slotmagic_schema").fetchone() == (
            len(POSTGRES_MIGRATIONS) + 1,
        )
        db.execute(f"UPDATE {schema}.slots SET color = 'teal'")
        assert db.execute(f"SELECT name, color FROM {schema}.slots").fetchall() == [("default", "teal")]


# The page's three pieces put where it says, in a copy of the package; then a slot's color is
# written, kept through an undo, read back as a slot row's field by a store opened afresh, and
# copied to a new store.
_COLORS = """
import json, sys
from slotmagic import Session
from slotmagic._copy import copy_sessions
from slotmagic._store import open_store

source, copy = sys.argv[1:3]
with Session.open("col", db_path=source) as session:
    session.submit_turn("kept")
    session.derive_slot("draft")
    with session.store._write() as db:
        db.execute("UPDATE slots SET color = ? WHERE name = ?", ("teal", "draft"))
    session.submit_turn("more", slot="draft")
    session.history.undo("draft")  # the slot's name moves to a new row, which keeps the color
copy_sessions(source, copy)
seen = {}
for target in (source, copy):
    with open_store(target) as store, store._read() as db:
        rows = store._rows(db, "col").rows.values()
        seen[target] = {row.name: row.color for row in rows if row.live}
print(json.dumps(list(seen.values())))
"""


def with_column(tmp_path: Path) -> Path:
    """A copy of the package with the page's three pieces where it puts them: the migrations at
    the end of each store's ``MIGRATIONS``, the field after ``SlotRow.stored_undo``."""
    import shutil

    sqlite_code, postgres_code, field_code = examples("How to add a store column")
    root = tmp_path / "package"
    ignored = shutil.ignore_patterns("__pycache__", "labextension")
    shutil.copytree(ROOT / "slotmagic", root / "slotmagic", ignore=ignored)
    store = root / "slotmagic" / "_store"

    def edit(path: Path, before: str, after: str, code: str) -> None:
        """``code`` put at the first ``after`` that follows ``before`` (before the ``after``)."""
        text = path.read_text(encoding="utf-8")
        at = text.index(after, text.index(before))
        path.write_text(text[:at] + code + text[at:], encoding="utf-8")

    [step] = re.findall(r"^def (\w+)", sqlite_code, re.M)
    edit(store / "migrations.py", "MIGRATIONS: tuple[Migration", "\n)\n", f"\n    {step},")
    edit(store / "migrations.py", "", "MIGRATIONS: tuple[Migration", f"{sqlite_code}\n\n")
    edit(store / "postgres_schema.py", "MIGRATIONS: tuple[tuple", "\n)\n", f"\n    {postgres_code.strip()},")
    edit(store / "rows" / "cache.py", "    stored_undo:", "\n    ", f"\n    {field_code.strip()}")
    return root


def colors_in_a_copy(tmp_path: Path, source: str, copy: str) -> list[dict[str, str | None]]:
    root = with_column(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", _COLORS, source, copy],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found: list[dict[str, str | None]] = json.loads(done.stdout)
    return found


def test_the_column_example_is_one_field_read_and_copied_on_sqlite(tmp_path: Path) -> None:
    seen = colors_in_a_copy(tmp_path, str(tmp_path / "a.sqlite3"), str(tmp_path / "b.sqlite3"))
    assert seen == [{"default": None, "draft": "teal"}] * 2


def test_the_column_example_is_one_field_read_and_copied_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    seen = colors_in_a_copy(tmp_path, postgres_url, str(tmp_path / "b.sqlite3"))
    assert seen == [{"default": None, "draft": "teal"}] * 2


# -- the sidebar's protocol ----------------------------------------------------------------------


def test_the_paths_the_typescript_names_exist() -> None:
    named = {
        path
        for source in (ROOT / "labextension" / "src").glob("*.ts")
        for path in re.findall(r"slotmagic/[\w/]+\.py", source.read_text(encoding="utf-8"))
    }
    assert "slotmagic/_core/sidebar_protocol.py" in named  # the types protocol.ts copies
    assert [p for p in sorted(named) if not (ROOT / p).is_file()] == []
