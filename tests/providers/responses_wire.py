"""OpenAI Responses API streams for the loopback server (tests/providers/wire_server.py), each
event checked against the official SDK's ``ResponseStreamEvent`` types before it is sent, so
what the tests feed slotmagic is what the API documents."""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Sequence
from typing import Any

from .wire_server import sse_response

_sequence = itertools.count()


@functools.cache
def _events() -> Any:
    from openai.types.responses import ResponseStreamEvent
    from pydantic import TypeAdapter

    return TypeAdapter(ResponseStreamEvent)


def event(kind: str, **fields: Any) -> str:
    data = {"type": kind, "sequence_number": next(_sequence), **fields}
    _events().validate_python(data)  # the documented shape, or the test fails here
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def response(
    status: str = "in_progress", *, output: Sequence[Any] = (), usage: Any = None, **extra: Any
) -> dict[str, Any]:
    made: dict[str, Any] = {
        "id": "resp_67ccd2bed1ec8190b14f964abc054267",
        "object": "response",
        "created_at": 1741476542,
        "status": status,
        "model": "o3-pro-2025-06-10",
        "output": list(output),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "store": False,
        **extra,
    }
    if usage is not None:
        made["usage"] = usage
    return made


def usage(input_tokens: int = 40, output_tokens: int = 12, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


def message_item(text: str, item_id: str = "msg_1", status: str = "completed") -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else [],
    }


def reasoning_item(summary: str, item_id: str = "rs_1", encrypted: str = "gAAAAABo-encrypted") -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": summary}] if summary else [],
        "encrypted_content": encrypted,
        "status": "completed",
    }


def call_item(call_id: str, name: str, arguments: str, item_id: str = "fc_1") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


def text_stream(*pieces: str, reasoning: str | None = None, end: str = "response.completed", **kw: Any) -> list[Any]:
    """A reply: (a reasoning item,) a message whose text arrives in ``pieces``, the end event."""
    events = [event("response.created", response=response()), event("response.in_progress", response=response())]
    output: list[Any] = []
    index = 0
    if reasoning is not None:
        item = reasoning_item(reasoning)
        events.append(event("response.output_item.added", output_index=0, item={**item, "status": "in_progress"}))
        events.append(event("response.output_item.done", output_index=0, item=item))
        output.append(item)
        index = 1
    text = "".join(pieces)
    events.append(event("response.output_item.added", output_index=index, item=message_item("", status="in_progress")))
    for piece in pieces:
        events.append(
            event(
                "response.output_text.delta",
                item_id="msg_1",
                output_index=index,
                content_index=0,
                delta=piece,
                logprobs=[],
            )
        )
    events.append(
        event("response.output_text.done", item_id="msg_1", output_index=index, content_index=0, text=text, logprobs=[])
    )
    events.append(event("response.output_item.done", output_index=index, item=message_item(text)))
    output.append(message_item(text))
    status = "completed" if end == "response.completed" else "incomplete"
    extra = {"incomplete_details": {"reason": "max_output_tokens"}} if status == "incomplete" else {}
    events.append(event(end, response=response(status, output=output, usage=usage(**kw), **extra)))
    return sse_response(events)


def call_stream(*calls: tuple[str, str, str], reasoning: str | None = None) -> list[Any]:
    """A reply calling tools: (a reasoning item,) function calls whose arguments stream in two pieces."""
    events = [event("response.created", response=response())]
    output: list[Any] = []
    if reasoning is not None:
        item = reasoning_item(reasoning)
        events.append(event("response.output_item.done", output_index=0, item=item))
        output.append(item)
    for n, (call_id, name, arguments) in enumerate(calls):
        index, item_id = len(output), f"fc_{n}"
        events.append(
            event(
                "response.output_item.added",
                output_index=index,
                item={**call_item(call_id, name, "", item_id), "status": "in_progress"},
            )
        )
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            events.append(
                event("response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=piece)
            )
        events.append(
            event(
                "response.function_call_arguments.done",
                item_id=item_id,
                output_index=index,
                arguments=arguments,
                name=name,
            )
        )
        item = call_item(call_id, name, arguments, item_id)
        events.append(event("response.output_item.done", output_index=index, item=item))
        output.append(item)
    events.append(event("response.completed", response=response("completed", output=output, usage=usage(80, 20))))
    return sse_response(events)


def failed_stream(code: str, message: str) -> list[Any]:
    failed = response("failed", error={"code": code, "message": message})
    return sse_response([event("response.created", response=response()), event("response.failed", response=failed)])
