"""``%slot``: every subcommand and flag through a real IPython shell, error lines included."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from slotmagic import Session


def run(ip: Any, line: str, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    ip.run_cell(line)
    return capsys.readouterr().out


def session(ip: Any) -> Session:
    from slotmagic._magics import SlotMagic

    magic = next(c for c in ip.configurables if isinstance(c, SlotMagic))
    return magic.session()


def usage_error(ip: Any, line: str) -> str:
    with pytest.raises(UsageError) as raised:
        ip.run_cell(line)
    message = str(raised.value)
    assert "\n" not in message
    return message


def test_bare_slot_shows_the_current_slot(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    out = run(ip, "%slot", capsys)
    assert out.splitlines()[0] == "current slot: default (full; 0 turns, 0 messages, ~0 tokens)"
    assert "model echo" in out.splitlines()[1]


def test_list_marks_the_current_slot(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%slot create notes --no-switch")
    lines = run(ip, "%slot list", capsys).splitlines()
    assert lines[0].split() == ["slot", "mode", "parent", "turns", "messages", "tokens"]
    assert lines[1].split()[:3] == ["*", "default", "full"] and lines[2].split()[:2] == ["notes", "full"]


def test_create_with_every_option(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    out = run(
        ip,
        '%slot create brief --recent 4 --no-keep-system --summary "We agreed on \'A\'." --system "Be brief."',
        capsys,
    )
    assert out.strip() == (
        "slot 'brief' created (focused: last 4 messages, system prompt dropped, with a summary); switched to it"
    )
    slot = session(ip).slot("brief")
    assert slot.config.focused.summary_override == "We agreed on 'A'."
    assert (slot.config.focused.recent_messages, slot.config.focused.keep_system) == (4, False)
    assert slot.config.system == "Be brief." and session(ip).current_slot == "brief"
    ip.run_cell("%slot create ro --mode readonly --no-switch")
    assert session(ip).slot("ro").mode.value == "readonly" and session(ip).current_slot == "brief"


def test_create_again_is_idempotent_and_a_clash_names_the_difference(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ip.run_cell("%slot create a --mode focused --recent 4")
    ip.run_cell("%slot switch default")
    out = run(ip, "%slot create a --mode focused --recent 4", capsys)
    assert out.strip() == "slot 'a' created (focused: last 4 messages, system prompt kept); switched to it"
    assert session(ip).current_slot == "a"
    assert usage_error(ip, "%slot create a --recent 6") == (
        "slot 'a' already exists but it keeps the last 4 messages, not 6; delete it first or pick another id"
    )


def test_focus_options_need_focused_mode(ip: Any) -> None:
    assert "use --mode focused instead of --mode full" in usage_error(ip, "%slot create a --mode full --recent 3")


def test_switch_and_unknown_slot_suggestion(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%slot create draft --no-switch")
    assert run(ip, "%slot switch draft", capsys).startswith("switched to slot draft (full;")
    assert usage_error(ip, "%slot switch drfat") == "no slot 'drfat' in this session; did you mean 'draft'?"


def test_derive_switches_and_is_idempotent(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%%turn\nentry question")
    out = run(ip, "%slot derive claims", capsys)
    assert out.strip() == "slot 'claims' derived from 'default' (full, sharing 2 messages); switched to it"
    # Run the same cell again: now the current slot is 'claims' itself, and that is fine.
    ip.run_cell("%%turn\nMore")  # the slot grows; the cell's line stays what it was
    again = "slot 'claims' derived from 'default' (full, sharing 2 messages); switched to it"
    assert run(ip, "%slot derive claims", capsys).strip() == again
    out = run(ip, "%slot derive neg --from default --focused --recent 4 --no-switch", capsys)
    assert "focused: last 4 messages" in out and out.strip().endswith("current slot stays 'claims'")
    assert session(ip).slot("neg").config.focused.recent_messages == 4
    assert "derived (full) from 'default', not derived (focused)" in usage_error(ip, "%slot derive claims --focused")


def test_derive_recent_implies_focused(ip: Any) -> None:
    ip.run_cell("%slot derive f --recent 2 --no-keep-system")
    focus = session(ip).slot("f").config.focused
    assert session(ip).slot("f").mode.value == "focused" and (focus.recent_messages, focus.keep_system) == (2, False)


def test_delete_needs_force_for_unshared_turns(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%slot derive b")
    ip.run_cell("%%turn\nonly on b")
    assert "holds 1 turn that no other slot shares; delete it with --force" in usage_error(ip, "%slot delete b")
    out = run(ip, "%slot delete b --force", capsys)
    assert out.strip() == "deleted slot 'b'; current slot is now 'default'"
    assert run(ip, "%slot delete b --force", capsys).strip() == "no slot 'b'; nothing to delete"
    assert usage_error(ip, "%slot delete b") == "no slot 'b' in this session; existing slots: default"
    assert "cannot be deleted" in usage_error(ip, "%slot delete default")


def test_show_and_last(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%%turn\nfirst")
    ip.run_cell("%%turn\nsecond")
    out = run(ip, "%slot show", capsys)
    first = session(ip).messages()[0]
    assert f"[1] user ({first.tokens} tokens)\n    first\n" in out and "[3] user" in out
    out = run(ip, "%slot show default --last 1", capsys)
    assert "[4] assistant" in out and "[3]" not in out


def test_preview_shows_the_filtered_view_with_tokens(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%%turn\nfirst")
    ip.run_cell("%%turn\nsecond")
    ip.run_cell("%slot derive f --recent 1 --no-switch")
    out = run(ip, "%slot preview f", capsys)
    [entry] = session(ip).preview("f").entries
    assert out.splitlines()[0] == (
        f"slot f (focused: last 1 message, system prompt kept) would send 1 message, "
        f"~{entry.tokens} tokens, then the new user message:"
    )
    assert f"[1] assistant ({entry.tokens} tokens)" in out
    assert "… 3 stored messages left out by the focused filter (stored messages 1-3)" in out


def test_session_show_and_attach(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    out = run(ip, "%slot session", capsys)
    assert out.startswith(f"session {session(ip).session_id} in ") and "1 slot" in out
    ip.run_cell("%slot create only-here")
    first = session(ip).session_id
    assert run(ip, "%slot session other", capsys).startswith("started session other")
    assert session(ip).session_id == "other" and not session(ip).has_slot("only-here")
    assert run(ip, f"%slot session {first}", capsys).startswith(f"attached to session {first}")
    assert session(ip).has_slot("only-here")


def test_a_session_name_that_cannot_be_stored_is_one_line_and_not_kept(
    ip: Any, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A lone surrogate as a session name printed a raw UnicodeEncodeError and stayed the
    setting: every later %slot and %%turn was refused, %slot session valid-name too."""
    first = session(ip).session_id
    assert usage_error(ip, "%slot session \ud800").startswith(
        "%slot session: the session name holds a lone surrogate ('\\ud800' at character 0)"
    )
    assert session(ip).session_id == first
    for name, value in (("session_id", "x\\ud800"), ("system", "\\udfff"), ("db_path", "state\\ud800.db")):
        ip.run_cell(f"%config SlotMagic.{name} = '{value}'")
        assert caplog.records[-1].getMessage().startswith(f"SlotMagic.{name} = ")
        assert "holds a lone surrogate" in caplog.records[-1].getMessage()
    assert run(ip, "%slot", capsys).startswith("current slot: default")
    ip.run_cell("%%turn\nstill fine")
    assert run(ip, "%slot session valid-name", capsys).startswith("started session valid-name")
    assert session(ip).session_id == "valid-name"


