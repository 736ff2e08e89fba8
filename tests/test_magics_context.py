"""``%ctx``, ``%workflow`` and ``%%workflow`` through a real IPython shell: every subcommand,
every refusal as one line, help, completion, the setting, and what the sidebar is sent."""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.completer import provisionalcompleter
from IPython.core.error import UsageError

from slotmagic import Session
from slotmagic._magics.completion import complete
from slotmagic._snapshot import session_snapshot

CLAIM = """%%workflow claim
intake -> evidence
evidence -> letter [if the facts are clear]
evidence -> gather-more [if something is missing]
gather-more -> letter
letter -> file [if no answer in 14 days]
"""


def run(ip: Any, cell: str, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    ip.run_cell(cell)
    return capsys.readouterr().out


def session(ip: Any) -> Session:
    from slotmagic._magics import SlotMagic

    magic = next(c for c in ip.configurables if isinstance(c, SlotMagic))
    return magic.session()


def usage_error(ip: Any, cell: str) -> str:
    with pytest.raises(UsageError) as raised:
        ip.run_cell(cell)
    message = str(raised.value)
    assert "\n" not in message
    return message


# -- %ctx -----------------------------------------------------------------------------------------


def test_every_ctx_subcommand(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(ip, "%ctx goal add Get the landlord's deposit back #1", capsys) == (
        "goal g1 (active): Get the landlord's deposit back #1\n"
    )
    assert run(ip, "%ctx goal add Keep it civil", capsys) == "goal g2 (active): Keep it civil\n"
    assert run(ip, "%ctx goal cancel g2", capsys) == "goal g2 (cancelled): Keep it civil\n"
    assert run(ip, '%ctx decide Court or letter first --as A demand letter --because "it is cheaper"', capsys) == (
        "decision d1: Court or letter first -> A demand letter (because it is cheaper)\n"
    )
    assert run(ip, "%ctx ask Is the move-in report signed?", capsys) == (
        "question q1 (open): Is the move-in report signed?\n"
    )
    assert run(ip, "%ctx resolve q1 --answer Yes, by both of us", capsys) == (
        "question q1 (resolved): Is the move-in report signed? -> Yes, by both of us\n"
    )
    assert run(ip, "%ctx step gather evidence --note photos and receipts", capsys) == (
        "current step: gather evidence (in progress); note: photos and receipts\n"
    )
    assert run(ip, "%ctx step --status blocked", capsys) == (
        "current step: gather evidence (blocked); note: photos and receipts\n"
    )
    ip.run_cell("%%turn\nhello")
    assert run(ip, "%ctx goal done g1", capsys) == "goal g1 (completed): Get the landlord's deposit back #1\n"
    shown = run(ip, "%ctx", capsys)
    assert shown.splitlines()[0] == "working context of slot default (next turn: 2; changes are sent for 3 turns)"
    assert "  g1  [completed] Get the landlord's deposit back #1 (turn 2)" in shown
    assert run(ip, "%ctx show", capsys) == shown
    history = run(ip, "%ctx history", capsys).splitlines()
    assert history[0] == "working context of slot default, 9 changes:"
    assert history[1] == "  turn 1  goal g1 added: Get the landlord's deposit back #1"
    assert history[-1] == "  turn 2  goal g1 completed"
    assert run(ip, "%ctx clear", capsys) == "working context of slot default is empty\n"
    assert session(ip).context().empty and len(session(ip).context.history()) == 10


def test_running_a_ctx_cell_again_prints_the_same_and_changes_nothing(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    for line in [
        "%ctx goal add Get the deposit back",
        "%ctx decide Court or letter --as Letter",
        "%ctx ask Is it signed?",
        "%ctx step draft",
        "%ctx goal done g1",
    ]:
        first = run(ip, line, capsys)
        assert run(ip, line, capsys) == first
    assert len(session(ip).context.history()) == 5


def test_ctx_on_another_slot(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%slot create side --no-switch")
    assert run(ip, "%ctx goal add Only here --slot side", capsys) == "goal g1 (active): Only here · slot side\n"
    assert session(ip).context().empty and session(ip).context("side").goals
    assert "slot side" in run(ip, "%ctx show --slot side", capsys)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("%ctx goals add x", "%ctx: unknown subcommand 'goals'; did you mean 'goal'? (%ctx --help lists"),
        ("%ctx --bogus", "%ctx: unknown option '--bogus'"),
        ("%ctx goal finish g1", "%ctx goal: argument action: invalid choice: 'finish'"),
        ("%ctx goal add", "%ctx goal: the following arguments are required: text (see %ctx goal --help)"),
        ("%ctx goal done g9", "no goal 'g9' in the working context; there are no goals yet (%ctx show lists them)"),
        ("%ctx goal done g1 g2", "%ctx goal done: name one goal by its id, such as g1"),
        ("%ctx decide Court or letter", "%ctx decide: the following arguments are required: --as"),
        ("%ctx resolve q3 --answer yes", "no question 'q3' in the working context"),
        ("%ctx resolve q3", "%ctx resolve: the following arguments are required: --answer"),
        ("%ctx step", "%ctx step: name the step, or change the current one with --status or --note"),
        ("%ctx step --status done", "there is no current step yet: name one (%ctx step NAME)"),
        ("%ctx step draft --status finished", "%ctx step: argument --status: invalid choice: 'finished'"),
        ('%ctx goal add "unclosed', 'cannot read the line: a double quote (") is not closed; close it'),
        ("%ctx goal add x --slot nowhere", "no slot 'nowhere' in this session"),
        ('%ctx show --slot "bad id"', "invalid slot id 'bad id'"),
        ("%ctx ask " + "x" * 1001, "the question has 1,001 characters; keep it under 1,000"),
    ],
)
def test_ctx_mistakes_are_one_line(ip: Any, line: str, message: str) -> None:
    assert message in usage_error(ip, line)


def test_ctx_help(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    overview = run(ip, "%ctx --help", capsys)
    for name in ("goal", "decide", "ask", "resolve", "step", "show", "clear", "history"):
        assert f"\n  {name} " in overview
        assert run(ip, f"%ctx {name} --help", capsys).startswith(f"usage: %ctx {name}")
    assert session(ip).context().empty


def test_dollars_and_braces_are_text(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.user_ns["draft"] = "EXPANDED"
    assert run(ip, "%ctx goal add Get the $1,200 back for {draft} and $draft", capsys) == (
        "goal g1 (active): Get the $1,200 back for {draft} and $draft\n"
    )


def test_a_question_mark_at_the_end_is_a_question_not_help(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(ip, "%ctx ask Who keeps the keys?", capsys) == "question q1 (open): Who keeps the keys?\n"
    assert run(ip, "  %ctx ask Indented too?", capsys) == "question q2 (open): Indented too?\n"
    assert "usage: %ctx" in run(ip, "%ctx?", capsys)  # help about the magic itself still works
    assert "Docstring" not in run(ip, "%%turn\n%ctx ask in a turn?", capsys)  # a cell magic's body is its own


def test_the_setting_applies_to_the_next_request(
    ip: Any, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    ip.run_cell("%ctx goal add Get the deposit back")
    ip.run_cell("%config SlotMagic.working_context_turns = 1")
    ip.run_cell("%%turn\none")
    assert "working context" not in run(ip, "%slot preview", capsys)
    ip.run_cell("%config SlotMagic.working_context_turns = 5")
    assert "· working context)" in run(ip, "%slot preview", capsys)
    ip.run_cell("%config SlotMagic.working_context_turns = -1")
    assert caplog.records[-1].getMessage() == (
        "SlotMagic.working_context_turns = -1 refused: working_context_turns must be a whole number >= 0 "
        "or None, not -1; it stays 5"
    )
    assert session(ip).context.turns == 5


# -- %%workflow and %workflow ----------------------------------------------------------------------


def test_define_advance_and_show_a_workflow(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    out = run(ip, CLAIM, capsys)
    assert out == (
        "workflow 'claim' defined: 5 steps, 5 edges; it is the active workflow\n"
        "workflow claim: 0 of 5 done · current step intake (pending) · next: evidence\n"
    )
    assert run(ip, CLAIM, capsys) == out  # run again: the same, nothing changed
    assert run(ip, "%workflow status intake done", capsys) == (
        "workflow claim: 1 of 5 done · current step intake (done) · next: evidence\n"
    )
    assert run(ip, "%workflow current evidence", capsys) == (
        "workflow claim: 1 of 5 done · current step evidence (pending) · next: letter, gather-more\n"
    )
    assert run(ip, "%workflow attach evidence", capsys) == "workflow claim: step evidence is explored in slot default\n"
    assert run(ip, "%workflow attach evidence --detach", capsys) == "workflow claim: step evidence has no slot\n"
    ip.run_cell("%config SlotMagic.widgets = False")  # the text form (the widget: tests/test_widgets.py)
    shown = run(ip, "%workflow show", capsys)
    assert shown.startswith("workflow claim (active) · 1 of 5 done · current: evidence\n")
    assert "\nsent to the model:\n  Workflow claim: 1 of 5 steps done.\n" in shown
    assert run(ip, "%workflow", capsys) == shown
    preview = run(ip, "%slot preview", capsys)
    assert "tokens · workflow)\n    Workflow claim: 1 of 5 steps done." in preview


def test_an_edited_body_keeps_statuses(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell(CLAIM)
    ip.run_cell("%workflow status evidence done")
    out = run(ip, CLAIM.replace("letter -> file", "letter -> court"), capsys)
    assert out.splitlines()[0] == (
        "workflow 'claim' updated: 5 steps, 5 edges, 4 kept their status; it is the active workflow"
    )
    assert session(ip).workflows.get().node("evidence").status == "done"


def test_list_use_and_delete(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(ip, "%workflow list", capsys) == "no workflows yet: define one with %%workflow NAME (an edge per line)\n"
    ip.run_cell(CLAIM)
    ip.run_cell("%%workflow appeal\nnotice -> hearing\n")
    assert run(ip, "%workflow list", capsys) == (
        "  claim   0 of 5 done, current intake\n* appeal  0 of 2 done, current notice\n"
    )
    assert run(ip, "%workflow use claim", capsys) == "workflow claim is the active workflow\n"
    assert run(ip, "%workflow use --none", capsys) == "no workflow is active\n"
    assert "workflow" not in run(ip, "%slot preview", capsys)
    assert run(ip, "%workflow delete appeal", capsys) == "deleted workflow appeal\n"
    ip.run_cell("%workflow use claim")
    assert run(ip, "%workflow delete", capsys) == "deleted workflow claim; no workflow is active now\n"


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("%%workflow w\na -> b\nb -> c\nc -> a\n", "workflow 'w', line 3 \"c -> a\": closes a cycle c -> a -> b -> c"),
        ("%%workflow w\na -> a\n", "workflow 'w', line 1 \"a -> a\": 'a' leads to itself"),
        ("%%workflow w\na -> b\na -> b [x]\n", 'line 2 "a -> b [x]": repeats the edge a -> b of line 1'),
        ("%%workflow w\ndraft -> file\nDraft -> review\n", "step 'Draft' is named 'draft' on line 1"),
        ("%%workflow w\nintake -> research\nthen we draft\n", 'line 2 "then we draft": step name'),
        ("%%workflow w\na -> b -> c\n", 'line 1 "a -> b -> c": one edge per line'),
        ("%%workflow w\n# only a comment\n", "workflow 'w' has no steps"),
        ("%%workflow w", "%%workflow w: the cell has no edges; write one per line below the magic"),
        ("%%workflow\na -> b\n", "%%workflow: the following arguments are required: name"),
        ("%%workflow 'my claim'\na -> b\n", "invalid workflow name 'my claim'"),
        ("%workflow frob", "%workflow: unknown subcommand 'frob'"),
        ("%workflow status intake done", "no workflow is active in this session; define one with %%workflow NAME"),
    ],
)
def test_workflow_refusals_are_one_line(ip: Any, cell: str, message: str) -> None:
    assert message in usage_error(ip, cell)
    assert session(ip).workflows() == []  # nothing was kept


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("%workflow current leter", "workflow 'claim' has no step 'leter'; did you mean 'letter'?"),
        ("%workflow status nope done", "workflow 'claim' has no step 'nope'; its steps are intake, evidence"),
        ("%workflow status intake finished", "%workflow status: argument status: invalid choice: 'finished'"),
        ("%workflow use claims", "no workflow 'claims' in this session; did you mean 'claim'?"),
        ("%workflow use", "%workflow use: name a workflow, or --none for no active workflow"),
        ("%workflow show nothing", "no workflow 'nothing' in this session; its workflows are claim"),
        ("%workflow attach letter nowhere", "no slot 'nowhere' in this session"),
        ("%workflow attach letter default --detach", "%workflow attach: give a slot or --detach, not both"),
        ("%workflow current letter --workflow other", "no workflow 'other' in this session"),
        ("%workflow delete other", "no workflow 'other' in this session"),
    ],
)
def test_workflow_mistakes_on_a_defined_workflow(ip: Any, line: str, message: str) -> None:
    ip.run_cell(CLAIM)
    assert message in usage_error(ip, line)
    assert session(ip).workflows.get("claim").current == "intake"


def test_workflow_help(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(ip, "%%workflow --help", capsys).startswith("usage: %%workflow [-h] name")
    overview = run(ip, "%workflow --help", capsys)
    for name in ("show", "list", "status", "current", "attach", "use", "delete"):
        assert f"\n  {name} " in overview
        assert run(ip, f"%workflow {name} --help", capsys).startswith(f"usage: %workflow {name}")


def test_unloading_takes_the_magics_and_transformers_back(ip: Any) -> None:
    import slotmagic

    slotmagic.unload_ipython_extension(ip)
    try:
        names = [getattr(t, "__name__", "") for t in ip.input_transformers_cleanup]
        assert "ctx_line_as_call" not in names and "empty_workflow_as_line" not in names
        assert "ctx" not in ip.magics_manager.magics["line"] and "workflow" not in ip.magics_manager.magics["cell"]
    finally:
        slotmagic.load_ipython_extension(ip)


# -- completion and the sidebar ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("%ctx ", ["goal", "decide", "ask", "resolve", "step", "show", "clear", "history", "off", "on", "--help"]),
        ("%ctx go", ["goal"]),
        ("%ctx goal ", ["add", "done", "cancel"]),
        ("%ctx goal add x --slot ", ["default", "draft"]),
        ("%ctx step x --status b", ["blocked"]),
        ("%ctx decide x --", ["--as", "--because", "--help", "--slot"]),
        ("%workflow ", ["show", "list", "status", "current", "attach", "use", "delete", "--help"]),
        ("%workflow status ", ["intake", "evidence", "letter"]),
        ("%workflow status evidence ", ["pending", "in_progress", "done", "blocked"]),
        ("%workflow current --workflow appeal ", ["notice", "hearing"]),
        ("%workflow attach letter ", ["default", "draft"]),
        ("%workflow use ", ["claim", "appeal"]),
        ("%workflow use a", ["appeal"]),
        ("%workflow status --workflow ", ["claim", "appeal"]),
        ("%%workflow c", ["claim"]),
    ],
)
def test_completion_rules(line: str, expected: list[str]) -> None:
    workflows = {"claim": ["intake", "evidence", "letter"], "appeal": ["notice", "hearing"]}
    assert complete(line, ["default", "draft"], (workflows, "claim")) == expected


def test_completion_in_the_shell(ip: Any) -> None:
    ip.run_cell(CLAIM)
    with provisionalcompleter():

        def texts(line: str) -> list[str]:
            return [c.text for c in ip.Completer.completions(line, len(line))]

        assert texts("%ctx hi") == ["history"]
        assert texts("%workflow current gat") == ["gather-more"]


def test_the_sidebar_is_sent_the_active_workflow(ip: Any) -> None:
    assert session_snapshot(session(ip))["workflow"] is None
    ip.run_cell(CLAIM)
    ip.run_cell("%workflow status intake done")
    ip.run_cell("%workflow current evidence")
    assert session_snapshot(session(ip))["workflow"] == {
        "name": "claim",
        "current": "evidence",
        "completed": 1,
        "total": 5,
        "next": ["letter", "gather-more"],
    }
