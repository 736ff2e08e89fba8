"""Slot configuration and metadata: plain values, no I/O."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Literal

from .._errors import ConfigError, InvalidSlotId
from .budget import ContextBudget
from .checks import check_names, check_optional_text

DEFAULT_SLOT = "default"
_SLOT_ID = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def validate_slot_id(slot_id: object) -> str:
    """Return ``slot_id`` if it is 1-64 letters, digits, '-', '_' or '.'; else raise InvalidSlotId."""
    if not isinstance(slot_id, str) or not _SLOT_ID.fullmatch(slot_id):
        raise InvalidSlotId(slot_id)
    return slot_id


class SlotMode(StrEnum):
    """How a slot's history is turned into what the model sees."""

    FULL = "full"  # every message
    FOCUSED = "focused"  # a read-time filter: system prompt, summary, last N messages
    READONLY = "readonly"  # every message; turns and appends are refused

    @classmethod
    def parse(cls, value: SlotMode | str) -> SlotMode:
        try:
            return cls(value)
        except ValueError:
            raise ConfigError(f"unknown slot mode {value!r}; use one of: {', '.join(m.value for m in cls)}") from None


@dataclass(frozen=True, slots=True)
class FocusedConfig:
    """The focused filter: the first system message (if ``keep_system``), then the summary
    override as one system message (if set), then the last ``recent_messages`` non-system
    messages, widened so that a tool result never loses the call it answers."""

    keep_system: bool = True
    recent_messages: int = 10
    summary_override: str | None = None

    def __post_init__(self) -> None:
        if (
            isinstance(self.recent_messages, bool)
            or not isinstance(self.recent_messages, int)
            or self.recent_messages < 0
        ):
            raise ConfigError(f"recent_messages must be a whole number >= 0, got {self.recent_messages!r:.60}")
        if not isinstance(self.keep_system, bool):
            raise ConfigError(f"keep_system must be True or False, got {self.keep_system!r:.60}")
        check_optional_text(self.summary_override, "summary_override")

    def to_dict(self) -> dict[str, Any]:
        return {
            "keep_system": self.keep_system,
            "recent_messages": self.recent_messages,
            "summary_override": self.summary_override,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FocusedConfig:
        summary = data.get("summary_override")
        return cls(
            bool(data.get("keep_system", True)),
            int(data.get("recent_messages", 10)),
            summary if isinstance(summary, str) else None,  # a value stored before it was checked
        )


@dataclass(frozen=True, slots=True)
class DeriveStrategy:
    """How a derived slot sees its parent's history: all of it, or through a focused filter.

    Either way nothing is copied: the child shares the parent's stored messages up to the
    fork point and the strategy only decides the child's mode.
    """

    kind: Literal["full", "focused"] = "full"
    focused: FocusedConfig | None = None

    @classmethod
    def full(cls) -> DeriveStrategy:
        return cls("full")

    @classmethod
    def focused_on(cls, config: FocusedConfig | None = None) -> DeriveStrategy:
        return cls("focused", config or FocusedConfig())

    @classmethod
    def parse(cls, value: DeriveStrategy | FocusedConfig | str | None) -> DeriveStrategy:
        if value is None or value == "full":
            return cls.full()
        if value == "focused":
            return cls.focused_on()
        if isinstance(value, FocusedConfig):
            return cls.focused_on(value)
        if isinstance(value, DeriveStrategy):
            return value
        raise ConfigError(f"unknown derive strategy {value!r}; use 'full' or 'focused'")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.focused is not None:
            out["focused"] = self.focused.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DeriveStrategy:
        focused = data.get("focused")
        return cls(data.get("kind", "full"), FocusedConfig.from_dict(focused) if focused else None)


@dataclass(frozen=True, slots=True)
class SlotSource:
    """Where a slot's first messages came from."""

    kind: Literal["new", "derived", "static"] = "new"
    parent_id: str | None = None  # derived only: the nearest live ancestor
    strategy: DeriveStrategy | None = None  # derived only

    @classmethod
    def new(cls) -> SlotSource:
        return cls("new")

    @classmethod
    def static(cls) -> SlotSource:
        return cls("static")

    @classmethod
    def derived(cls, parent_id: str | None, strategy: DeriveStrategy) -> SlotSource:
        return cls("derived", parent_id, strategy)

    def to_dict(self) -> dict[str, Any]:
        # The parent is stored as a link between slot rows, not by name, so renames and
        # deletions of ancestors never leave a stale name behind.
        out: dict[str, Any] = {"kind": self.kind}
        if self.strategy is not None:
            out["strategy"] = self.strategy.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], parent_id: str | None = None) -> SlotSource:
        strategy = data.get("strategy")
        return cls(
            data.get("kind", "new"),
            parent_id,
            DeriveStrategy.from_dict(strategy) if strategy else None,
        )


