"""Chat messages: the one message type every layer speaks.

Providers map these to and from their wire formats; the store keeps one row per message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..errors import ConfigError
from .checks import check_text

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")


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


@dataclass(frozen=True)
class Message:
    """A chat message.

    ``tool_calls`` is set on assistant messages that ask for tools; ``tool_call_id`` and
    ``name`` on the ``tool`` message that answers one. ``tokens`` is the stored token count
    (see :mod:`slotmagic.core.tokens`); it does not take part in equality.
    """

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    tokens: int = field(default=0, compare=False)

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

    @classmethod
    def system(cls, content: str) -> Message:
        return cls("system", content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls("user", content)

    @classmethod
    def assistant(cls, content: str, tool_calls: tuple[ToolCall, ...] | list[ToolCall] = ()) -> Message:
        return cls("assistant", content, tuple(tool_calls))

    @classmethod
    def tool(cls, tool_call_id: str, content: str, name: str | None = None) -> Message:
        return cls("tool", content, tool_call_id=tool_call_id, name=name)

    def with_tokens(self, tokens: int) -> Message:
        return replace(self, tokens=tokens)

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
        return extra or None

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.content, **(self.extra() or {})}

    @classmethod
    def from_dict(cls, data: dict[str, Any], tokens: int = 0) -> Message:
        calls = tuple(ToolCall(c["id"], c["name"], c.get("arguments", "{}")) for c in data.get("tool_calls") or ())
        return cls(
            data["role"],
            data.get("content") or "",
            calls,
            data.get("tool_call_id"),
            data.get("name"),
            tokens,
        )
