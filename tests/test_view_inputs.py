"""The view pipeline's inputs are one frozen, hashable value, and the key a preview is kept under:
every input a step declares is part of that key, and every step reads only what it declares (so
no step can read something a kept preview would not be made again for)."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image as PILImage

from slotmagic import Session, SlotConfig
from slotmagic._core.budget import ContextBudget
from slotmagic._core.compaction import Compaction, SummaryCard
from slotmagic._core.images import Image
from slotmagic._core.messages import Message, Thinking, ToolCall
from slotmagic._core.repair import NOT_RUN, repair_tool_pairs
from slotmagic._core.request import ToolSpec
from slotmagic._core.slots import SlotMode
from slotmagic._core.workflow import Workflow
from slotmagic._engine.steps import Step, step
from slotmagic._engine.view.cache import ViewCache
from slotmagic._engine.view.inputs import INPUTS, Counting, Params, Source, ViewInputs
from slotmagic._engine.view.pipeline import STEPS, Prefix, make_view
from slotmagic._engine.view.view import View
from slotmagic._store.base import History
from slotmagic.providers._anthropic import _mended as mended
from slotmagic.providers._anthropic_plan import request_plan
from slotmagic.tokens import TokenCounter

ECHO = Counting(TokenCounter.for_model("echo"))
CALL = ToolCall("c1", "lookup", '{"q": "rent"}')
COMPACTION = Compaction(2, 4, SummaryCard(), "they talked", None, "keyword", 10, 3, 2)


def inputs(history: History, **changes: object) -> ViewInputs:
    made = ViewInputs("s", SlotConfig(), Source(history), "be brief", ECHO, ContextBudget())
    return dataclasses.replace(made, **changes)  # type: ignore[arg-type]


def chat(n: int) -> list[Message]:
    out = [Message.system("stored prompt")]
    for i in range(n):
        out += [Message.user(f"u{i} " + "words " * 40), Message.assistant("", [ToolCall(f"k{i}", "lookup", "{}")])]
        out += [Message.tool(f"k{i}", "result " * 200, "lookup"), Message.assistant(f"a{i}")]
    return out


def looking() -> Message:
    buffer = io.BytesIO()
    PILImage.new("RGB", (32, 32), (10, 120, 200)).save(buffer, format="PNG")
    return Message.from_parts("user", ["And this?", Image.from_bytes(buffer.getvalue())])


# A different value for each input: an input added without one here fails the key test below.
OTHER: dict[str, object] = {
    "slot": "t",
    "config": SlotConfig(mode=SlotMode.FOCUSED),
    "source": Source(History.of([Message.user("another history")])),
    "prompt": "be long",
    "counting": Counting(TokenCounter.for_model("echo"), 1.5),
    "budget": ContextBudget.auto(9_000),
    "reserve": 100,
    "compaction": COMPACTION,
    "new": Message.user("q"),
    "tools": (ToolSpec("lookup", "Looks up.", {"type": "object", "properties": {"q": {"type": "string"}}}),),
    "workflow": Workflow.define("claim", "draft -> file"),
    "context_turns": None,
    "wire": "anthropic",
    "params": Params.of({"thinking": {"type": "enabled", "budget_tokens": 2048}}),
}


def test_every_input_a_step_reads_is_part_of_the_key() -> None:
    base = inputs(History.of(chat(1)))
    fields = {f.name: f for f in dataclasses.fields(ViewInputs)}
    for one in STEPS:
        assert isinstance(one, Step), one
        for name in one.reads:
            assert name in fields and fields[name].compare, f"step {one.name} reads {name}, which is not in the key"
            assert name in OTHER, f"give {name} a different value in OTHER"
            other = dataclasses.replace(base, **{name: OTHER[name]})  # type: ignore[arg-type]
            assert other != base, f"step {one.name} reads {name}, but inputs differing in it are equal"
    assert set(OTHER) == INPUTS  # every input is compared, and tested above when a step reads it


def test_a_step_may_declare_only_inputs() -> None:
    with pytest.raises(TypeError, match="not \\['model'\\]"):
        step("model")


def test_inputs_are_frozen_and_hashable_and_equal_when_made_alike() -> None:
    history = History.of(chat(1))
    every = {name: OTHER[name] for name in ("config", "compaction", "tools", "workflow", "counting")}
    a = inputs(history, new=looking(), **every)
    b = inputs(history, new=looking(), **every)
    assert a == b and hash(a) == hash(b)
    assert Counting(TokenCounter.for_model("echo")) == ECHO  # a counter is made from its model alone
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.prompt = "changed"  # type: ignore[misc]
    assert inputs(History.of(chat(1))) != inputs(history)  # a history not read from a store: only itself


def test_a_history_that_stands_is_known_by_its_generation_and_tip(tmp_path: Path) -> None:
    with Session.open("key", db_path=tmp_path / "s.db", model="echo") as session:
        session.append([Message.user("hi"), Message.assistant("hello")])
        read = [session.store.history(session.session_id, "default") for _ in range(2)]
        assert read[0] is not read[1]
        assert Source(read[0], True) == Source(read[1], True)
        assert hash(Source(read[0], True)) == hash(Source(read[1], True))
        assert Source(read[0]) != Source(read[1])  # not known to stand: compared as objects
        session.history.pin(0)  # a write: the generation moves on, the tip stays
        again = session.store.history(session.session_id, "default")
        assert again.tip == read[0].tip and Source(again, True) != Source(read[0], True)


# -- each step reads only what it declares -----------------------------------------------------


class Recording(ViewInputs):
    """Inputs that note which of them are read (into ``seen``)."""

    seen: set[str] = set()  # noqa: RUF012 - one test at a time

    def __getattribute__(self, name: str) -> object:
        if name in INPUTS:
            Recording.seen.add(name)
        return object.__getattribute__(self, name)


def recorded_view(made: ViewInputs) -> tuple[View, dict[str, set[str]]]:
    """The view of ``made``, and what each step read of its inputs."""
    read: dict[str, set[str]] = {}

    def watched(one: Step) -> Step:
        def run(build: object) -> None:
            Recording.seen = set()
            one(build)  # type: ignore[arg-type]
            read[one.name] = set(Recording.seen)

        return Step(one.name, one.reads, run)

    recording = Recording(**{f.name: getattr(made, f.name) for f in dataclasses.fields(ViewInputs)})
    return make_view(recording, [watched(one) for one in STEPS]), read


def wide_image() -> Image:
    import io

    from PIL import Image as Pillow

    buffer = io.BytesIO()
    Pillow.new("RGB", (9_000, 20)).save(buffer, format="PNG")
    return Image.from_bytes(buffer.getvalue(), label="wide")


def scenarios(tmp_path: Path) -> Iterator[ViewInputs]:
    spec = OTHER["tools"]
    dangling = [*chat(2), Message.assistant(" "), looking(), Message.assistant("", [CALL])]
    yield inputs(History.of(dangling), new=Message.user("q"), tools=spec, workflow=OTHER["workflow"], reserve=50)
    focused = SlotConfig.focused_mode(recent_messages=3, summary_override="earlier: rent")
    yield inputs(History.of(chat(3)), config=focused, compaction=COMPACTION, counting=OTHER["counting"])
    # past the budget: older results shortened, and a long history read from its end
    yield inputs(History.of(chat(300)), budget=ContextBudget.auto(4_000), context_turns=None, tools=spec)
    # Anthropic's format: a user message before a reply first, bare definitions beside the calls
    yield inputs(History.of(chat(2)[2:]), wire="anthropic", new=Message.user("q"))
    # with thinking on: a server tool's block the request does not offer, told as text, and a
    # last tool round made without thinking, told as text
    search = '{"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "rent"}}'
    found = Message.assistant("Rents rose.", thinking=[Thinking("block", "[web_search rent]", data=search, at=0)])
    searched = [Message.user("rents?"), found, *chat(1)[1:3]]
    yield inputs(History.of(searched), wire="anthropic", params=OTHER["params"], new=Message.user("q"))
    # an image over Anthropic's 8,000 px a side: downscaled in the view, its entry counted again
    yield inputs(History.of(chat(2)), wire="anthropic", new=Message.from_parts("user", ["see", wide_image()]))
    with Session.open("steps", db_path=tmp_path / "s.db", model="echo") as session:
        session.append(chat(2))
        session.history.pin(1)
        session.history.exclude(5)
        session.context.add_goal("settle the deposit")
        session.workflows.define("claim", "draft -> file")
        history = session.store.history(session.session_id, "default")
        workflow = session.store.active_workflow(session.session_id)
        yield inputs(history, source=Source(history, True), workflow=workflow, prompt=None)


def test_each_step_reads_only_the_inputs_it_declares(tmp_path: Path) -> None:
    read_by: dict[str, set[str]] = {one.name: set() for one in STEPS}
    kinds: set[str] = set()
    for made in scenarios(tmp_path):
        view, read = recorded_view(made)
        assert view.messages == make_view(made).messages  # the recording changes nothing
        kinds |= {e.kind for e in view.entries} | {o.reason for o in view.omitted}
        for name, seen in read.items():
            read_by[name] |= seen
    # the scenarios take every step through the paths that read its inputs
    assert {"compaction", "summary", "workflow", "context", "new", "elided", "not_run", "opening", "told"} <= kinds
    assert {"excluded", "beyond", "filtered", "compacted", "blank"} <= kinds  # what was left out, and why
    for one in STEPS:
        assert read_by[one.name] <= one.reads, f"step {one.name} reads {read_by[one.name] - one.reads} undeclared"
        assert read_by[one.name] == one.reads, f"step {one.name} declares {one.reads - read_by[one.name]} unread"


# -- the wire's own repair, on what the pipeline repaired, changes nothing ------------------------

IDS = st.sampled_from(["a", "b", "", "0"])
RESULT_IDS = st.sampled_from(["a", "b", "0", "x"])
MESSAGES = st.one_of(
    st.builds(Message.user, st.sampled_from(["q", "next"])),
    st.builds(lambda ids: Message.assistant("", [ToolCall(i, "f", "{}") for i in ids]), st.lists(IDS, max_size=3)),
    st.builds(lambda i: Message.tool(i, "r", "f"), RESULT_IDS),
    st.builds(lambda i: Message.tool(i, NOT_RUN, "f", is_error=True), RESULT_IDS),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(MESSAGES, max_size=10))
def test_repairing_a_repaired_list_changes_nothing(messages: list[Message]) -> None:
    repaired = repair_tool_pairs(messages)
    again = repair_tool_pairs(repaired)
    assert again is repaired  # the very same messages, not a copy
    view = make_view(inputs(History.of(messages)))
    assert repair_tool_pairs(view.messages) == view.messages


def test_a_compaction_between_a_call_and_its_result_sends_the_result_as_text() -> None:
    history = [Message.user("q"), Message.assistant("", [CALL]), Message.tool(CALL.id, "900", CALL.name)]
    history += [Message.assistant("900 a month"), Message.user("thanks")]
    view = make_view(inputs(History.of(history), compaction=COMPACTION))  # it folded the first 2
    first = view.entries[2]
    assert first.kind == "history" and first.position == 2 and first.message.role == "user"
    assert first.message.content.endswith("900") and first.tokens == ECHO.count(first.message)
    assert view.messages == repair_tool_pairs(view.messages)


def test_a_preview_is_kept_under_its_inputs(tmp_path: Path) -> None:
    with Session.open("kept", db_path=tmp_path / "s.db", model="echo") as session:
        session.append([Message.user("hi"), Message.assistant("hello")])
        sid = session.session_id

        def fresh(**changes: object) -> ViewInputs:
            history = session.store.history(sid, "default")
            assert history.slot is not None
            return inputs(history, slot="default", config=history.slot.config, source=Source(history, True), **changes)

        cache = ViewCache()
        view = make_view(fresh())
        cache.put(fresh(), view)
        assert cache.get(fresh()) is view  # read again, equal: the same view
        assert cache.get(fresh(prompt="be long")) is None  # any input differs: made again
        session.history.pin(0)
        assert cache.get(fresh()) is None  # a write moved the generation on
        turn = fresh(new=Message.user("q"))
        cache.put(turn, make_view(turn))  # a turn's view is not kept
        assert cache.get(turn) is None
        standing = fresh()
        cache.put(standing, make_view(standing))
        history = standing.source.history
        assert cache.get(dataclasses.replace(standing, source=Source(history))) is None  # not known to stand


def test_a_result_supplied_by_hand_takes_the_place_of_not_run_in_the_preview_too() -> None:
    history = [Message.user("rent?"), Message.assistant("", [CALL])]
    history += [Message.tool(CALL.id, NOT_RUN, CALL.name, is_error=True), Message.tool(CALL.id, "900", CALL.name)]
    view = make_view(inputs(History.of([*history, Message.user("So?")]), prompt=None))
    assert [(e.position, e.message.content) for e in view.entries if e.message.role == "tool"] == [(3, "900")]
    assert [(o.lo, o.reason) for o in view.omitted] == [(2, "replaced")]
    assert "stored message 3" in view.to_text() and "replaced by the result supplied after it" in view.to_text()


@pytest.mark.parametrize("history_budget", [10**8, 30_000])
@pytest.mark.parametrize("factor", [1.0, 1.5])
def test_a_long_full_view_carries_each_messages_own_count(history_budget: int, factor: float) -> None:
    """Past a read block, the full view counts its messages on the way in (``mode_filter``);
    each entry still carries the count ``counted`` would give it, with or without a cut
    "beyond the budget" inside a block."""
    stored = chat(400)  # 1,601 messages: more than one read block
    stored[700] = Message.assistant("   ")  # blank: left out, not counted
    counting = Counting(TokenCounter.for_model("echo"), factor)
    view = make_view(
        inputs(History.of(stored), counting=counting, budget=ContextBudget(history=history_budget, tool_results=0))
    )
    history = [e for e in view.entries if e.kind == "history"]
    assert len(history) > 100 and all(e.tokens == counting.count(stored[e.position or 0]) for e in history)
    assert 700 not in {e.position for e in history}
    beyond = [o for o in view.omitted if o.reason == "beyond"]
    assert bool(beyond) == (history_budget < 10**6)
    # Everything after the cut (or all of it) is in the view, older tool results shortened.
    shown = sorted(e.position or 0 for e in view.entries if e.kind in ("history", "elided"))
    assert shown == [p for p in range(beyond[0].hi if beyond else 0, len(stored)) if p != 700]


@pytest.mark.parametrize("wire", ["anthropic", "openai", None])
def test_what_a_request_format_adds_is_in_the_view_of_the_models_that_speak_it(wire: str | None) -> None:
    """Anthropic wants a user message first; both APIs want tools defined beside tool calls."""
    history = [Message.assistant("", [CALL]), Message.tool(CALL.id, "900", CALL.name), Message.assistant("900")]
    view = make_view(inputs(History.of(history), wire=wire, new=Message.user("q")))
    kinds = [e.kind for e in view.entries if e.message.role != "system"]
    assert kinds == (["opening"] if wire == "anthropic" else []) + ["history"] * 3 + ["new"]
    assert view.bare_tools == ((ToolSpec("lookup", "", {"type": "object"}),) if wire else ())
    assert view.report is not None and (view.report.tools.used > 0) == bool(wire)
    offered = make_view(inputs(History.of(history), wire=wire, tools=OTHER["tools"]))
    assert offered.bare_tools == ()  # the request's own tools are the definitions


@pytest.mark.parametrize("wire", ["anthropic", "openai", None])
def test_a_reply_of_reasoning_alone_is_left_out_where_its_format_sends_nothing_of_it(wire: str | None) -> None:
    """Chat completions send no reasoning; Anthropic sends a kept block (a web search's call),
    not thinking alone (an assistant message cannot end with it); echo's view keeps both."""
    thought = Message.assistant("", thinking=[Thinking("thinking", "hmm", "sig")])
    searched = Message.assistant("", thinking=[Thinking("block", "[web_search {}]", data="{}")])
    history = [Message.user("q"), thought, Message.user("again?"), searched, Message.user("and?")]
    view = make_view(inputs(History.of(history), wire=wire))
    left = {"anthropic": [(1, "blank")], "openai": [(1, "blank"), (3, "blank")], None: []}[wire]
    assert [(o.lo, o.reason) for o in view.omitted] == left


THOUGHT = Thinking("thinking", "hm", "sig")
SEARCH = Thinking("block", "[web_search q]", data='{"type": "server_tool_use", "id": "srv_1", "name": "web_search"}')
CLAUDE = Counting(TokenCounter.for_model("anthropic:claude-sonnet-4-5"))
CLAUDE_MESSAGES = st.one_of(
    MESSAGES,
    st.builds(
        lambda ids, thought, text: Message.assistant(
            text, [ToolCall(i, "f", "{}") for i in ids], [THOUGHT] if thought else []
        ),
        st.lists(st.sampled_from(["a", "toolu_b"]), max_size=2),
        st.booleans(),
        st.sampled_from(["", "said"]),
    ),
    st.builds(lambda at: Message.assistant("found it", thinking=[replace_at(SEARCH, at)]), st.integers(0, 9)),
)


def replace_at(block: Thinking, at: int) -> Thinking:
    return dataclasses.replace(block, at=at)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(CLAUDE_MESSAGES, max_size=8),
    st.sampled_from([{}, {"thinking": {"type": "enabled"}}, {"thinking": {"type": "adaptive"}}]),
    st.booleans(),
)
def test_the_anthropic_wire_changes_nothing_on_a_view_its_steps_mended(
    messages: list[Message], params: dict[str, object], offered: bool
) -> None:
    """The wire's own rewrites (tool pairs, blocks and the last round as text) on the messages
    of a view made with the same params: the same messages, so what is previewed is sent."""
    if offered:
        params = {**params, "tools": [{"type": "web_search_20250305", "name": "web_search"}]}
    view = make_view(inputs(History.of(messages), wire="anthropic", counting=CLAUDE, params=Params.of(params)))
    plan = request_plan(CLAUDE.model, params)
    assert mended(view.messages, plan) == list(view.messages)


