"""Fan-out over a real loopback HTTP server: columns run concurrently, within max_concurrency,
a 429 paces only its own provider, a failing column fails alone, and an interrupt stores nothing.

Each slot has a system prompt of its own, so the server can tell the concurrent requests apart
(``WireServer.route``). Concurrency is counted by the server (``most_in_flight``), never timed.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from slotmagic import Session
from slotmagic._core.slots import SlotConfig
from slotmagic._errors import ProviderHTTPError
from slotmagic.providers import ProviderSettings

from .wire_server import (
    HOLD,
    Pause,
    Until,
    WireServer,
    an_text_stream,
    json_response,
    oa_text_stream,
    sse_response,
)

SLOTS = ("alpha", "beta", "gamma")


def reply_when(ready: Callable[[], bool], text: str) -> list[object]:
    """A reply held until ``ready()``: what the other columns did meanwhile is counted."""
    return [Until(ready, timeout=10.0), *sse_response(oa_text_stream(text))]


@contextmanager
def fan_session(db_path: Path, settings: ProviderSettings) -> Iterator[Session]:
    with Session.open("fan", db_path=db_path, model="openai:gpt-4o-mini", settings=settings) as s:
        for slot in SLOTS:
            s.create_slot(slot, SlotConfig(system=f"You are {slot}."))
        s.switch_slot("default")
        yield s


@pytest.fixture
def session(db_path: Path, settings: ProviderSettings) -> Iterator[Session]:
    with fan_session(db_path, settings) as s:
        yield s


@pytest.fixture
def patient_session(db_path: Path, settings: ProviderSettings) -> Iterator[Session]:
    """As ``session``, but a held reply outlasts any wait for the test's interrupt or cancel: on
    a busy machine it can come seconds late, and a column timed out meanwhile ends the fan-out
    (which then stores the complete replies) before the interrupt reaches it."""
    with fan_session(db_path, settings.replace(read_timeout=120.0)) as s:
        yield s


def snapshot(session: Session) -> dict[str, list[str]]:
    return {s.id: [m.content for m in session.messages(s.id)] for s in session.list_slots()}


def test_three_replies_are_awaited_at_once(wire: WireServer, patient_session: Session) -> None:
    """Each reply is held until all three requests are in (or 10 s pass, as they never will be
    if the columns take turns): the server counts three in flight at once."""
    for slot in SLOTS:
        wire.route(f"You are {slot}.", reply_when(lambda: len(wire.requests) >= len(SLOTS), f"answer from {slot}"))
    patient_session.options.max_concurrency = 4
    result = patient_session.fan_out("Same question", slots=",".join(SLOTS))
    assert [result[s].text for s in SLOTS] == [f"answer from {s}" for s in SLOTS]
    assert all(patient_session.messages(s)[-1].content == f"answer from {s}" for s in SLOTS)
    assert wire.most_in_flight == 3


def test_max_concurrency_one_takes_them_one_at_a_time(wire: WireServer, session: Session) -> None:
    for slot in SLOTS:  # each reply waits a little, so a second request would have time to come in
        wire.route(f"You are {slot}.", [Pause(0.2), *sse_response(oa_text_stream(f"answer from {slot}"))])
    session.options.max_concurrency = 1
    result = session.fan_out("Same question", slots=",".join(SLOTS))
    assert [result[s].text for s in SLOTS] == [f"answer from {s}" for s in SLOTS]
    assert wire.most_in_flight == 1 and len(wire.requests) == 3


def test_a_column_that_gets_a_500_fails_alone(wire: WireServer, session: Session) -> None:
    wire.route("You are alpha.", sse_response(oa_text_stream("alpha says")))
    failure = json_response(500, {"error": {"message": "the GPU caught fire", "type": "server_error"}})
    wire.route("You are beta.", *[failure] * 4)  # the first try and every retry
    wire.route("You are gamma.", sse_response(oa_text_stream("gamma says")))
    before = snapshot(session)
    result = session.fan_out("Go", slots="alpha,beta,gamma")
    assert result["alpha"].text == "alpha says" and result["gamma"].text == "gamma says"
    error = result["beta"].error
    assert isinstance(error, ProviderHTTPError) and "HTTP 500" in str(error) and "GPU caught fire" in str(error)
    assert set(result.replies) == {"alpha", "gamma"} and set(result.errors) == {"beta"}
    after = snapshot(session)
    assert after["beta"] == before["beta"] == []  # the failed column stored nothing
    assert after["alpha"][-1] == "alpha says" and after["gamma"][-1] == "gamma says"
    assert "1 failed" in result.summary()


def test_ctrl_c_stops_every_column_and_stores_nothing(wire: WireServer, patient_session: Session) -> None:
    """A real SIGINT in the main thread while three replies stream: every connection closes
    and no slot changes, not even the ones whose reply was complete."""
    wire.route("You are alpha.", sse_response(oa_text_stream("done early")))
    for slot in ("beta", "gamma"):
        wire.route(f"You are {slot}.", sse_response(oa_text_stream("first", "second")[:2], finish=False, then=[HOLD]))
    before = snapshot(patient_session)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    main = threading.main_thread().ident
    assert main is not None and threading.get_ident() == main
    stop = threading.Event()

    def interrupt_when_all_three_are_in() -> None:
        deadline = time.monotonic() + 10
        while len(wire.requests) < 3 and time.monotonic() < deadline and not stop.is_set():
            time.sleep(0.01)
        if not stop.wait(0.3):
            signal.pthread_kill(main, signal.SIGINT)

    sender = threading.Thread(target=interrupt_when_all_three_are_in, daemon=True)
    try:
        sender.start()
        with pytest.raises(KeyboardInterrupt):
            patient_session.fan_out("Go", slots="alpha,beta,gamma")
    finally:
        stop.set()
        sender.join()
        signal.signal(signal.SIGINT, previous)
    deadline = time.monotonic() + 30
    while len(wire.closed_at) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(wire.closed_at) == 2  # both held connections were closed by the client
    assert snapshot(patient_session) == before


def test_cancelling_the_async_form_stores_nothing(wire: WireServer, patient_session: Session) -> None:
    for slot in SLOTS:
        wire.route(f"You are {slot}.", sse_response(oa_text_stream("first", "second")[:2], finish=False, then=[HOLD]))
    before = snapshot(patient_session)

    async def main() -> None:
        task = asyncio.create_task(patient_session.afan_out("Go", slots="all"))
        while len(wire.requests) < 4:  # default, alpha, beta, gamma
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert wire.client_closed.wait(30)
    assert snapshot(patient_session) == before


def test_a_429_paces_only_its_own_provider(wire: WireServer, session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two slots x (openai, anthropic), two places: openai's first request gets a 429 asking
    for 2 s. The anthropic columns go on meanwhile (both are asked before openai is asked
    again); the other openai column waits out the same 2 s instead of earning a 429 of its own.
    The anthropic replies are held until the fan-out has taken in the 429, so that the other
    openai column cannot be asked before it."""
    from slotmagic.providers import _pacing

    backed_off = threading.Event()
    original = _pacing.Pacer.backoff

    async def backoff(self: _pacing.Pacer, provider: str, seconds: float) -> None:
        backed_off.set()  # the wait is now known to every column of that provider
        await original(self, provider, seconds)

    monkeypatch.setattr(_pacing.Pacer, "backoff", backoff)
    limited = json_response(429, {"error": {"message": "slow down", "type": "rate_limit"}}, {"retry-after": "2"})
    wire.route("gpt-4o-mini", limited, *[sse_response(oa_text_stream("openai says"))] * 2)
    anthropic_reply = [Until(backed_off.is_set, timeout=10.0), *sse_response(an_text_stream("anthropic says"))]
    wire.route("claude-sonnet-4-5", anthropic_reply, anthropic_reply)
    session.options.max_concurrency = 2
    result = session.fan_out("Go", slots="alpha,beta", models="openai:gpt-4o-mini,anthropic:claude-sonnet-4-5")
    assert set(result.replies) == {
        "alpha.gpt-4o-mini", "alpha.claude-sonnet-4-5", "beta.gpt-4o-mini", "beta.claude-sonnet-4-5",
    }  # fmt: skip
    order = ["openai" if r.path.endswith("/chat/completions") else "anthropic" for r in wire.requests]
    assert order.count("openai") == 3 and order[-2:] == ["openai", "openai"]  # not stalled by openai's wait
    openai = [r.at for r in wire.requests if r.path.endswith("/chat/completions")]
    assert all(at - openai[0] >= 1.9 for at in openai[1:])  # the other column waited out the same 2 s
    assert session.slot("alpha.gpt-4o-mini").meta.parent_id == "alpha"
    assert session.messages("alpha") == []  # the model columns went to new branches