@dataclass(frozen=True, slots=True)
class SlotConfig:
    """Everything that decides how a slot behaves. ``SlotConfig()`` is a plain full slot."""

    mode: SlotMode = SlotMode.FULL
    focused: FocusedConfig = field(default_factory=FocusedConfig)
    source: SlotSource = field(default_factory=SlotSource.new)
    budget: ContextBudget | None = None  # None: the model's context window in the default split
    tools: tuple[str, ...] | None = None  # the tools its turns offer by name; None: all of the session's
    compact: bool = True
    system: str | None = None  # this slot's system prompt; None uses the session's
    model: str | None = None  # this slot's model (a fan-out's model branch); None uses the session's
    working_context: bool = True  # False: its requests carry no working context (%ctx off)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", SlotMode.parse(self.mode))
        if self.tools is not None:
            object.__setattr__(self, "tools", check_names(self.tools, "tools"))
        wanted: tuple[tuple[str, type | tuple[type, ...], str], ...] = (
            ("focused", FocusedConfig, "a FocusedConfig"),
            ("source", SlotSource, "a SlotSource"),
            ("budget", (ContextBudget, type(None)), "a ContextBudget or None"),
        )
        for name, kind, what in wanted:
            value = getattr(self, name)
            if not isinstance(value, kind):
                raise ConfigError(f"a slot's {name} must be {what}, not {type(value).__name__} {value!r:.60}")
        for flag in ("compact", "working_context"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(f"{flag} must be True or False, not {getattr(self, flag)!r:.60}")
        check_optional_text(self.system, "a slot's system prompt")
        if self.model is not None and (not isinstance(self.model, str) or not self.model.strip()):
            raise ConfigError(
                f"a slot's model must be a model name such as 'openai:gpt-4o-mini', not {self.model!r:.60}"
            )

    @classmethod
    def focused_mode(
        cls, recent_messages: int = 10, keep_system: bool = True, summary_override: str | None = None, **kwargs: Any
    ) -> SlotConfig:
        return cls(
            mode=SlotMode.FOCUSED, focused=FocusedConfig(keep_system, recent_messages, summary_override), **kwargs
        )

    @classmethod
    def readonly(cls, **kwargs: Any) -> SlotConfig:
        return cls(mode=SlotMode.READONLY, **kwargs)

    def replace(self, **changes: Any) -> SlotConfig:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode.value,
            "focused": self.focused.to_dict(),
            "source": self.source.to_dict(),
            "budget": None if self.budget is None else self.budget.to_dict(),
            "tools": None if self.tools is None else list(self.tools),
            "compact": self.compact,
            "system": self.system,
            **({"model": self.model} if self.model is not None else {}),  # stored configs without one stay as they were
            **({} if self.working_context else {"working_context": False}),  # likewise
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], parent_id: str | None = None) -> SlotConfig:
        return cls(
            mode=SlotMode.parse(data.get("mode", "full")),
            focused=FocusedConfig.from_dict(data.get("focused") or {}),
            source=SlotSource.from_dict(data.get("source") or {}, parent_id),
            budget=_stored_budget(data.get("budget")),
            tools=None if data.get("tools") is None else tuple(str(t) for t in data["tools"]),
            compact=bool(data.get("compact", True)),
            system=system if isinstance(system := data.get("system"), str) else None,  # as summary_override
            model=model if isinstance(model := data.get("model"), str) and model.strip() else None,
            working_context=data.get("working_context") is not False,
        )


def _stored_budget(data: Any) -> ContextBudget | None:
    """A stored budget; the 128k split every slot carried before budgets followed the model's
    window reads as none (follow the window), since no user chose it."""
    if not data:
        return None
    budget = ContextBudget.from_dict(data)
    return None if budget == ContextBudget() else budget


@dataclass(frozen=True, slots=True)
class SlotMeta:
    """Counts kept up to date by the store, so listing slots never recounts messages."""

    id: str
    parent_id: str | None
    message_count: int
    total_tokens: int
    created_at: float  # Unix time, seconds
    turns: int = 0
    fork_at: int = 0  # how many messages of its parent's history it shares (0 for a new slot)


@dataclass(frozen=True, slots=True)
class Slot:
    """One slot as ``Session.list_slots()`` reports it."""

    id: str
    config: SlotConfig
    meta: SlotMeta
    current: bool = False

    @property
    def mode(self) -> SlotMode:
        return self.config.mode

    @property
    def source(self) -> SlotSource:
        return self.config.source
