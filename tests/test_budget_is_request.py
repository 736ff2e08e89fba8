"""The budget is the request: every entry of a view counts what is sent for it, and the tool
definitions count as the request carries them (the turn's tools, else the bare definitions a
wire adds beside a history's calls) — for any history, on every wire, with the options that
change what a request holds (thinking on, tools offered, a budget tight enough to shorten older
results, a focused slot). For a model counted exactly, the whole request as sent counts what
the view's budget says it uses."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from slotmagic import SlotConfig
from slotmagic._core.budget import ContextBudget
from slotmagic._core.messages import Message, Thinking, ToolCall
from slotmagic._engine.view.inputs import Counting, Params, Source, ViewInputs
from slotmagic._engine.view.pipeline import make_view
from slotmagic._store.base import History
from slotmagic.providers import REGISTRY, ChatRequest, ToolSpec
from slotmagic.tokens import TokenCounter

MODELS = ("echo", "openai:gpt-4o-mini", "anthropic:claude-sonnet-4-5", "ollama:llama3.2")
COUNTINGS = {model: Counting(TokenCounter.for_model(model)) for model in MODELS}
THINKING = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
SPEC = ToolSpec("lookup", "Look a word up.", {"type": "object", "properties": {"q": {"type": "string"}}})
SEARCH = '{"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "rent"}}'
WORDS = st.sampled_from(["q", "the rent rose", "deposit " * 40, "a long result " * 200])
IDS = st.sampled_from(["a", "b", "toolu_c"])


def called(ids: list[str], text: str) -> Message:
    return Message.assistant(text, [ToolCall(i, "lookup", '{"q": "x"}') for i in ids])


MESSAGES = st.one_of(
    st.builds(Message.user, WORDS),
    st.builds(Message.assistant, WORDS),
    st.builds(called, st.lists(IDS, max_size=2, unique=True), st.sampled_from(["", "looking"])),
    st.builds(lambda i, text: Message.tool(i, text, "lookup"), IDS, WORDS),
    st.builds(lambda text: Message.assistant(text, thinking=[Thinking("thinking", "hm", "sig")]), WORDS),
    st.just(Message.assistant("Rents rose.", thinking=[Thinking("block", "[web_search rent]", data=SEARCH, at=0)])),
)


def tools_sent(view: Any, tools: tuple[ToolSpec, ...]) -> tuple[ToolSpec, ...]:
    return tools or view.bare_tools


@settings(max_examples=250, deadline=None)
@given(
    st.lists(MESSAGES, max_size=12),
    st.sampled_from(MODELS),
    st.sampled_from([None, THINKING]),
    st.sampled_from([(), (SPEC,)]),
    st.sampled_from([ContextBudget(), ContextBudget.auto(1_500)]),
    st.booleans(),
    st.booleans(),
)
def test_every_entry_counts_what_is_sent_for_it(
    messages: list[Message],
    model: str,
    params: dict[str, Any] | None,
    tools: tuple[ToolSpec, ...],
    budget: ContextBudget,
    new: bool,
    focused: bool,
) -> None:
    counting = COUNTINGS[model]
    config = SlotConfig.focused_mode(recent_messages=5) if focused else SlotConfig()
    inputs = ViewInputs(
        "s", config, Source(History.of(messages)), "be brief", counting, budget, 0, None,
        Message.user("and now?") if new else None, tools, None, None, REGISTRY.wire(model), Params.of(params),
    )  # fmt: skip
    view = make_view(inputs)
    for entry in view.entries:
        assert entry.tokens == counting.count(entry.message), (entry.kind, entry.position, entry.message)
    assert view.report is not None
    first_system = next((m.content for m in view.messages if m.role == "system"), None)
    sent = tools_sent(view, tools)
    assert view.report.tools.used == counting.scale(counting.counter.count_tools_after(sent, first_system))
    if counting.counter.exact:  # the request as sent, counted whole, is what the budget says it uses
        request = ChatRequest(model.partition(":")[2], view.messages, tools=sent)
        assert counting.counter.count_request(request) == view.report.request_used


def lookup(q: str) -> str:
    """Look a word up.

    Args:
        q: The word.
    """
    return q


def test_the_budget_and_preview_count_the_tools_the_next_turn_sends(tmp_path: Any, monkeypatch: Any) -> None:
    from slotmagic import Session
    from slotmagic._snapshot import session_snapshot
    from slotmagic.providers import _echo as echo

    sent: list[ChatRequest] = []
    original = echo.EchoProvider.stream

    def stream(self: echo.EchoProvider, request: ChatRequest) -> Any:
        sent.append(request)
        return original(self, request)

    monkeypatch.setattr(echo.EchoProvider, "stream", stream)
    with Session.open("tools", db_path=tmp_path / "t.db", model="echo") as session:
        session.tools.add(lookup)
        session.submit_turn("hello")
        budget, preview = session.budget(), session.preview()
        assert preview.report is not None and budget.report == preview.report
        counter = COUNTINGS["echo"].counter
        session.submit_turn("again")
        request = sent[-1]
        first = next((m.content for m in request.messages if m.role == "system"), None)
        assert budget.report.tools.used == counter.count_tools_after(request.tools, first) > 0
        assert {t.name for t in request.tools} == {"lookup"}
        sidebar = session_snapshot(session)["budget"]  # the sidebar's bar counts them too
        assert sidebar["parts"]["tools"]["used"] == session.budget().report.tools.used > 0
        assert sidebar["threshold"] == session.budget().threshold
