"""Token budgets: how a model's context window is shared out."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

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
        for name, value in asdict(self).items():
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"budget {name} must be a whole number of tokens >= 0, got {value!r}")

    @property
    def total(self) -> int:
        return self.system + self.history + self.tools + self.tool_results + self.reserve

    @classmethod
    def auto(cls, window: int) -> ContextBudget:
        """Split ``window`` tokens in the default ratios (128k -> 8k/80k/10k/20k/10k).

        Each part is rounded down; what rounding leaves over goes to history, so the parts
        always add up to exactly ``window``.
        """
        if not isinstance(window, int) or window <= 0:
            raise ValueError(f"a context window is a positive number of tokens, got {window!r}")
        parts = {name: window * share // _DEFAULT_WINDOW for name, share in _DEFAULT_SPLIT.items()}
        parts["history"] += window - sum(parts.values())
        return cls(**parts)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContextBudget:
        return cls(**{k: int(v) for k, v in data.items() if k in _DEFAULT_SPLIT})
