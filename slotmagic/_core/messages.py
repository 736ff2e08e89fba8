"""Chat messages: the one message type every layer speaks.

Providers map these to and from their wire formats; the store keeps one row per message, with
everything beyond role and content in its ``extra`` JSON (:meth:`Message.extra`, read back by
:func:`fields_from_extra`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .._errors import ConfigError
from .checks import check_text
from .images import Image, Part, check_images, from_parts, parts

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")
ThinkingKind = Literal["thinking", "redacted_thinking", "block"]
THINKING_KINDS: tuple[ThinkingKind, ...] = ("thinking", "redacted_thinking", "block")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call requested by the assistant; ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str = "{}"

    def __post_init__(self) -> None:
        for what in ("id", "name", "arguments"):
            check_text(getattr(self, what), f"a tool call's {what}")

    def parsed_arguments(self) -> Any:
        return json.loads(self.arguments or "{}")


@dataclass(frozen=True, slots=True)
class Thinking:
    """Reasoning a model produced beside its reply, kept so it can be sent back unchanged.

    Anthropic's extended thinking: a ``thinking`` block (its ``text`` and the ``signature``
    that proves it unmodified) or a ``redacted_thinking`` block (opaque ``data``). The API
    wants them back, byte for byte and before the reply's text and tool calls, in the
    assistant message that made them (a 400 otherwise, once tools are involved).
    ``provider`` names the wire format the block belongs to: only that provider is sent it,
    the others leave it out. ``after_calls`` is how many of the message's tool calls came
    before it in the reply (interleaved thinking); 0, the usual case, opens the message.
    It is not the reply: ``Message.content`` holds the text only.

    Kind ``block``: any other content block the API returned beside text, tool calls and
    thinking, kept whole so it can be passed back (Anthropic's ``server_tool_use`` and
    ``web_search_tool_result`` of its server tools, ``compaction``): ``data`` is the block's
    JSON, ``text`` what a person (or another provider) is shown of it, and ``at`` how many
    characters of ``content`` came before it in the reply.
    """

    kind: ThinkingKind
    text: str = ""
    signature: str | None = None
    data: str | None = None
    provider: str = "anthropic"
    after_calls: int = 0
    at: int = 0

    def __post_init__(self) -> None:
        if self.kind not in THINKING_KINDS:
            raise ValueError(f"unknown thinking kind {self.kind!r}; use one of {', '.join(THINKING_KINDS)}")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind, "provider": self.provider}
        if self.kind == "thinking":
            out["thinking"] = self.text
        if self.signature is not None:
            out["signature"] = self.signature
        if self.data is not None:
            out["data"] = self.data
        if self.after_calls:
            out["after_calls"] = self.after_calls
        if self.kind == "block":
            out["text"] = self.text
            out["at"] = self.at
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Thinking:
        return cls(
            data["type"],
            data.get("thinking") or data.get("text") or "",
            data.get("signature"),
            data.get("data"),
            data.get("provider") or "anthropic",
            int(data.get("after_calls") or 0),
            int(data.get("at") or 0),
        )

    def block(self) -> dict[str, Any] | None:
        """A ``block``'s content block as the API sent it (None for thinking, or data that no
        longer reads as a JSON object)."""
        if self.kind != "block" or not self.data:
            return None
        try:
            value = json.loads(self.data)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


@dataclass(frozen=True, slots=True)
class Message:
    """A chat message.

    ``tool_calls`` is set on assistant messages that ask for tools; ``tool_call_id`` and
    ``name`` on the ``tool`` message that answers one, and ``is_error`` when that answer is an
    error (the tool raised, or the call was refused). ``thinking`` holds an assistant message's
    provider-specific reasoning blocks (:class:`Thinking`); ``content`` is the reply text only.
    ``images`` makes the content structured: each :class:`~slotmagic._core.images.Image` sits
    at a character offset of ``content`` (:attr:`parts` reads text and images in order); only
    user messages carry them. ``tokens`` is the stored token count (see
    :mod:`slotmagic._core.tokens`); it does not take part in equality, and a copy made with
    ``dataclasses.replace`` does not keep it (its content may differ).
    """

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    # Not an argument: a copy made by ``dataclasses.replace`` (a step rewriting a message) has no
    # count, rather than the count of the message it was made from; ``with_tokens`` sets one.
    tokens: int = field(default=0, compare=False, init=False)
    thinking: tuple[Thinking, ...] = ()
    is_error: bool = False
    images: tuple[Image, ...] = ()

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ConfigError(f"unknown message role {self.role!r:.60}; use one of {', '.join(ROLES)}")
        check_text(self.content, f"a {self.role} message's content")
        if isinstance(self.tool_calls, list):
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if not isinstance(self.tool_calls, tuple) or not all(isinstance(c, ToolCall) for c in self.tool_calls):
            raise ConfigError(f"tool_calls must be a list of ToolCall values, not {self.tool_calls!r:.60}")
        if self.tool_call_id is not None:
            check_text(self.tool_call_id, "tool_call_id")
        if self.name is not None:
            check_text(self.name, "a message's name")
        if self.role == "tool" and not self.tool_call_id:
            raise ConfigError("a tool message needs the tool_call_id of the call it answers")
        if self.thinking and self.role != "assistant":
            raise ConfigError("only assistant messages carry thinking")
        if self.is_error and self.role != "tool":
            raise ConfigError("only tool messages can be errors")
        if self.images:
            object.__setattr__(self, "images", check_images(self.images))
            if self.role != "user":
                raise ConfigError("only user messages carry images")

    @classmethod
    def system(cls, content: str) -> Message:
        return cls("system", content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls("user", content)

    @classmethod
    def assistant(
        cls,
        content: str,
        tool_calls: tuple[ToolCall, ...] | list[ToolCall] = (),
        thinking: tuple[Thinking, ...] | list[Thinking] = (),
    ) -> Message:
        return cls("assistant", content, tuple(tool_calls), thinking=tuple(thinking))

    @classmethod
    def tool(cls, tool_call_id: str, content: str, name: str | None = None, *, is_error: bool = False) -> Message:
        return cls("tool", content, tool_call_id=tool_call_id, name=name, is_error=is_error)

    @classmethod
    def from_parts(cls, role: Role, items: Sequence[Part | str]) -> Message:
        """A message of structured content: text (``str`` or ``TextPart``) and ``Image`` parts
        in order."""
        content, images = from_parts(items)
        return cls(role, content, images=images)

    @property
    def parts(self) -> list[Part]:
        """The content in order: ``TextPart`` and ``Image`` values (one text part without images)."""
        return parts(self.content, self.images)

    def with_tokens(self, tokens: int) -> Message:
        """The same message with its token count: a copy of fields already checked (running
        ``__init__`` again would check them twice on every message a turn stores)."""
        copy = object.__new__(Message)
        for put, get in _MESSAGE_SLOTS:
            put(copy, get(self))
        _put_tokens(copy, tokens)
        return copy

    # -- serialisation (the store's ``extra`` column and JSON exports) -------------------------

    def extra(self) -> dict[str, Any] | None:
        """The fields beyond role and content, or None when there are none (the common case)."""
        extra: dict[str, Any] = {}
        if self.tool_calls:
            extra["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls]
        if self.tool_call_id is not None:
            extra["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            extra["name"] = self.name
        if self.thinking:
            extra["thinking"] = [t.to_dict() for t in self.thinking]
        if self.is_error:
            extra["is_error"] = True
        if self.images:
            extra["images"] = [i.to_dict() for i in self.images]
        return extra or None

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.content, **(self.extra() or {})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], tokens: int = 0) -> Message:
        made = cls(data["role"], data.get("content") or "", **fields_from_extra(data))
        if tokens:
            _put_tokens(made, tokens)
        return made


# Each slot's own setter and getter: they skip the frozen ``__setattr__`` and a lookup by name.
_MESSAGE_SLOTS = tuple((vars(Message)[n].__set__, vars(Message)[n].__get__) for n in Message.__slots__ if n != "tokens")
_put_tokens = vars(Message)["tokens"].__set__


def count_in_place(message: Message, tokens: int) -> Message:
    """``message`` given its token count in place: only for one just made, that nothing else
    holds yet (a turn's own user message and replies). A copy (:meth:`Message.with_tokens`) sets
    every field of the frozen message again, twice a turn."""
    _put_tokens(message, tokens)
    return message


def fields_from_extra(data: Mapping[str, Any]) -> dict[str, Any]:
    """The fields beyond role and content, from an :meth:`Message.extra` (or ``to_dict``)
    mapping: every one of them, defaults included, so a reader that builds messages without
    ``__init__`` (the store's fast path) can set them all at once."""
    return {
        "tool_calls": tuple(
            ToolCall(c["id"], c["name"], c.get("arguments", "{}")) for c in data.get("tool_calls") or ()
        ),
        "tool_call_id": data.get("tool_call_id"),
        "name": data.get("name"),
        "thinking": tuple(Thinking.from_dict(t) for t in data.get("thinking") or ()),
        "is_error": bool(data.get("is_error", False)),
        "images": tuple(Image.from_dict(i) for i in data.get("images") or ()),
    }
