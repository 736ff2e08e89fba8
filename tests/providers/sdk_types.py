"""Request bodies checked against the official SDKs' request types (``openai``, ``anthropic``):
every key is one the SDK's ``create`` takes, and every value has the shape its TypedDict says
(pydantic validates the TypedDicts). Built once per process: the SDKs take seconds to import."""

from __future__ import annotations

import functools
import typing
from collections.abc import Mapping
from typing import Any


@functools.cache
def _adapter(kind: str) -> tuple[Any, frozenset[str]]:
    from pydantic import TypeAdapter

    if kind == "chat":
        from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming as made
    elif kind == "responses":
        from openai.types.responses.response_create_params import ResponseCreateParamsStreaming as made
    else:
        from anthropic.types.message_create_params import MessageCreateParamsStreaming as made
    return TypeAdapter(made), frozenset(typing.get_type_hints(made))


def check_body(kind: str, body: Mapping[str, Any]) -> None:
    """``kind``: ``chat`` (OpenAI Chat Completions), ``responses`` (OpenAI Responses) or
    ``messages`` (Anthropic Messages). AssertionError naming what the SDK would not take."""
    adapter, keys = _adapter(kind)
    unknown = sorted(set(body) - keys)
    assert not unknown, f"keys the {kind} SDK does not take: {unknown}"
    adapter.validate_python(dict(body))