def test_rename(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%slot create a")
    assert run(ip, "%slot rename a b", capsys).strip() == "renamed slot 'a' to 'b'"
    assert session(ip).current_slot == "b"


def test_diff(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%%turn\nentry")
    ip.run_cell("%slot derive a")
    ip.run_cell("%%turn\non a")
    out = run(ip, "%slot diff default a", capsys)
    assert out.splitlines()[:3] == [
        "'default' and 'a' share 1 turn (2 messages), then part.",
        "only in 'default': nothing",
        "only in 'a': 1 turn",
    ]


def test_export(ip: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    ip.run_cell("%%turn\nentry")
    target = tmp_path / "my notes.json"
    out = run(ip, f'%slot export default --to "{target}"', capsys)
    assert out.strip() == f"exported slot 'default' (2 messages) to {target}"
    assert json.loads(target.read_text())["messages"][0]["content"] == "entry"
    assert "ending in .md or .json" in usage_error(ip, f"%slot export --to {tmp_path / 'x.txt'}")
    assert "the following arguments are required: --to" in usage_error(ip, "%slot export")


@pytest.mark.parametrize(
    "sub",
    [
        "",
        "list",
        "tree",
        "create",
        "switch",
        "derive",
        "delete",
        "show",
        "preview",
        "budget",
        "session",
        "rename",
        "diff",
        "export",
    ],
)
def test_every_subcommand_has_help(ip: Any, capsys: pytest.CaptureFixture[str], sub: str) -> None:
    out = run(ip, f"%slot {sub} --help", capsys)
    if sub:
        assert out.startswith(f"usage: %slot {sub}")
    else:
        assert out.startswith("usage: %slot [SUBCOMMAND]") and "  derive   Branch a slot" in out


def test_magic_docstrings_come_from_the_parsers(ip: Any) -> None:
    from IPython.core.oinspect import getdoc

    from slotmagic._magics.slot_commands import overview

    # What %slot? and %%turn? show (IPython asks getdoc() first; built on the first ask).
    assert getdoc(ip.find_line_magic("slot")) == inspect.cleandoc(overview())
    assert "--max-tokens N" in str(getdoc(ip.find_cell_magic("turn")))
    assert "%ctx --help" in str(ip.find_line_magic("ctx").__doc__)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("%slot lst", "%slot: unknown subcommand 'lst'; did you mean 'list'? (%slot --help lists the subcommands)"),
        ("%slot --frobnicate", "%slot: unknown option '--frobnicate' (%slot --help lists the subcommands)"),
        ("%slot create a --colour red", "%slot create: unrecognized arguments: --colour red (see %slot create --help)"),
        (
            "%slot create a --recent many",
            "%slot create: argument --recent: expected a whole number, got 'many' (see %slot create --help)",
        ),
        ("%slot create 'bad id'", "invalid slot id 'bad id': use 1-64 letters, digits, '-', '_' or '.'"),
        (
            "%slot create a --mode wide",
            "%slot create: argument --mode: invalid choice: 'wide' (choose from "
            "'full', 'focused', 'readonly') (see %slot create --help)",
        ),
        ("%slot switch", "%slot switch: the following arguments are required: id (see %slot switch --help)"),
        ('%slot create "unclosed', "cannot read the line: no closing quotation; close the quote or escape it"),
    ],
)
def test_user_mistakes_are_one_line_usage_errors(ip: Any, line: str, message: str) -> None:
    assert usage_error(ip, line) == message


def test_internal_errors_keep_their_traceback(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: Session) -> list[Any]:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Session, "list_slots", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        ip.run_cell("%slot list")


def test_every_subcommand_summary_is_a_whole_sentence() -> None:
    from slotmagic._magics.slot_commands import COMMANDS

    for name, command in COMMANDS.items():
        summary = command.make_parser().summary()
        assert summary.endswith("."), f"%slot {name}: summary cut mid-sentence: {summary!r}"