# -- a turn's second view starts where its first stood -----------------------------------------


def test_a_view_differing_in_its_tools_alone_runs_only_the_steps_that_read_them(tmp_path: Path) -> None:
    ran: list[str] = []

    def counted_steps() -> list[Step]:
        def watched(one: Step) -> Step:
            def run(build: object) -> None:
                ran.append(one.name)
                one(build)  # type: ignore[arg-type]

            return Step(one.name, one.reads, run)

        return [watched(one) for one in STEPS]

    steps = counted_steps()
    tools_from = next(i for i, one in enumerate(STEPS) if "tools" in one.reads)
    for made in scenarios(tmp_path):
        without = dataclasses.replace(made, tools=())
        with_tools = dataclasses.replace(made, tools=OTHER["tools"])  # type: ignore[arg-type]
        prefix = Prefix(frozenset({"tools"}))
        ran.clear()
        first = make_view(without, steps, prefix)
        second = make_view(with_tools, steps, prefix)
        assert first == make_view(without) and second == make_view(with_tools)  # the same views
        assert ran == [s.name for s in STEPS] + [s.name for s in STEPS[tools_from:]]
        # inputs that differ in anything an earlier step reads start from the beginning
        ran.clear()
        other = dataclasses.replace(with_tools, prompt="another prompt")  # read by the first step
        assert make_view(other, steps, prefix) == make_view(other) and ran == [s.name for s in STEPS]