def test_from_inside_a_running_event_loop(wire: WireServer, session: Session) -> None:
    """A notebook cell runs inside the kernel's loop: the sync form must not need that loop."""
    for slot in SLOTS:
        wire.route(f"You are {slot}.", sse_response(oa_text_stream(f"{slot} ok")))

    async def cell() -> list[str]:
        result = session.fan_out("Go", slots="alpha,beta,gamma")
        return [c.text for c in result.values()]

    assert asyncio.run(cell()) == ["alpha ok", "beta ok", "gamma ok"]


def test_ctrl_c_in_a_fan_out_cell(
    ip: Any, wire: WireServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same through %%turn in a real IPython shell: the cell stops with one line, the
    columns say they were interrupted, and no slot changes."""
    from slotmagic._magics import SlotMagic

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    ip.run_cell(f'%config SlotMagic.openai_base_url = "{wire.url}/v1"')
    ip.run_cell('%config SlotMagic.model = "openai:gpt-4o-mini"\n%config SlotMagic.widgets = False')
    ip.run_cell("%slot create a --no-switch\n%slot create b --no-switch")
    session = next(c for c in ip.configurables if isinstance(c, SlotMagic)).session()
    wire.script(*[sse_response(oa_text_stream("first", "second")[:2], finish=False, then=[HOLD])] * 2)
    before = snapshot(session)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    main = threading.main_thread().ident
    assert main is not None
    stop = threading.Event()

    def interrupt() -> None:
        deadline = time.monotonic() + 10
        while len(wire.requests) < 2 and time.monotonic() < deadline and not stop.is_set():
            time.sleep(0.01)
        if not stop.wait(0.3):
            signal.pthread_kill(main, signal.SIGINT)

    sender = threading.Thread(target=interrupt, daemon=True)
    try:
        sender.start()
        with pytest.raises(KeyboardInterrupt):
            ip.run_cell("%%turn --slots a,b\nGo")
    finally:
        stop.set()
        sender.join()
        signal.signal(signal.SIGINT, previous)
    assert "interrupted: every column stopped, nothing was stored" in capsys.readouterr().err
    assert snapshot(session) == before


def test_the_columns_show_while_the_replies_are_awaited_and_stream(
    ip: Any, wire: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through %%turn: the columns appear before any reply has begun, fill in as the replies
    stream, and end with what was stored; updates come at the throttled rate, not per piece.
    The server holds each reply until the screen shows what the test looks for."""
    from IPython.core.displaypub import DisplayPublisher

    shown: list[str] = []

    class Recording(DisplayPublisher):
        def publish(self, data: Any, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
            shown.append(data["text/plain"])

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    ip.run_cell(f'%config SlotMagic.openai_base_url = "{wire.url}/v1"')
    ip.run_cell('%config SlotMagic.model = "openai:gpt-4o-mini"\n%config SlotMagic.widgets = False')
    ip.run_cell("%config SlotMagic.stream_throttle = 0.2")
    ip.run_cell("%slot create a --no-switch\n%slot create b --no-switch")
    steps = sse_response(oa_text_stream("one", " two", " three", " four"))  # head, role, pieces, rest
    for _ in range(2):
        wire.script(
            [
                Until(lambda: bool(shown)),  # the columns are shown before either reply begins
                *steps[:4],
                Until(lambda: any("one two" in text for text in shown)),  # and while they stream
                *steps[4:],
            ]
        )
    original, ip.display_pub = ip.display_pub, Recording(shell=ip)
    try:
        ip.run_cell("%%turn --slots a,b\nCount")
    finally:
        ip.display_pub = original
    assert "…" in shown[0] and "one" not in shown[0]  # before either reply began
    assert any("one two" in text and "four" not in text for text in shown)  # mid-stream
    assert "one two three four" in shown[-1] and "2 of 2 replies" in shown[-1]
    assert len(shown) < 20  # at one update per 0.2 s, not one per piece and column


def test_a_model_branch_goes_on_with_its_model(wire: WireServer, session: Session) -> None:
    """A turn on ``default.claude-sonnet-4-5`` after the fan-out asks that model, not the
    session's, and so does an edit fork of it; its budget is counted for that model too."""
    wire.route("claude-sonnet-4-5", *[sse_response(an_text_stream("anthropic says"))] * 2)
    session.fan_out("Go", models="anthropic:claude-sonnet-4-5")
    assert session.model == "openai:gpt-4o-mini"
    assert session.slot("default.claude-sonnet-4-5").config.model == "anthropic:claude-sonnet-4-5"
    reply = session.submit_turn("And then?", slot="default.claude-sonnet-4-5")
    assert reply.model == "anthropic:claude-sonnet-4-5" and reply.text == "anthropic says"
    assert [r.path.endswith("/messages") for r in wire.requests] == [True, True]
    assert session.budget("default.claude-sonnet-4-5").model == "anthropic:claude-sonnet-4-5"
    assert session.budget("default").model == "openai:gpt-4o-mini"
    session.switch_slot("default.claude-sonnet-4-5")
    session.derive_slot("claude-side")
    assert session.slot("claude-side").config.model == "anthropic:claude-sonnet-4-5"  # a branch of it too
