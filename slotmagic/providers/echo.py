"""``echo``: an offline, deterministic stand-in for a model.

It replies with what it was sent: how many messages, the first line of the system prompt,
and the last user message. Tutorials and tests run on it; it is not a real model.

Asked for a compaction summary (a request whose system prompt starts with slotmagic's
compaction marker), it answers in the requested format with a summary made from the
transcript's user messages, so compaction works offline end to end.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator

from ..core.compaction import COMPACTION_MARKER
from ..core.messages import Message
from ..core.tokens import estimate_message_tokens, estimate_text_tokens
from .base import ChatRequest, Completion, StreamEvent, TextDelta, Usage

_PIECES = re.compile(r"\S+\s*|\s+")


def echo_summary(transcript: str) -> str:
    """A summary in the compaction format: the user's questions as topics."""
    lines = transcript.splitlines()
    questions = [line[len("[user] ") :] for line in lines if line.startswith("[user] ")]
    earlier = next(
        (line[len("[earlier key points] ") :] for line in lines if line.startswith("[earlier key points] ")), None
    )
    topics = list(json.loads(earlier).get("topics", [])) if earlier else []
    topics = [*topics, *(" ".join(q.split()[:8]) for q in questions)][-12:]
    card = {"topics": topics, "decisions": [], "open_questions": topics[-1:], "facts": []}
    text = f"The user asked {len(questions)} question{'s' if len(questions) != 1 else ''}"
    text += f", the last about {topics[-1]!r}." if topics else "."
    return f"<card>{json.dumps(card, ensure_ascii=False)}</card>\n<summary>{text}</summary>"


def echo_reply(messages: tuple[Message, ...] | list[Message]) -> str:
    if messages and messages[0].role == "system" and messages[0].content.startswith(COMPACTION_MARKER):
        return echo_summary(messages[-1].content)
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
            input_tokens=sum(m.tokens or estimate_message_tokens(m) for m in request.messages),
            output_tokens=estimate_text_tokens(text),
        )
        yield Completion(Message.assistant(text), usage, "stop", "echo")

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        for event in self.stream(request):
            yield event

    def close(self) -> None:
        pass
