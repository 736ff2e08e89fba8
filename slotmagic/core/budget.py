"""Token budgets: how a model's context window is shared out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

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

    def history_available(self, system_side: int) -> int:
        """Tokens left for history once ``system_side`` tokens are injected on the system side
        (system prompt, working context, workflow block, tool definitions): the history budget
        minus them, never below zero. History beyond this is what compaction must fold away."""
        if not isinstance(system_side, int) or system_side < 0:
            raise ConfigError(f"system-side tokens must be a whole number >= 0, got {system_side!r}")
        return max(0, self.history - system_side)

    def report(
        self, *, system: int = 0, history: int = 0, tools: int = 0, tool_results: int = 0, reserve: int = 0
    ) -> BudgetReport:
        """How much of each part a request uses. ``system`` counts every system-side token but
        the tool definitions (``tools``); ``reserve`` is what the reply may take (its
        ``max_tokens``, when one is set)."""
        used = {"system": system, "history": history, "tools": tools, "tool_results": tool_results, "reserve": reserve}
        for name, value in used.items():
            if not isinstance(value, int) or value < 0:
                raise ConfigError(f"tokens used by {name} must be a whole number >= 0, got {value!r}")
        return BudgetReport(
            system=CategoryUse(system, self.system),
            history=CategoryUse(history, self.history),
            tools=CategoryUse(tools, self.tools),
            tool_results=CategoryUse(tool_results, self.tool_results),
            reserve=CategoryUse(reserve, self.reserve),
            history_available=self.history_available(system + tools),
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
    """A request against its budget, by category (seed T1 for history).

    ``history_available`` is the dynamic threshold: the history budget less everything injected
    on the system side (``system.used + tools.used``). ``needs_compaction`` is True when the
    history is past it.
    """

    system: CategoryUse
    history: CategoryUse
    tools: CategoryUse
    tool_results: CategoryUse
    reserve: CategoryUse
    history_available: int

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
    def needs_compaction(self) -> bool:
        return self.history.used > self.history_available

    @property
    def over(self) -> tuple[str, ...]:
        """The categories past their allowance."""
        return tuple(name for name, c in self.categories.items() if c.over)

    def to_dict(self) -> dict[str, Any]:
        return {
            **{name: c.to_dict() for name, c in self.categories.items()},
            "history_available": self.history_available,
            "used": self.used,
            "allowed": self.allowed,
            "needs_compaction": self.needs_compaction,
        }
