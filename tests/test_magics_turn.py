"""``%%turn`` through a real IPython shell: streaming display, replay and fork of re-run cells,
interrupts, and the reply as the cell's value."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.displaypub import DisplayPublisher
from IPython.core.error import UsageError

from slotmagic import Session
from slotmagic._core.request import ChatRequest
from slotmagic.providers._base import StreamEvent, TextDelta


def magic(ip: Any) -> Any:
    from slotmagic._magics import SlotMagic

    return next(c for c in ip.configurables if isinstance(c, SlotMagic))


def session(ip: Any) -> Session:
    return magic(ip).session()


class RecordingPublisher(DisplayPublisher):
    """The shell's display publisher, also keeping every display and update it publishes."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.outputs: list[dict[str, Any]] = []

    def publish(
        self,
        data: Any,
        metadata: Any = None,
        source: Any = None,
        *,  # type: ignore[override]
        transient: Any = None,
        update: bool = False,
    ) -> None:
        self.outputs.append({"data": data, "metadata": metadata, "update": update})


def displays(ip: Any, cell: str, **kwargs: Any) -> list[dict[str, Any]]:
    original = ip.display_pub
    ip.display_pub = recorder = RecordingPublisher(shell=ip)
    try:
        ip.run_cell(cell, **kwargs)
    finally:
        ip.display_pub = original
    return recorder.outputs


def test_reply_is_shown_once_rendered_with_a_footer(ip: Any) -> None:
    outputs = displays(ip, "%%turn\nHello there")
    assert len(outputs) == 1 and not outputs[0]["update"]
    data = outputs[0]["data"]
    reply = ip.user_ns["_"]
    assert set(data) == {"text/html", "text/plain"}  # no Markdown form: see test_markdown.py
    assert data["text/html"].startswith("<p><strong>echo</strong> (offline test model) received 1 message.")
    assert data["text/html"].endswith(
        f'<p class="slotmagic-footer"><em>slot default · turn 1 · {reply.usage.input_tokens} in / '
        f"{reply.usage.output_tokens} out · echo</em></p>\n"
    )
    assert data["text/plain"].endswith(
        f"[slot default · turn 1 · {reply.usage.input_tokens} in / {reply.usage.output_tokens} out · echo]"
    )
    assert outputs[0]["metadata"]["slotmagic"] == {
        "session": session(ip).session_id,
        "slot": "default",
        "turn": 1,
        "model": "echo",
        "replayed": False,
    }


def test_reply_is_the_cells_value(ip: Any) -> None:
    ip.run_cell("%%turn\nHello", store_history=True)
    ip.run_cell("reply = _")
    reply = ip.user_ns["reply"]
    assert reply.text.endswith("last user message: Hello")
    assert (reply.slot, reply.turn) == ("default", 1)
    assert reply.text == session(ip).messages()[-1].content


