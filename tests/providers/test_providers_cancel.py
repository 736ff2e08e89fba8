"""Cancellation: an interrupt closes the HTTP response at once, and nothing is stored.

The server sends the start of a reply and then holds the connection open, watching for the
client to close it; ``closed_promptly`` allows a generous two seconds.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from slotmagic import Session
from slotmagic._core.messages import Message
from slotmagic.providers import ChatRequest, ProviderSettings, TextDelta
from slotmagic.providers._anthropic import AnthropicProvider
from slotmagic.providers._openai import OpenAIProvider

from .wire_server import HOLD, WireServer, an_text_stream, oa_text_stream, sse_response

HELLO = ChatRequest("some-model", (Message.user("Hello"),))


def closed_promptly(wire: WireServer) -> bool:
    return wire.client_closed.wait(2.0)


def hold_after_first_delta(wire: WireServer, protocol: str) -> None:
    events = oa_text_stream("first", "second")[:2] if protocol == "openai" else an_text_stream("first")[:4]
    wire.script(sse_response(events, finish=False, then=[HOLD]))


@pytest.fixture
def session(db_path: Path, settings: ProviderSettings) -> Iterator[Session]:
    with Session.open("cancel", db_path=db_path, model="openai:gpt-4o-mini", settings=settings) as s:
        yield s


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_closing_the_stream_closes_the_connection(wire: WireServer, settings: ProviderSettings, protocol: str) -> None:
    provider = OpenAIProvider(settings) if protocol == "openai" else AnthropicProvider(settings)
    hold_after_first_delta(wire, protocol)
    with closing(provider.stream(HELLO)) as events:  # type: ignore[type-var]
        assert next(events) == TextDelta("first")
        assert not wire.client_closed.is_set()
    assert closed_promptly(wire)


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_cancelling_the_async_task_closes_the_connection(
    wire: WireServer, settings: ProviderSettings, protocol: str
) -> None:
    provider = OpenAIProvider(settings) if protocol == "openai" else AnthropicProvider(settings)
    hold_after_first_delta(wire, protocol)

    async def main() -> None:
        first = asyncio.Event()

        async def consume() -> None:
            async for event in provider.astream(HELLO):
                if isinstance(event, TextDelta):
                    first.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(first.wait(), 5)
        task.cancel()  # the task is blocked reading the next event
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert closed_promptly(wire)


def test_keyboard_interrupt_in_the_consumer(wire: WireServer, session: Session) -> None:
    hold_after_first_delta(wire, "openai")
    with pytest.raises(KeyboardInterrupt):
        for _text in session.stream_turn("Hello"):
            raise KeyboardInterrupt  # Ctrl-C while the notebook renders the first piece
    assert closed_promptly(wire)
    assert session.messages() == [] and session.history.turns() == []


def test_leaving_a_with_block_closes_the_turn(wire: WireServer, session: Session) -> None:
    hold_after_first_delta(wire, "openai")
    with session.stream_turn("Hello") as stream:
        texts = iter(stream)  # still referenced after the block: only close() can end it
        assert next(texts) == "first"
    assert closed_promptly(wire)
    assert stream.reply is None
    assert session.messages() == []


def test_sigint_while_waiting_for_the_server(wire: WireServer, session: Session) -> None:
    """A real SIGINT delivered while the main thread is blocked reading the socket."""
    hold_after_first_delta(wire, "openai")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    main = threading.main_thread().ident
    assert main is not None and threading.get_ident() == main
    cancelled = threading.Event()

    def interrupt_once_the_server_holds() -> None:
        # Not a fixed delay: on a loaded machine the request may take longer than that to arrive.
        deadline = time.monotonic() + 10
        while not wire.requests and time.monotonic() < deadline and not cancelled.is_set():
            time.sleep(0.01)
        if not cancelled.wait(0.3):  # the first delta is read; the client now blocks in recv
            signal.pthread_kill(main, signal.SIGINT)

    sender = threading.Thread(target=interrupt_once_the_server_holds, daemon=True)
    try:
        sender.start()
        with pytest.raises(KeyboardInterrupt):
            session.submit_turn("Hello")
    finally:
        cancelled.set()
        sender.join()
        signal.signal(signal.SIGINT, previous)
    assert closed_promptly(wire)
    assert session.messages() == []


def test_cancelling_an_async_turn_stores_nothing(wire: WireServer, session: Session) -> None:
    hold_after_first_delta(wire, "anthropic")

    async def main() -> None:
        first = asyncio.Event()

        async def consume() -> None:
            async for _text in session.astream_turn("Hello", model="anthropic:claude-haiku-4-5"):
                first.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(first.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert closed_promptly(wire)
    assert session.messages() == []
