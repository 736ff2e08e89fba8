"""A comment on a magic line: ``%slot derive draft  # try another tone`` runs as ``%slot derive
draft``, on every magic of slotmagic's (``%slot``, ``%%turn``'s line, ``%ctx``, ``%workflow``),
and the comment is stored nowhere. A ``#`` standing alone begins it; ``#4`` and ``issue#4`` are
text, and so is ``"#"`` in double quotes (docs/guide/notebook.md, "Comments")."""

from __future__ import annotations

from typing import Any

import pytest

from slotmagic import Session
from slotmagic._magics.parsing import strip_comment


def session(ip: Any) -> Session:
    from slotmagic._magics import SlotMagic

    magic = next(c for c in ip.configurables if isinstance(c, SlotMagic))
    return magic.session()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("derive draft  # try another tone", "derive draft"),
        ("derive draft # a", "derive draft"),
        ("derive draft #", "derive draft"),
        ("# all of it", ""),
        ("derive draft\t#\tx", "derive draft"),
        ("search issue#4 #4", "search issue#4 #4"),
        ('search "a # b" # c', 'search "a # b"'),
        ("search 'a # b' # c", "search 'a # b'"),
        ("search a \\# b # c", "search a \\# b"),
        ('search "it\'s" # c', 'search "it\'s"'),
        ("search 'open # quote", "search 'open # quote"),
    ],
)
def test_strip_comment(line: str, expected: str) -> None:
    assert strip_comment(line) == expected


def test_in_natural_text_only_double_quotes_group() -> None:
    assert strip_comment("goal add the landlord's key # g1", quotes='"', escape=False) == "goal add the landlord's key"
    assert (
        strip_comment('goal add use "#" for headings # g1', quotes='"', escape=False) == 'goal add use "#" for headings'
    )


def test_a_slot_line_with_a_comment_runs_without_it(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%%turn\nI need help with a rental deposit dispute.")
    ip.run_cell("%slot derive small-claims           # branch the current slot and switch to it")
    assert session(ip).current_slot == "small-claims"
    ip.run_cell("%slot list  # which slots are there?")  # a trailing '?' in a comment is not IPython's help
    assert "small-claims" in capsys.readouterr().out


def test_a_ctx_comment_is_not_stored(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%ctx goal add Get the $1,200 deposit back  # g1; the model is sent it")
    ip.run_cell('%ctx goal add Close issue #42 and use "#" for headings   # g2')
    ip.run_cell("%ctx ask Is the lease signed?  # asked of the landlord?")
    context = session(ip).context()
    assert [g.text for g in context.goals] == ["Get the $1,200 deposit back", "Close issue #42 and use # for headings"]
    assert [q.text for q in context.questions] == ["Is the lease signed?"]
    sent = "\n".join(m.content for m in session(ip).preview().messages)
    assert "Get the $1,200 deposit back" in sent and "g1;" not in sent


def test_a_turn_line_comment_is_no_edit(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%%turn --id t1  # the first question\nHow do I file in small claims court?")
    ip.run_cell("%%turn --id t1  # reworded comment\nHow do I file in small claims court?")
    s = session(ip)
    assert [m.content for m in s.messages() if m.role == "user"] == ["How do I file in small claims court?"]
    assert "replayed from the store" in capsys.readouterr().out
    assert [slot.id for slot in s.list_slots()] == ["default"]  # no fork


def test_the_help_says_so(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("slot", "--help")
    ip.run_line_magic("ctx", "--help")
    out = capsys.readouterr().out
    assert out.count("a '#' standing alone starts") + out.count("A '#' standing alone starts") == 2


def test_a_workflow_line_comment(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%%workflow claim   # the dispute's steps\nintake -> letter  # a body comment, as before\n")
    ip.run_cell("%workflow status intake done  # the facts are in")
    (workflow,) = session(ip).workflows()
    assert workflow.name == "claim" and workflow.node("intake").status == "done"
