"""Limits on one reply that hold whatever the server does: the turn deadline (``turn_timeout``)
and the reply's size (``max_reply_bytes``), sync and async, each ending in a one-line error
with the connection closed."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc

import pytest

from slotmagic._core.messages import Message
from slotmagic._errors import ProviderHTTPError, ProviderTimeout, ReplyTooLarge
from slotmagic.providers import ChatRequest, ProviderSettings
from slotmagic.providers._anthropic import AnthropicProvider
from slotmagic.providers._openai import OpenAIProvider
from slotmagic.providers._sse import SSEReader
from slotmagic.providers._transport import MAX_ERROR_BODY

from .support import Drain, drain_async, drain_sync
from .wire_server import (
    END,
    Pause,
    Repeat,
    WireServer,
    an_text_stream,
    chunk,
    head,
    json_response,
    oa_chunk,
    oa_text_stream,
    sse_response,
)

HELLO = ChatRequest("gpt-4o-mini", (Message.user("Hello"),))
KEEPALIVE = b": keep-alive\n\n"


def provider_for(protocol: str, settings: ProviderSettings) -> OpenAIProvider | AnthropicProvider:
    return OpenAIProvider(settings) if protocol == "openai" else AnthropicProvider(settings)


def first_events(protocol: str) -> list[str]:
    return oa_text_stream("Hel", "lo")[:2] if protocol == "openai" else an_text_stream("Hello")[:4]


# -- turn_timeout -----------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_server_that_keeps_the_stream_alive_forever_hits_the_deadline(
    wire: WireServer, settings: ProviderSettings, drain: Drain, protocol: str
) -> None:
    """An SSE comment every 0.1 s resets the read timeout each time; the deadline still ends it."""
    provider = provider_for(protocol, settings.replace(read_timeout=2.0, turn_timeout=0.6))
    wire.script(sse_response(first_events(protocol), finish=False, then=[Repeat(KEEPALIVE, 100, pause=0.1)]))
    result = drain(provider, HELLO)
    assert isinstance(result.error, ProviderTimeout), result.error
    message = str(result.error)
    assert "no complete reply within 0.6 s (turn_timeout)" in message and "\n" not in message
    assert "partial reply was discarded" in message
    assert wire.send_failed.wait(2.0)  # the connection was closed: the server's next send failed
    provider.close()


@pytest.mark.parametrize("where", ["before the reply starts", "silent in the middle of the reply"])
def test_the_deadline_beats_a_longer_read_timeout(
    wire: WireServer, settings: ProviderSettings, drain: Drain, where: str
) -> None:
    provider = OpenAIProvider(settings.replace(read_timeout=5.0, turn_timeout=0.5))
    if where == "before the reply starts":
        wire.script([Pause(5)])
    else:  # sync: the watchdog shuts the socket; async: the read is awaited with a timeout
        wire.script(sse_response(first_events("openai"), finish=False, then=[Pause(5)]))
    result = drain(provider, HELLO)  # the read_timeout would have said so
    assert isinstance(result.error, ProviderTimeout) and "(turn_timeout)" in str(result.error), result.error
    provider.close()


def test_a_retry_that_would_pass_the_deadline_is_not_waited_for(
    wire: WireServer, settings: ProviderSettings, drain: Drain
) -> None:
    provider = OpenAIProvider(settings.replace(turn_timeout=1.0))
    busy = {"error": {"message": "busy", "type": "server_error"}}
    wire.script(json_response(503, busy, {"retry-after": "5"}))
    error = drain(provider, HELLO).error
    assert isinstance(error, ProviderHTTPError) and "would pass the turn_timeout of 1 s" in str(error)
    assert len(wire.requests) == 1
    provider.close()


@pytest.mark.parametrize("off", [0, None])
def test_turn_timeout_zero_or_none_is_no_limit(
    wire: WireServer, settings: ProviderSettings, drain: Drain, off: float | None
) -> None:
    provider = OpenAIProvider(settings.replace(read_timeout=1.0, turn_timeout=off))
    assert provider.settings.turn_timeout is None
    events = oa_text_stream("slow", " but whole")
    steps = sse_response(events[:2], finish=False, then=[Repeat(KEEPALIVE, 8, pause=0.1)])
    wire.script([*steps, *(chunk(e.encode()) for e in events[2:]), END])
    assert drain(provider, HELLO).completion.message.content == "slow but whole"
    provider.close()


def test_the_default_deadline() -> None:
    assert ProviderSettings().turn_timeout == 600.0


# -- max_reply_bytes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_reply_longer_than_max_reply_bytes_is_refused(
    wire: WireServer, settings: ProviderSettings, drain: Drain, protocol: str
) -> None:
    provider = provider_for(protocol, settings.replace(max_reply_bytes=8 * 1024))
    pieces = ["x" * 500] * 200  # 100 KB of text in many small events
    events = oa_text_stream(*pieces) if protocol == "openai" else an_text_stream(*pieces)
    wire.script(sse_response(events))
    result = drain(provider, HELLO)
    assert isinstance(result.error, ReplyTooLarge), result.error
    message = str(result.error)
    assert "max_reply_bytes (8 KiB)" in message and "\n" not in message
    assert sum(len(getattr(e, "text", "")) for e in result.events) < 8 * 1024  # it stopped there
    provider.close()


def test_a_reply_within_max_reply_bytes_is_whole(wire: WireServer, settings: ProviderSettings, drain: Drain) -> None:
    events = oa_text_stream("a" * 1000, "b" * 1000)
    size = len("".join(events).encode())
    provider = OpenAIProvider(settings.replace(max_reply_bytes=size))  # exactly the reply's size
    wire.script(sse_response(events, split=7))
    assert drain(provider, HELLO).completion.message.content == "a" * 1000 + "b" * 1000
    provider.close()


def giant_event(megabytes: int) -> list[object]:
    """One SSE ``data:`` line of ``megabytes`` MB, never held whole by the server either."""
    piece = b"x" * 65536
    start = b'data: {"choices": [{"index": 0, "delta": {"content": "'
    return [head(), chunk(oa_chunk({"role": "assistant"}).encode()), chunk(start), Repeat(piece, megabytes * 16)]


@pytest.mark.parametrize("consume", ["sync", "async"])
def test_one_giant_sse_line_stays_within_max_reply_bytes_of_memory(
    wire: WireServer, settings: ProviderSettings, consume: str
) -> None:
    """A 50 MB event used to cost ~200 MB (the line buffered whole, then copied as it was
    decoded). Read as it arrives and counted, it is refused at max_reply_bytes (16 MiB by
    default) with the memory held bounded by that, and the connection is closed."""
    provider = OpenAIProvider(settings.replace(read_timeout=10.0))
    assert provider.settings.max_reply_bytes == 16 * 1024 * 1024
    wire.script(giant_event(50))
    gc.collect()
    tracemalloc.start()
    try:
        result = (drain_sync if consume == "sync" else drain_async)(provider, HELLO)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(result.error, ReplyTooLarge), result.error
    assert peak < 28 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB"  # 16 MiB of reply and some slack (was ~55+)
    assert wire.send_failed.wait(5.0)  # the server could not send the rest: the connection is closed
    provider.close()


def test_a_huge_error_body_is_read_only_in_part(wire: WireServer, settings: ProviderSettings, drain: Drain) -> None:
    provider = OpenAIProvider(settings.replace(max_retries=0))
    body = [head(500, content_type="text/plain"), Repeat(b"e" * 65536, 160)]  # 10 MB of error text
    wire.script(body)
    error = drain(provider, HELLO).error
    assert isinstance(error, ProviderHTTPError) and error.status == 500 and "eeee" in str(error)
    assert len(str(error)) < 400
    provider.close()
    assert MAX_ERROR_BODY == 64 * 1024


# -- the line reader ------------------------------------------------------------------------------------


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"])
@pytest.mark.parametrize("size", [1, 2, 3, 5, 1000])
def test_the_reader_splits_lines_at_every_sse_line_end(ending: bytes, size: int) -> None:
    text = b"event: a\ndata: \xc3\xa9t\xc3\xa9\n\n: comment\ndata: two\ndata: lines\n\ndata: last\n\n"
    data = text.replace(b"\n", ending)
    reader = SSEReader(10_000, "test")
    events = []
    for i in range(0, len(data), size):
        events += reader.feed(data[i : i + size])
    events += reader.close()
    assert [(e.event, e.data) for e in events] == [("a", "été"), ("message", "two\nlines"), ("message", "last")]
    assert reader.total == len(data)


def test_the_reader_refuses_a_byte_past_its_limit() -> None:
    reader = SSEReader(10, "openai (h)")
    reader.feed(b"data: 1234")  # exactly 10 bytes: fine
    with pytest.raises(ReplyTooLarge, match=r"openai \(h\): the reply passed max_reply_bytes \(10 bytes\)"):
        reader.feed(b"\n")


def test_an_unterminated_last_event_is_not_dispatched() -> None:
    reader = SSEReader(1000, "test")
    assert reader.feed(b"data: complete\n\ndata: cut off") != []
    assert reader.close() == []  # the SSE rule: an event without its blank line is dropped


def test_async_cancellation_still_closes_with_a_deadline(wire: WireServer, settings: ProviderSettings) -> None:
    """With a deadline set, reads go through asyncio.wait_for; cancelling the task still
    closes the connection at once."""
    provider = OpenAIProvider(settings.replace(turn_timeout=30.0))
    wire.script(sse_response(first_events("openai"), finish=False, then=[Repeat(KEEPALIVE, 200, pause=0.05)]))

    async def main() -> None:
        first = asyncio.Event()

        async def consume() -> None:
            async for _event in provider.astream(HELLO):
                first.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(first.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert wire.send_failed.wait(30)
    provider.close()
