"""``echo``: an offline, deterministic stand-in for a model.

It replies with what it was sent: how many messages, the first line of the system prompt,
and the last user message. Tutorials and tests run on it; it is not a real model.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator

from ..core.messages import Message
from ..core.tokens import estimate_message_tokens, estimate_text_tokens
from .base import ChatRequest, Completion, StreamEvent, TextDelta, Usage

_PIECES = re.compile(r"\S+\s*|\s+")


def echo_reply(messages: tuple[Message, ...] | list[Message]) -> str:
    system = next((m.content for m in messages if m.role == "system"), None)
    last_user = next((m.content for m in reversed(messages) if m.role == "user"), None)
    first_line = system.strip().splitlines()[0] if system and system.strip() else None
    count = len(messages)
    return (
        f"**echo** (offline test model) received {count} message{'s' if count != 1 else ''}.\n"
        f"- system prompt: {first_line if first_line is not None else '(none)'}\n"
        f"- last user message: {last_user if last_user is not None else '(none)'}"
    )


class EchoProvider:
    name = "echo"

    def __init__(self, settings: object = None, *, name: str = "echo", registry: object = None) -> None:
        self.name = name  # settings and registry are taken, as by every registered provider, and unused

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        text = echo_reply(request.messages)
        for piece in _PIECES.findall(text):  # word by word, like a real stream
            yield TextDelta(piece)
        usage = Usage(
            input_tokens=sum(estimate_message_tokens(m) for m in request.messages),
            output_tokens=estimate_text_tokens(text),
        )
        yield Completion(Message.assistant(text), usage, "stop", "echo")

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        for event in self.stream(request):
            yield event

    def close(self) -> None:
        pass