def test_options_reach_the_request(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from slotmagic.providers._echo import EchoProvider

    requests: list[ChatRequest] = []
    real_stream = EchoProvider.stream

    def recording(self: EchoProvider, request: ChatRequest) -> Iterator[StreamEvent]:
        requests.append(request)
        return real_stream(self, request)

    monkeypatch.setattr(EchoProvider, "stream", recording)
    ip.run_cell('%%turn --system "You are a \\"careful\\" clerk." --model echo --temperature 0.2 --max-tokens 50\nHi')
    reply = ip.user_ns["_"]
    assert 'system prompt: You are a "careful" clerk.' in reply.text
    assert (requests[0].temperature, requests[0].max_tokens) == (0.2, 50)
    assert requests[0].messages[0].content == 'You are a "careful" clerk.'


def test_slot_option_leaves_the_current_slot(ip: Any) -> None:
    ip.run_cell("%slot create side --no-switch")
    ip.run_cell("%%turn --slot side\nOn the side")
    assert session(ip).current_slot == "default"
    assert session(ip).messages("side")[0].content == "On the side"
    assert session(ip).messages("default") == []


def test_no_stream_and_streaming_off_show_one_output(ip: Any) -> None:
    ip.run_cell("%config SlotMagic.stream_throttle = 0")
    assert len(displays(ip, "%%turn --no-stream\nHi")) == 1
    ip.run_cell("%config SlotMagic.stream = False")
    assert len(displays(ip, "%%turn\nHi")) == 1


def test_a_malformed_model_is_refused_when_set(ip: Any, caplog: pytest.LogCaptureFixture) -> None:
    ip.run_cell("%config SlotMagic.model = 'gpt'")
    assert "model 'gpt' names no provider; write provider:model, e.g. openai:gpt-4o-mini" in caplog.text
    assert session(ip).model == "echo"  # the earlier model stays
    ip.run_cell("%%turn\nHi")
    assert session(ip).history.turns()[0].info.model == "echo"


def test_turn_help_needs_no_body_and_no_model(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%config SlotMagic.model = 'gpt'")  # refused: no turn could run
    ip.run_cell("%%turn --help")
    assert "usage: %%turn" in capsys.readouterr().out
    ip.run_cell("%%turn --help\n\n")
    assert "usage: %%turn" in capsys.readouterr().out
    with pytest.raises(UsageError, match=r"^the turn is empty: write the message to send to the model$"):
        ip.run_cell("%%turn --slot default")


def test_missing_api_key_is_a_usage_error(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UsageError, match=r"^no API key for openai: set the OPENAI_API_KEY environment variable"):
        ip.run_cell("%%turn --model openai:gpt-4o-mini\nHi")


def test_mistakes_in_turn_cells(ip: Any) -> None:
    with pytest.raises(UsageError, match=r"^the turn is empty: write the message to send to the model$"):
        ip.run_cell("%%turn\n  \n")
    with pytest.raises(UsageError, match=r"^%%turn: argument --max-tokens: expected a whole number >= 1, got 0"):
        ip.run_cell("%%turn --max-tokens 0\nHi")
    with pytest.raises(UsageError, match=r"^%%turn: argument --temperature: expected a number >= 0, got -0.5"):
        ip.run_cell("%%turn --temperature -0.5\nHi")
    with pytest.raises(UsageError, match=r"^%%turn: argument --temperature: expected a number, got 'warm'"):
        ip.run_cell("%%turn --temperature warm\nHi")
    with pytest.raises(UsageError, match=r"^no slot 'nope' in this session"):
        ip.run_cell("%%turn --slot nope\nHi")
    ip.run_cell("%slot create ro --mode readonly --no-switch")
    with pytest.raises(UsageError, match=r"^slot 'ro' is readonly; derive a writable slot"):
        ip.run_cell("%%turn --slot ro\nHi")


# -- re-run cells ----------------------------------------------------------------------------


def test_rerun_unchanged_cell_replays_without_the_model(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ip.run_cell("%%turn\nQuestion", cell_id="cell-1")
    first = ip.user_ns["_"]

    def no_model(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the model was called")

    monkeypatch.setattr("slotmagic.providers._echo.EchoProvider.stream", no_model)
    outputs = displays(ip, "%%turn\nQuestion", cell_id="cell-1")
    again = ip.user_ns["_"]
    assert again.replayed and again.text == first.text and again.turn == 1
    assert "replayed from the store, no model call" in outputs[0]["data"]["text/plain"]
    assert outputs[0]["metadata"]["slotmagic"]["replayed"] is True
    assert len(session(ip).messages()) == 2


def test_edited_cell_forks_a_sibling_branch(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%%turn\nIntro", cell_id="c0")
    ip.run_cell("%%turn\nQuestion", cell_id="c1")
    ip.run_cell("%%turn\nFollow-up", cell_id="c2")
    outputs = displays(ip, "%%turn\nBetter question", cell_id="c1")
    assert session(ip).current_slot == "default.2"
    assert "edited: new branch default.2 from default before turn 2" in outputs[0]["data"]["text/plain"]
    assert [m.content for m in session(ip).messages("default") if m.role == "user"] == [
        "Intro",
        "Question",
        "Follow-up",
    ]
    assert [m.content for m in session(ip).messages("default.2") if m.role == "user"] == ["Intro", "Better question"]
    capsys.readouterr()
    ip.run_cell("%slot list")
    assert "default.2" in capsys.readouterr().out


def test_rerun_flag_forks_an_unchanged_cell(ip: Any) -> None:
    ip.run_cell("%%turn\nQuestion", cell_id="c1")
    ip.run_cell("%%turn --rerun\nQuestion", cell_id="c1")
    assert session(ip).current_slot == "default.2" and not ip.user_ns["_"].replayed


def test_without_cell_id_turns_append(ip: Any) -> None:
    ip.run_cell("%%turn\nQuestion")
    ip.run_cell("%%turn\nQuestion")
    assert len(session(ip).history.turns()) == 2


# -- streaming and interrupts ------------------------------------------------------------------


def test_long_reply_costs_a_bounded_number_of_updates(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ~10,000-token reply arrives as ~10,000 deltas; with a clock that advances 1 ms per
    delta (10 s in all) and a 0.25 s throttle, the display is updated about 40 times."""
    clock = itertools.count(step=0.001)
    monkeypatch.setattr("slotmagic._magics.display.monotonic", lambda: next(clock))
    ip.run_cell("%config SlotMagic.stream_throttle = 0.25")
    ip.run_cell("%config SlotMagic.context_windows = {'echo': 200_000}")  # echo's own 8k would refuse it
    words = " ".join(f"word{i}" for i in range(10_000))
    outputs = displays(ip, f"%%turn\n{words}")
    reply = ip.user_ns["_"]
    assert reply.usage.output_tokens >= 10_000
    deltas = len(reply.text.split())
    bound = deltas * 0.001 / 0.25 + 2  # one per throttle period, the first display, the final update
    assert len(outputs) <= bound
    assert sum(o["update"] for o in outputs) >= 2  # it did stream
    assert outputs[-1]["data"]["text/plain"].startswith(reply.text)  # the last update is complete
    assert outputs[-1]["update"]


class InterruptedProvider:
    """A model whose reply is cut by Ctrl-C after a few words."""

    name = "interrupted"

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        yield TextDelta("Partial ")
        yield TextDelta("answer ")
        raise KeyboardInterrupt

    async def astream(self, request: ChatRequest) -> Any:  # not used here
        raise NotImplementedError

    def close(self) -> None:
        pass


def test_interrupt_leaves_the_slot_as_it_was(
    ip: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ip.run_cell("%%turn\nFirst", cell_id="c1")
    before = session(ip).messages()
    monkeypatch.setattr("slotmagic.providers._echo.EchoProvider.stream", InterruptedProvider().stream)
    capsys.readouterr()
    with pytest.raises(KeyboardInterrupt):
        ip.run_cell("%%turn\nSecond")
    assert "interrupted: nothing was stored, slot 'default' is as it was before the turn" in capsys.readouterr().err
    assert session(ip).messages() == before
    # An edited cell interrupted before its fork was stored leaves no branch either.
    with pytest.raises(KeyboardInterrupt):
        ip.run_cell("%%turn\nFirst, edited", cell_id="c1")
    assert [s.id for s in session(ip).list_slots()] == ["default"] and session(ip).current_slot == "default"


def test_footer_numbers_are_the_stored_turns(ip: Any) -> None:
    ip.run_cell("%%turn\nHi")
    assert ip.user_ns["_"].usage == session(ip).history.turns()[0].info.usage


@pytest.mark.parametrize(
    ("usd", "shown"), [(0.0, "$0.0000"), (0.0000048, "<$0.0001"), (0.00012, "$0.0001"), (1.23456, "$1.2346")]
)
def test_cost_in_the_footer(usd: float, shown: str) -> None:
    from slotmagic._magics.display import format_cost

    assert format_cost(usd) == shown


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("<img src=x onerror=alert(1)>", "<p>&lt;img src=x onerror=alert(1)&gt;</p>"),
        ("a <script>x</script> b", "<p>a &lt;script&gt;x&lt;/script&gt; b</p>"),
        ("code `<b>` stays", "<p>code <code>&lt;b&gt;</code> stays</p>"),
        ("```html\n<img src=x>\n```\nthen <i>", '<pre><code class="language-html">&lt;img src=x&gt;\n</code></pre>'),
        ("**bold** and 3 < 4", "<p><strong>bold</strong> and 3 &lt; 4</p>"),
        # What the per-line guess at code spans let through (issue 26)
        ("\\`<img src=x onerror=alert(1)>`", "<p>`&lt;img src=x onerror=alert(1)&gt;`</p>"),
        ("``<img src=x onerror=alert(1)>`", "<p>``&lt;img src=x onerror=alert(1)&gt;`</p>"),
        ("`\na` <img src=x onerror=alert(1)> `b", "<p><code> a</code> &lt;img src=x onerror=alert(1)&gt; `b</p>"),
        ("[a](javascript:alert(1))", "<p>[a](javascript:alert(1))</p>"),
    ],
)
def test_replies_are_shown_rendered_never_as_html(text: str, shown: str) -> None:
    from slotmagic._magics.display import bundle

    data = bundle(text, "footer")
    assert shown in data["text/html"] and "text/markdown" not in data
    assert data["text/plain"].startswith(text)  # the plain form is the text itself
