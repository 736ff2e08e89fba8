"""Fan-out on the offline echo model: columns on slots and on model branches, replay and
edit-fork of a fan-out cell, bad input in one line, %%turn --slots/--models through a real
IPython shell, the columns widget's state, and %slot compare."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from slotmagic import ConfigError, FanOutResult, ForkRef, InvalidSlotId, Session, SlotConfig, SlotNotFound, SlotReadonly
from slotmagic._core.slots import SlotMode
from slotmagic._engine.plan.targets import branch_hint
from slotmagic._errors import UnknownModel


@pytest.fixture
def session(db_path: Path) -> Iterator[Session]:
    with Session.open("fan", db_path=db_path) as s:
        s.create_slot("draft-a")
        s.create_slot("draft-b")
        s.create_slot("notes")
        s.switch_slot("default")
        yield s


def users(session: Session, slot: str) -> list[str]:
    return [m.content for m in session.messages(slot) if m.role == "user"]


def state(session: Session) -> dict[str, list[str]]:
    return {s.id: [m.content for m in session.messages(s.id)] for s in session.list_slots()}


def test_slots_each_get_the_turn_and_the_current_slot_stays(session: Session) -> None:
    result = session.fan_out("Which way?", slots="draft-a,draft-b,notes")
    assert isinstance(result, FanOutResult) and list(result) == ["draft-a", "draft-b", "notes"]
    for slot in result:
        assert users(session, slot) == ["Which way?"]
        assert result[slot].reply is not None and result[slot].reply.slot == slot  # type: ignore[union-attr]
        assert result[slot].text == session.messages(slot)[-1].content
        assert result[slot].latency is not None
    assert session.current_slot == "default" and session.messages("default") == []
    assert result.summary().startswith("3 of 3 replies · slowest ")


def test_attachments_go_to_every_column_as_submit_turn_takes_them(session: Session) -> None:
    """They failed with an internal name (``slotmagic._attach.attach(...)``)."""
    result = session.fan_out("Compare with this", slots="draft-a,draft-b", attachments={"note": "rent is 900"})
    assert result.errors == {}
    for slot in ("draft-a", "draft-b"):
        [asked] = users(session, slot)
        assert asked.startswith("Compare with this\n\nAttached `note` (text):") and "rent is 900" in asked
    with pytest.raises(ConfigError) as refused:
        session.fan_out("x", slots="draft-a", attachments=42)
    assert str(refused.value).startswith("attachments= takes a dict of label -> object")
    assert "slotmagic." not in str(refused.value) and users(session, "draft-a") == [asked]


def test_all_and_globs(session: Session) -> None:
    session.create_slot("lease", SlotConfig.readonly())
    assert list(session.fan_out("q", slots="draft-*")) == ["draft-a", "draft-b"]
    everything = session.fan_out("q2", slots="all")
    assert list(everything) == ["default", "draft-a", "draft-b", "notes"]  # the readonly slot is skipped
    assert session.slot("lease").mode is SlotMode.READONLY


def test_models_each_answer_on_a_new_branch_named_after_the_model(session: Session) -> None:
    session.submit_turn("Intro")
    before = state(session)["default"]
    result = session.fan_out("Compare models", models="echo")
    assert list(result) == ["default.echo"]
    reply = result["default.echo"].reply
    assert reply is not None and reply.slot == "default.echo" and result["default.echo"].branch
    assert session.slot("default.echo").meta.parent_id == "default"
    assert users(session, "default.echo") == ["Intro", "Compare models"]
    assert state(session)["default"] == before  # the slot itself is untouched
    assert session.current_slot == "default"


def test_branch_names() -> None:
    models = ["openai:gpt-4o-mini", "anthropic:claude-sonnet-4-5", "openai:gpt-4.1"]
    assert branch_hint("default", "openai:gpt-4o-mini", models) == "default.gpt-4o-mini"
    assert branch_hint("default", "openai:gpt-4.1", models) == "default.gpt-4-1"  # '.2' is how forks are numbered
    assert branch_hint("x", "ollama:llama3", ["openai:llama3", "ollama:llama3"]) == "x.ollama-llama3"
    assert branch_hint("x", "openai:Qwen/Qwen3-8B", []) == "x.Qwen-Qwen3-8B"
    assert len(branch_hint("s" * 60, "openai:gpt-4o-mini", [])) == 64


def test_slots_times_models(session: Session) -> None:
    result = session.fan_out("Both", slots="draft-a,draft-b", models="echo")
    assert list(result) == ["draft-a.echo", "draft-b.echo"]
    assert session.slot("draft-b.echo").meta.parent_id == "draft-b"
    assert session.messages("draft-a") == [] and session.messages("draft-b") == []


def test_an_unchanged_cell_replays_every_column_without_calling_a_model(session: Session) -> None:
    first = session.fan_out("Q", slots="draft-a,draft-b", cell_id="cell-1")
    models = session.fan_out("M", models="echo", cell_id="cell-2")
    before = state(session)
    session._engine.pool.close()
    again = session.fan_out("Q", slots="draft-a,draft-b", cell_id="cell-1")
    models_again = session.fan_out("M", models="echo", cell_id="cell-2")
    assert session._engine.pool.kept() == {}  # no model was asked
    for result, earlier in ((again, first), (models_again, models)):
        for key, column in result.items():
            assert column.reply is not None and column.reply.replayed
            assert column.text == earlier[key].text and column.reply.slot == earlier[key].reply.slot  # type: ignore[union-attr]
            assert column.latency == round(earlier[key].latency or 0, 3)  # as long as it took then
    assert state(session) == before
    assert again.summary().startswith("replayed from the store, no model call · 2 of 2 replies · slowest ")


def test_an_edited_cell_forks_each_column(session: Session) -> None:
    session.fan_out("Q", slots="draft-a,draft-b", cell_id="cell-1")
    session.fan_out("M", models="echo", cell_id="cell-2")
    edited = session.fan_out("Q, better", slots="draft-a,draft-b", cell_id="cell-1")
    assert {k: c.reply.slot for k, c in edited.items() if c.reply} == {"draft-a": "draft-a.2", "draft-b": "draft-b.2"}
    assert edited["draft-a"].reply.forked_from == ForkRef("draft-a", 1, "edit")  # type: ignore[union-attr]
    assert users(session, "draft-a") == ["Q"] and users(session, "draft-a.2") == ["Q, better"]
    models = session.fan_out("M, better", models="echo", cell_id="cell-2")
    reply = models["default.echo"].reply
    assert reply is not None and reply.slot == "default.echo.2" and users(session, "default.echo.2") == ["M, better"]
    assert users(session, "default.echo") == ["M"]
    before = state(session)
    # The edited cell run again replays its forks; the first text again replays the originals.
    again = session.fan_out("Q, better", slots="draft-a,draft-b", cell_id="cell-1")
    assert [c.reply.slot for c in again.values() if c.reply and c.reply.replayed] == ["draft-a.2", "draft-b.2"]
    back = session.fan_out("M", models="echo", cell_id="cell-2")
    assert back["default.echo"].reply.replayed and back["default.echo"].reply.slot == "default.echo"  # type: ignore[union-attr]
    assert state(session) == before
    assert session.current_slot == "default"


def test_rerun_asks_every_column_again_on_forks(session: Session) -> None:
    session.fan_out("Q", slots="draft-a", models=None, cell_id="c")
    session.fan_out("M", models="echo", cell_id="m")
    again = session.fan_out("Q", slots="draft-a", cell_id="c", rerun=True)
    models = session.fan_out("M", models="echo", cell_id="m", rerun=True)
    assert again["draft-a"].reply.slot == "draft-a.2" and not again["draft-a"].reply.replayed  # type: ignore[union-attr]
    assert models["default.echo"].reply.slot == "default.echo.2"  # type: ignore[union-attr]
    assert users(session, "draft-a") == users(session, "draft-a.2") == ["Q"]


def test_all_does_not_grow_with_the_branches_its_own_cell_made(session: Session) -> None:
    """Slots with the same history (empty here) must not answer for each other, and `all`
    run again asks the same slots, not also the forks and branches an earlier run made."""
    session.fan_out("Q", slots="all", cell_id="c")
    session.fan_out("Q, edited", slots="all", cell_id="c")
    again = session.fan_out("Q, edited", slots="all", cell_id="c")
    assert list(again) == ["default", "draft-a", "draft-b", "notes"]
    assert [c.reply.slot for c in again.values() if c.reply] == ["default.2", "draft-a.2", "draft-b.2", "notes.2"]
    back = session.fan_out("Q", slots="all", cell_id="c")
    assert [c.reply.slot for c in back.values() if c.reply and c.reply.replayed] == [
        "default", "draft-a", "draft-b", "notes",
    ]  # fmt: skip
    session.fan_out("M", slots="all", models="echo", cell_id="m")
    assert len(session.fan_out("M", slots="all", models="echo", cell_id="m")) == 8  # 4 slots + the forks of c


def test_a_column_that_cannot_be_asked_fails_alone(session: Session) -> None:
    result = session.fan_out("Hi", slots="draft-a", models="echo,openai:gpt-4o-mini")
    assert result["draft-a.echo"].ok
    error = result["draft-a.gpt-4o-mini"].error
    assert error is not None and "OPENAI_API_KEY" in str(error)
    assert not session.has_slot("draft-a.gpt-4o-mini")  # no branch without its turn
    assert "1 failed" in result.summary()


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"slots": "drfat-a"}, SlotNotFound, "did you mean 'draft-a'"),
        ({"slots": "zz-*"}, ConfigError, "no slot that takes turns matches 'zz-*'"),
        ({"slots": " , "}, ConfigError, "slots is empty"),
        ({"slots": "bad id"}, InvalidSlotId, "bad id"),
        ({"slots": 5}, ConfigError, "slots must be a list of names"),
        ({"models": "gpt-4o"}, UnknownModel, "provider:model"),
        ({"slots": "draft-a", "slot": "draft-b"}, ConfigError, "not slot="),
        ({}, ConfigError, "needs slots= or models="),
        ({"slots": "draft-a", "max_tokens": 0}, ConfigError, "max_tokens"),
    ],
)
def test_bad_input_is_one_line_and_stores_nothing(
    session: Session, kwargs: dict[str, Any], error: type[Exception], words: str
) -> None:
    before = state(session)
    with pytest.raises(error) as raised:
        session.fan_out("Hi", **kwargs)
    assert words in str(raised.value) and "\n" not in str(raised.value)
    assert state(session) == before


def test_a_readonly_slot_named_is_refused(session: Session) -> None:
    session.create_slot("lease", SlotConfig.readonly())
    with pytest.raises(SlotReadonly):
        session.fan_out("Hi", slots="draft-a,lease")
    assert session.messages("draft-a") == []


def test_a_readonly_current_slot_is_refused_for_models(session: Session) -> None:
    session.create_slot("lease", SlotConfig.readonly())
    session.switch_slot("lease")
    with pytest.raises(SlotReadonly):
        session.fan_out("Hi", models="echo")
    assert not session.has_slot("lease.echo")


def test_a_mistake_every_column_shares_is_said_once(session: Session) -> None:
    with pytest.raises(ConfigError) as raised:
        session.fan_out("Hi", slots="draft-a,draft-b", tools=["no_such_tool"])
    assert "no_such_tool" in str(raised.value) and "\n" not in str(raised.value)
    assert session.messages("draft-a") == session.messages("draft-b") == []


def test_the_async_form(session: Session) -> None:
    async def main() -> FanOutResult:
        return await session.afan_out("Async", slots=["draft-a", "notes"])

    result = asyncio.run(main())
    assert list(result.replies) == ["draft-a", "notes"] and result.errors == {}


def test_tools_that_raise_anything_end_async_turns_and_fan_outs(session: Session) -> None:
    """A sync tool raising StopIteration hung async turns and fan-outs forever (an asyncio
    future cannot hold one); a lone surrogate from a tool aborted the turn. Each is an error
    result the model reads, and the turn is stored."""
    import threading

    def stops() -> str:
        """Raises StopIteration."""
        raise StopIteration

    def closes() -> str:
        """Raises GeneratorExit."""
        raise GeneratorExit

    def halves() -> str:
        """Returns half an emoji."""
        return "\ud83d"

    for function in (stops, closes, halves):
        session.tools.add(function)
    ask = "call stops\ncall closes\ncall halves"
    seen = "- stops: error: stops raised StopIteration"

    reply = asyncio.run(asyncio.wait_for(session.asubmit_turn(ask, slot="draft-a"), 30))
    assert seen in reply.text and "- halves: error: halves returned text that is not valid Unicode" in reply.text
    assert [m.is_error for m in session.messages("draft-a") if m.role == "tool"] == [True, True, True]

    outcome: list[FanOutResult] = []
    worker = threading.Thread(target=lambda: outcome.append(session.fan_out(ask, slots="draft-b,notes")), daemon=True)
    worker.start()
    worker.join(30)
    assert outcome, "the fan-out hung"
    assert outcome[0].errors == {} and all(seen in r.text for r in outcome[0].replies.values())
    assert seen in asyncio.run(asyncio.wait_for(session.afan_out(ask, slots="default"), 30)).replies["default"].text


def test_a_fan_out_runs_once(session: Session) -> None:
    fanout = session.plan_fan_out("Once", slots="draft-a")
    fanout.run_sync()
    with pytest.raises(ConfigError, match="has run already"):
        fanout.run_sync()
    assert users(session, "draft-a") == ["Once"]


def test_max_concurrency_is_checked(session: Session) -> None:
    assert session.options.max_concurrency == 4
    with pytest.raises(ConfigError):
        session.options.max_concurrency = 0
    session.options.max_concurrency = 1
    assert session.fan_out("one at a time", slots="all").summary().startswith("4 of 4")


def test_compare_lays_the_last_replies_side_by_side(session: Session) -> None:
    session.submit_turn("Shared start")
    session.derive_slot("left")
    session.derive_slot("right")
    session.fan_out("Go left", slots="left")
    session.fan_out("Go right", slots="right")
    comparison = session.history.compare("left", "right")
    assert [c["key"] for c in comparison.columns] == ["left", "right"]
    assert "last user message: Go left" in comparison.columns[0]["text"]
    assert comparison.summary == "left, right share 1 turn, then part"
    whole = session.history.compare("left", "right", since_fork=True)
    assert whole.columns[1]["text"].startswith("[user] Go right\n\n[assistant] ")
    text = comparison.to_text()
    assert "left" in text.splitlines()[0] and "│" in text.splitlines()[0]
    assert "&lt;" not in text and "<table" in comparison._repr_html_()
    with pytest.raises(ConfigError):
        session.history.compare("left")
    with pytest.raises(SlotNotFound):
        session.history.compare("left", "rigth")


def test_compare_renders_markdown_as_the_fan_out_columns_do(session: Session) -> None:
    session.derive_slot("left")
    session.derive_slot("right")
    session.fan_out("**bold** and [bad](javascript:alert(1)) <img src=x>", slots="left,right")
    for since_fork in (False, True):
        column = session.history.compare("left", "right", since_fork=since_fork).columns[0]
        assert "<strong>bold</strong>" in column["html"] and "**bold**" not in column["html"]
        assert 'href="javascript' not in column["html"] and "<img" not in column["html"]
        html = session.history.compare("left", "right", since_fork=since_fork)._repr_html_()
        assert "<strong>bold</strong>" in html and "**bold**" not in html
    assert "<strong>user</strong>" in session.history.compare("left", "right", since_fork=True).columns[0]["html"]


# -- through the magics ------------------------------------------------------------------------


def magic_session(ip: Any) -> Session:
    from slotmagic._magics import SlotMagic

    return next(c for c in ip.configurables if isinstance(c, SlotMagic)).session()


def test_turn_slots_shows_columns_and_binds_the_result(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%config SlotMagic.widgets = False")
    ip.run_cell("%slot create a --no-switch\n%slot create b --no-switch")
    ip.run_cell("%%turn --slots a,b\nSame <b>question</b>", store_history=True)
    result = ip.user_ns["_"]
    assert isinstance(result, FanOutResult) and list(result) == ["a", "b"]
    session = magic_session(ip)
    assert session.current_slot == "default" and users(session, "a") == users(session, "b") == ["Same <b>question</b>"]
    capsys.readouterr()
    ip.run_cell("%slot compare a b")
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("a ") and "│ b" in out.splitlines()[0]


def test_turn_slots_with_attach_sends_them_to_every_column(ip: Any) -> None:
    ip.run_cell("%config SlotMagic.widgets = False")
    ip.run_cell("%slot create a --no-switch\n%slot create b --no-switch")
    ip.user_ns["rent"] = {"monthly": 900}
    ip.run_cell("%%turn --slots a,b --attach rent\nIs this fair?", store_history=True)
    session = magic_session(ip)
    for slot in ("a", "b"):
        [asked] = users(session, slot)
        assert asked.startswith("Is this fair?\n\nAttached `rent` (dict):") and "900" in asked


def test_turn_models_makes_branches(ip: Any) -> None:
    ip.run_cell("%config SlotMagic.widgets = False")
    ip.run_cell("%%turn --models echo\nWhich model?", store_history=True)
    assert magic_session(ip).slot("default.echo").meta.parent_id == "default"


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("--slot a --slots a,b", "use --slots alone"),
        ("--slots nope", "no slot 'nope'"),
        ("--models nope", "names no provider"),
    ],
)
def test_bad_fan_out_lines_are_one_line(ip: Any, line: str, words: str) -> None:
    ip.run_cell("%slot create a --no-switch\n%slot create b --no-switch")
    with pytest.raises(UsageError) as raised:
        ip.run_cell(f"%%turn {line}\nHi")
    assert words in str(raised.value) and "\n" not in str(raised.value)


def test_max_concurrency_setting(ip: Any) -> None:
    ip.run_cell("%config SlotMagic.max_concurrency = 2")
    ip.run_cell("%%turn --slots default\nHi")
    assert magic_session(ip).options.max_concurrency == 2


def test_the_columns_widget_holds_each_column(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from IPython.core.displaypub import DisplayPublisher

    from slotmagic.widgets import _static as static

    monkeypatch.setattr(static, "_in_kernel", lambda: True)  # the view part is shown in a kernel only

    from slotmagic.widgets import FanOutWidget

    shown: list[dict[str, Any]] = []

    class Recording(DisplayPublisher):
        def publish(self, data: Any, metadata: Any = None, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
            shown.append(data)

    ip.run_cell("%slot create a --no-switch")
    original, ip.display_pub = ip.display_pub, Recording(shell=ip)
    made: list[FanOutWidget] = []
    real_init = FanOutWidget.__init__

    def keep(self: FanOutWidget, **kwargs: Any) -> None:
        real_init(self, **kwargs)
        made.append(self)

    FanOutWidget.__init__ = keep  # type: ignore[method-assign]
    try:
        ip.run_cell("%%turn --slots a,default --models echo\n<img src=x onerror=alert(1)>")
    finally:
        ip.display_pub = original
        FanOutWidget.__init__ = real_init  # type: ignore[method-assign]
    widget = made[-1]
    assert [c["key"] for c in widget.columns] == ["a.echo", "default.echo"]
    assert all(c["status"] == "done" and c["stored"].startswith("new branch") for c in widget.columns)
    assert all("<img src=x onerror=alert(1)>" in c["text"] for c in widget.columns)  # text, shown as text
    assert widget.summary.startswith("2 of 2 replies")
    # Two outputs: the widget view alone, then its static form, updated once the replies are done.
    views = [d for d in shown if "application/vnd.jupyter.widget-view+json" in d]
    assert len(views) == 1 and views[0]["text/plain"] == ""
    data = shown[-1]
    assert "application/vnd.jupyter.widget-view+json" not in data
    assert 'class="slotmagic-static' in data["text/html"]
    assert "&lt;img src=x" in data["text/html"] and "<img src=x" not in data["text/html"]
    assert "a.echo (from a)" in data["text/plain"]


def test_the_calling_thread_wakes_when_the_worker_ends_not_at_its_next_look(monkeypatch: pytest.MonkeyPatch) -> None:
    from slotmagic._engine.run import background

    monkeypatch.setattr(background, "_POLL", 3_600.0)  # a look an hour away: only a wake-up ends it soon
    seen: list[str] = []
    outcome: list[object] = []

    async def work(emit: Any) -> str:
        emit("first")
        await asyncio.sleep(0)
        emit("second")
        return "done"

    def call() -> None:
        outcome.append(background.run_beside(work, seen.append))

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(timeout=60)  # a guard against hanging for the hour, not a measure of speed
    assert not caller.is_alive(), "run_beside waited for its next look instead of being woken"
    assert outcome == ["done"] and seen == ["first", "second"]

    async def fails(emit: Any) -> str:
        emit("before")
        raise ValueError("the worker's error")

    with pytest.raises(ValueError, match="the worker's error"):
        background.run_beside(fails, seen.append)
    assert seen[-1] == "before"
