"""Hostile cell records planted in a store, as a colleague's ``.slotmagic/`` folder or a shared
PostgreSQL ``cells`` table could hold them (tests/test_stored_data.py, tests/ui)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from conftest import POSTGRES

# Each sets a window property if it ever runs in the page.
SCRIPT_HTML = "<img src=x onerror=\"window.__pwned=(window.__pwned||[]).concat('html')\"><b>planted</b>"
SCRIPT_JS = "window.__pwned=(window.__pwned||[]).concat('js')"
SCRIPT_ESM = "export default {render({el}){window.__pwned=(window.__pwned||[]).concat('esm'); el.textContent='esm'}}"
SCRIPT_CSS = ".jp-Notebook{display:none}"

Change = Callable[[dict[str, Any]], Any]  # changes a record's JSON in place, or returns text to store instead
Which = Callable[[dict[str, Any]], bool]  # chooses the records to change


def shows_widget(name: str) -> Which:
    """The records of cells that showed a widget of this class (``SlotTreeWidget``)."""
    return lambda record: any(o["kind"] == "widget" and o["data"].get("class") == name for o in record["outputs"])


def prints(text: str) -> Which:
    """The records of cells whose printed text holds ``text``."""
    return lambda record: any(o["kind"] == "stream" and text in o["text"] for o in record["outputs"])


def html_in_displays(record: dict[str, Any]) -> None:
    """Every displayed output gains script in its HTML, and a JavaScript form."""
    for output in record["outputs"]:
        if output["kind"] == "display":
            data = output["data"]
            data["text/html"] = SCRIPT_HTML + data.get("text/html", "")
            data["application/javascript"] = SCRIPT_JS
            data["text/markdown"] = SCRIPT_HTML
            output["metadata"] = {**output.get("metadata", {}), "isolated": True}


def code_in_widget_state(record: dict[str, Any]) -> None:
    """Every widget's state carries an ES module and a style sheet of its own."""
    for output in record["outputs"]:
        if output["kind"] == "widget":
            output["data"]["state"].update(_esm=SCRIPT_ESM, _css=SCRIPT_CSS, _anywidget_id="x")


def not_json(record: dict[str, Any]) -> str:
    return '{"kind": "reads", "outputs": [{"kind": '


def plant(target: str, session_id: str, changes: list[tuple[Which, Change]]) -> int:
    """Rewrite the records of ``session_id`` that one of ``changes`` chooses (its first);
    returns how many were rewritten."""
    if target.startswith("postgresql://"):
        import psycopg

        from slotmagic._store.urls import parse_postgres_url

        schema = parse_postgres_url(target).schema
        with psycopg.connect(POSTGRES, autocommit=True) as db:
            rows = db.execute(f"SELECT key, record FROM {schema}.cells WHERE session_id = %s", (session_id,)).fetchall()
            planted = _rewrite(rows, changes)
            for key, text in planted:
                db.execute(
                    f"UPDATE {schema}.cells SET record = %s WHERE session_id = %s AND key = %s", (text, session_id, key)
                )
        return len(planted)
    import sqlite3

    with sqlite3.connect(target) as db:
        rows = db.execute("SELECT key, record FROM cells WHERE session_id = ?", (session_id,)).fetchall()
        planted = _rewrite(rows, changes)
        db.executemany(
            "UPDATE cells SET record = ? WHERE session_id = ? AND key = ?", [(t, session_id, k) for k, t in planted]
        )
    return len(planted)


def _rewrite(rows: list[Any], changes: list[tuple[Which, Change]]) -> list[tuple[str, str]]:
    out = []
    for key, text in rows:
        record = json.loads(text)
        change = next((change for which, change in changes if which(record)), None)
        if change is None:
            continue
        made = change(record)
        out.append((key, made if isinstance(made, str) else json.dumps(record)))
    return out
