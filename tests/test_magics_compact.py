"""Compaction from the notebook: review before applying (--preview, --edit, --apply, --summary),
the line an automatic compaction prints before the reply, auto_compact = "ask", and the
working context and workflows that never stop a turn (%ctx off, a damaged workflow)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from test_explore import run, session, usage_error

from slotmagic import Session


def fill(ip: Any, turns: int = 4) -> None:
    for n in range(turns):
        ip.run_cell(f"%%turn\nQuestion {n} about the deposit of {n * 100} euros and the repairs in the kitchen.")


def test_preview_then_apply_applies_exactly_the_previewed_summary(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fill(ip)
    out = run(ip, "%slot compact --keep 2 --preview", capsys)
    assert "nothing changed: %slot compact --apply default applies exactly this summary" in out
    draft = session(ip).compactions.draft()
    assert draft is not None and draft.text in out and session(ip).compactions() == []
    out = run(ip, "%slot compact --apply", capsys)
    assert out.startswith("slot default: compacted 6 messages → 1 summary")
    assert session(ip).compactions()[-1].text == draft.text


def test_a_summary_of_ones_own(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fill(ip)
    out = run(ip, "%slot compact --keep 2 --summary 'Four questions on the deposit; repairs are disputed.'", capsys)
    assert "a summary written by hand" in out
    assert session(ip).compactions()[-1].text == "Four questions on the deposit; repairs are disputed."
    assert "before:" not in out


def test_edit_without_widgets_prints_the_draft_and_how_to_apply_an_edit(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(ip)
    ip.run_cell("%config SlotMagic.widgets = False")
    out = run(ip, "%slot compact --keep 2 --edit", capsys)
    assert '%slot compact --apply default --summary "…"' in out
    draft = session(ip).compactions.draft()
    assert draft is not None and draft.text in out
    run(ip, "%slot compact --apply --summary 'edited by hand'", capsys)
    assert session(ip).compactions()[-1].method == "edited"


def test_the_summary_editor_applies_the_edited_text(ip: Any) -> None:
    from slotmagic.widgets import SummaryEditor

    fill(ip)
    s = session(ip)
    draft = s.compactions.compact(keep=2, preview=True)
    editor = SummaryEditor(s, "default", draft)
    assert editor.text == draft.text and "to replace messages 1-6" in editor.heading
    editor._on_front_message(editor, {"type": "apply", "text": "The user asked four questions."}, [])
    assert s.compactions()[-1].text == "The user asked four questions." and editor.applied
    assert editor.status.startswith("applied: compacted 6 messages") and not editor.failed
    editor.apply()  # applied already: a line in the widget, no exception
    assert "no summary was previewed" in editor.status and editor.failed
    assert draft.text in editor.static_bundle()["text/plain"]


def test_compact_refusals_are_one_line(ip: Any) -> None:
    fill(ip)
    assert "no summary was previewed" in usage_error(ip, "%slot compact --apply")
    assert "not allowed with" in usage_error(ip, "%slot compact --preview --apply")
    assert "--edit opens" in usage_error(ip, "%slot compact --edit --summary x")


def test_an_automatic_compaction_prints_a_line_before_the_reply(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%slot create small --budget 300")
    fill(ip, 5)
    out = run(ip, "%%turn\nAnd one more question about the deposit and the kitchen repairs, please.", capsys)
    assert out.startswith("compacting ") and "to fit echo's window…" in out.splitlines()[0]
    assert session(ip).compactions()


def test_auto_compact_ask_stops_with_the_commands(ip: Any) -> None:
    ip.run_cell("%slot create small --budget 300")
    ip.run_cell('%config SlotMagic.auto_compact = "ask"')
    for n in range(10):  # turns until one would need a compaction
        before = session(ip).messages()
        try:
            ip.run_cell(f"%%turn\nQuestion {n} about the deposit of {n * 100} euros and the kitchen repairs.")
        except UsageError as exc:
            message = str(exc)
            break
    else:
        pytest.fail("no turn needed a compaction")
    assert "%slot compact --preview small" in message and "nothing was sent" in message and "\n" not in message
    assert session(ip).messages() == before and session(ip).compactions() == []
    ip.run_cell("%slot compact --preview")
    ip.run_cell("%slot compact --apply")
    assert len(session(ip).compactions()) == 1 and session(ip).messages() == before  # folded, nothing lost


def test_ctx_off_and_on(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%ctx step collect the facts")
    assert "collect the facts" in run(ip, "%slot preview", capsys)
    assert "sends no working context" in run(ip, "%ctx off", capsys)
    assert "collect the facts" not in run(ip, "%slot preview", capsys)
    assert "it is not sent: %ctx on" in run(ip, "%ctx", capsys)
    run(ip, "%ctx on", capsys)
    assert "collect the facts" in run(ip, "%slot preview", capsys)
    ip.run_cell("%config SlotMagic.working_context_turns = None")
    assert "collect the facts" not in run(ip, "%slot preview", capsys)


def test_a_damaged_workflow_never_stops_a_turn_and_is_deleted(
    ip: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ip.run_cell("%%workflow plan\na -> b")
    s: Session = session(ip)
    with sqlite3.connect(s.store.path) as db:
        db.execute("UPDATE workflows SET record = '[1, 2' WHERE name = 'plan'")
    ip.run_cell("%%turn\nhello")  # no exception: the workflow is left out, with a warning
    assert run(ip, "%workflow delete plan", capsys).startswith("deleted workflow plan")
    assert s.store.damaged_workflows(s.session_id) == []


def test_a_damaged_working_context_never_stops_a_turn(ip: Any, caplog: pytest.LogCaptureFixture) -> None:
    ip.run_cell("%ctx step collect the facts")
    s: Session = session(ip)
    with sqlite3.connect(s.store.path) as db:
        db.execute("UPDATE context_events SET event = '{oops'")
    with caplog.at_level("WARNING", logger="slotmagic"):
        ip.run_cell("%%turn\nhello")
        ip.run_cell("%%turn\nhello again")
    warnings = [r.getMessage() for r in caplog.records if "working context" in r.getMessage()]
    assert len(warnings) == 1 and "%ctx off --slot default" in warnings[0]
    assert len(s.messages()) == 4


def test_the_summary_editor_acts_on_the_kernels_session_or_says_it_cannot(ip: Any) -> None:
    from ipywidgets.widgets.widget import _instances

    from slotmagic.widgets import SummaryEditor

    fill(ip)
    before = set(_instances)
    ip.run_cell("%slot compact --edit --keep 2")
    (editor,) = [w for k, w in _instances.items() if k not in before and isinstance(w, SummaryEditor)]
    first = session(ip).session_id
    ip.run_cell("%slot session elsewhere")  # the kernel moves to another session
    editor._on_front_message(editor, {"type": "apply", "text": "My summary."}, [])
    assert editor.failed and editor.status.startswith("Not done: this summary is for slot default of session")
    ip.run_cell(f"%slot session {first}")  # back: the click acts there
    editor._on_front_message(editor, {"type": "apply", "text": "My summary."}, [])
    assert editor.applied and session(ip).compactions()[-1].text == "My summary."
