"""Token usage as a provider reports it: shared by providers, turn records and replies."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens as the provider counted them. ``input_tokens`` is every prompt token, cached or
    not; ``cached_tokens`` is the part of them read from the provider's prompt cache."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        return cls(*(int(data.get(name) or 0) for name in ("input_tokens", "output_tokens", "cached_tokens")))
