"""Token budgets: how a model's context window is shared out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._errors import ConfigError

# The default budget for a 128k window; ``auto`` keeps these proportions for any window.
_DEFAULT_SPLIT = {"system": 8_000, "history": 80_000, "tools": 10_000, "tool_results": 20_000, "reserve": 10_000}
_DEFAULT_WINDOW = sum(_DEFAULT_SPLIT.values())


@dataclass(frozen=True, slots=True)
class ContextBudget:
    """Tokens for each part of a request; the parts add up to the model's window."""

    system: int = 8_000
    history: int = 80_000
    tools: int = 10_000
    tool_results: int = 20_000
    reserve: int = 10_000

    def __post_init__(self) -> None:
        for name in _DEFAULT_SPLIT:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"budget {name} must be a whole number of tokens >= 0, got {value!r}")

    @property
    def total(self) -> int:
        return self.system + self.history + self.tools + self.tool_results + self.reserve

    @classmethod
    def auto(cls, window: int) -> ContextBudget:
        """Split ``window`` tokens in the default ratios (128k -> 8k/80k/10k/20k/10k).

        Each part is rounded down; what rounding leaves over goes to history, so the parts
        always add up to exactly ``window``.
        """
        if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
            raise ConfigError(f"a context window is a positive number of tokens, got {window!r}")
        parts = {name: window * share // _DEFAULT_WINDOW for name, share in _DEFAULT_SPLIT.items()}
        parts["history"] += window - sum(parts.values())
        return cls(**parts)

    def to_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in _DEFAULT_SPLIT}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContextBudget:
        return cls(**{k: int(v) for k, v in data.items() if k in _DEFAULT_SPLIT})

    # -- what a request uses against the budget -----------------------------------------------

    def history_available(self, system_side: int, reply: int = 0) -> int:
        """Tokens left for the conversation (history and tool results) once ``system_side``
        tokens are injected on the system side (system prompt, working context, workflow block,
        tool definitions): the history and tool-result budgets less them, and never more than
        the budget's total less the reply (``reply``: what it may take, at least the reserve).
        A conversation past this is what compaction must fold away; one within it always fits."""
        if type(system_side) is not int or type(reply) is not int or system_side < 0 or reply < 0:
            for name, value in (("system-side tokens", system_side), ("reply tokens", reply)):
                if not isinstance(value, int) or value < 0:
                    raise ConfigError(f"{name} must be a whole number >= 0, got {value!r}")
        room = min(self.history + self.tool_results, self.request_limit(reply))
        return max(0, room - system_side)

    def request_limit(self, reply: int = 0) -> int:
        """The most a request may hold: the total less what the reply may take (the reserve,
        or the turn's ``max_tokens`` when larger)."""
        return max(0, self.total - max(self.reserve, reply))

    def report(
        self, *, system: int = 0, history: int = 0, tools: int = 0, tool_results: int = 0, reserve: int = 0
    ) -> BudgetReport:
        """How much of each part a request uses. ``system`` counts every system-side token but
        the tool definitions (``tools``); ``reserve`` is what the reply may take (its
        ``max_tokens``, when one is set)."""
        values = (system, history, tools, tool_results, reserve)
        if set(map(type, values)) != {int} or min(values) < 0:  # the check by name only when it may fail
            used = dict(zip(_DEFAULT_SPLIT, values, strict=True))
            for name, value in used.items():
                if not isinstance(value, int) or value < 0:
                    raise ConfigError(f"tokens used by {name} must be a whole number >= 0, got {value!r}")
        return BudgetReport(
            CategoryUse(system, self.system),
            CategoryUse(history, self.history),
            CategoryUse(tools, self.tools),
            CategoryUse(tool_results, self.tool_results),
            CategoryUse(reserve, self.reserve),
            self.history_available(system + tools, reserve),
            self.request_limit(reserve),
        )


@dataclass(frozen=True, slots=True)
class CategoryUse:
    """Tokens one budget category uses, against what it is allowed."""

    used: int
    allowed: int

    @property
    def remaining(self) -> int:
        """Tokens still free in the category; negative when it is over."""
        return self.allowed - self.used

    @property
    def over(self) -> bool:
        return self.used > self.allowed

    def to_dict(self) -> dict[str, int]:
        return {"used": self.used, "allowed": self.allowed}


@dataclass(frozen=True, slots=True)
class BudgetReport:
    """A request against its budget, by category.

    ``history_available`` is the dynamic compaction threshold: the history and tool-result
    budgets less everything on the system side (``system.used + tools.used``), within ``limit``
    (the budget less the reply's reserve). ``needs_compaction`` is True when the conversation
    (``history.used + tool_results.used``) is past it; a request within it never exceeds
    ``limit``.
    """

    system: CategoryUse
    history: CategoryUse
    tools: CategoryUse
    tool_results: CategoryUse
    reserve: CategoryUse
    history_available: int
    limit: int = 0  # the most the request may hold: the budget less the reply's reserve

    @property
    def categories(self) -> dict[str, CategoryUse]:
        return {
            "system": self.system,
            "history": self.history,
            "tools": self.tools,
            "tool_results": self.tool_results,
            "reserve": self.reserve,
        }

    @property
    def used(self) -> int:
        return sum(c.used for c in self.categories.values())

    @property
    def allowed(self) -> int:
        return sum(c.allowed for c in self.categories.values())

    @property
    def conversation_used(self) -> int:
        """What the conversation takes: history (reply priming included) and tool results."""
        return self.history.used + self.tool_results.used

    @property
    def request_used(self) -> int:
        """The whole request: everything but the reply's reserve."""
        return self.system.used + self.tools.used + self.conversation_used

    @property
    def needs_compaction(self) -> bool:
        return self.conversation_used > self.history_available

    @property
    def over(self) -> tuple[str, ...]:
        """The categories past their allowance."""
        return tuple(name for name, c in self.categories.items() if c.over)

    def room_words(self) -> str:
        """Where the threshold comes from, in words."""
        side = self.system.used + self.tools.used
        return (
            f"history and tool-result budgets {self.history.allowed + self.tool_results.allowed:,} "
            f"less {side:,} on the system side, within the {self.limit:,} a request may hold"
        )

    def over_words(self) -> str:
        """The conversation against the threshold, in words (for a refusal or a notice)."""
        return (
            f"the conversation needs {self.conversation_used:,} tokens (history {self.history.used:,}, tool results "
            f"{self.tool_results.used:,}) but has room for {self.history_available:,} ({self.room_words()})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **{name: c.to_dict() for name, c in self.categories.items()},
            "history_available": self.history_available,
            "conversation_used": self.conversation_used,
            "limit": self.limit,
            "used": self.used,
            "allowed": self.allowed,
            "needs_compaction": self.needs_compaction,
        }
