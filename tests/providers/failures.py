"""Every documented way a provider's reply can fail, as wire-server scripts, for both protocols.

``FAILURES`` maps a name to a :class:`Failure`: the responses a server gives to one turn's
requests (retries included) and the error the turn must raise. ``echo`` is text the server
quotes back where a real one would (error bodies, error events, a broken event): tests put
secrets in it. The scripts assume :data:`STORM_SETTINGS`-like limits: ``max_retries`` as
given, ``read_timeout`` well under ``PAUSE``, ``turn_timeout`` well under the keep-alive
stream, ``max_reply_bytes`` well under the oversize reply.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slotmagic._errors import (
    MalformedReply,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeout,
    RateLimited,
    ReplyTooLarge,
    StreamInterrupted,
)
from slotmagic.providers import ProviderSettings

from .wire_server import (
    DROP,
    Pause,
    Repeat,
    an_event,
    an_start,
    an_text_block,
    an_text_stream,
    json_response,
    oa_chunk,
    oa_text_stream,
    sse_response,
)

Responses = list[list[Any]]  # one per request of the turn

PAUSE = 3.0  # how long a "read timeout" server stays silent
KEEPALIVE = Repeat(b": keep-alive\n\n", 100, pause=0.05)  # 5 s of comments, each well within read_timeout
# The read and turn limits the failures that wait on a clock are run with (well under PAUSE and
# the keep-alive stream); every other reply gets limits a busy machine never reaches, so that no
# outcome but a timeout's depends on how fast the machine is.
STALL_TIMEOUTS = {"read_timeout": 0.3, "turn_timeout": 0.8}
RELAXED_TIMEOUTS = {"read_timeout": 30.0, "turn_timeout": 60.0}


def timed_for(settings: ProviderSettings, failure: Failure | None = None) -> ProviderSettings:
    """``settings`` with the short limits when ``failure`` is a timeout, else relaxed ones."""
    stalls = failure is not None and failure.error is ProviderTimeout
    return settings.replace(**(STALL_TIMEOUTS if stalls else RELAXED_TIMEOUTS))


def success(protocol: str, text: str) -> list[str]:
    """A whole reply of ``text`` (in two pieces) in ``protocol``'s wire format."""
    half = len(text) // 2
    if protocol == "openai":
        return oa_text_stream(text[:half], text[half:])
    return an_text_stream(text[:half], text[half:])


def first_events(protocol: str) -> list[str]:
    """The start of a reply, with some text in it."""
    return oa_text_stream("partial ", "text")[:2] if protocol == "openai" else an_text_stream("partial text")[:4]


def error_body(protocol: str, echo: str, kind: str) -> dict[str, Any]:
    if protocol == "openai":
        return {"error": {"message": f"{kind}: {echo}", "type": kind, "code": None}}
    return {"type": "error", "error": {"type": kind, "message": f"{kind}: {echo}"}}


def error_event(protocol: str, echo: str) -> list[str]:
    if protocol == "openai":
        return [
            *first_events(protocol),
            f"data: {json.dumps({'error': {'message': echo, 'type': 'server_error'}})}\n\n",
        ]
    return [
        an_start(),
        *an_text_block(0, "partial")[:2],
        an_event("error", error={"type": "overloaded_error", "message": echo}),
    ]


def malformed(protocol: str, echo: str) -> list[str]:
    broken = f'data: {{"choices": [{{"delta": "{echo}\n\n'
    return [*first_events(protocol), broken if protocol == "openai" else "event: content_block_delta\n" + broken]


def without_final_event(protocol: str) -> list[str]:
    if protocol == "openai":
        return oa_text_stream("partial", done=False)
    return an_text_stream("partial", stop=False)


def oversize(protocol: str) -> list[Any]:
    if protocol == "openai":
        piece = oa_chunk({"content": "x" * 2000}).encode()
    else:
        piece = an_event("content_block_delta", index=0, delta={"type": "text_delta", "text": "x" * 2000}).encode()
    return sse_response(first_events(protocol), finish=False, then=[Repeat(piece, 200)])  # ~400 KB


@dataclass(frozen=True)
class Failure:
    responses: Callable[[str, str, int], Responses]  # (protocol, echo, max_retries) -> responses
    error: type[ProviderError]


FAILURES: dict[str, Failure] = {
    "429 with Retry-After": Failure(
        lambda p, e, r: [json_response(429, error_body(p, e, "rate_limit_error"), {"retry-after": "0.01"})] * (r + 1),
        RateLimited,
    ),
    "429 without Retry-After": Failure(
        lambda p, e, r: [json_response(429, error_body(p, e, "rate_limit_error"))] * (r + 1), RateLimited
    ),
    "5xx": Failure(
        lambda p, e, r: [json_response(503 if p == "openai" else 529, error_body(p, e, "overloaded_error"))] * (r + 1),
        ProviderHTTPError,
    ),
    "4xx with error body": Failure(
        lambda p, e, r: [json_response(401, error_body(p, e, "authentication_error"))], ProviderHTTPError
    ),
    "error event mid-stream": Failure(lambda p, e, r: [sse_response(error_event(p, e))], ProviderHTTPError),
    "dropped connection mid-reply": Failure(
        lambda p, e, r: [sse_response(first_events(p), finish=False, then=[DROP])], StreamInterrupted
    ),
    "malformed event": Failure(lambda p, e, r: [sse_response(malformed(p, e))], MalformedReply),
    "stream without its final event": Failure(
        lambda p, e, r: [sse_response(without_final_event(p))], StreamInterrupted
    ),
    "read timeout": Failure(
        lambda p, e, r: [sse_response(first_events(p), finish=False, then=[Pause(PAUSE)])], ProviderTimeout
    ),
    "turn deadline": Failure(
        lambda p, e, r: [sse_response(first_events(p), finish=False, then=[KEEPALIVE])], ProviderTimeout
    ),
    "oversize reply": Failure(lambda p, e, r: [oversize(p)], ReplyTooLarge),
}

# Failures that a retry recovers from: the turn completes.
RECOVERIES: dict[str, Callable[[str, str, str], Responses]] = {
    "429 then success": lambda p, e, text: [
        json_response(429, error_body(p, e, "rate_limit_error"), {"retry-after": "0.01"}),
        sse_response(success(p, text)),
    ],
    "5xx then success": lambda p, e, text: [
        json_response(500, error_body(p, e, "api_error")),
        sse_response(success(p, text)),
    ],
}
