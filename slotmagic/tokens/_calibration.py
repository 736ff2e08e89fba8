"""Per-model calibration of token estimates against what providers report.

Models without a known encoding (Anthropic, Ollama, servers of unknown models) are counted
with a character estimate. After each turn the engine tells a :class:`Calibration` what the
request was estimated at and how many input tokens the provider reported; the ratio of the two
is kept per model, and :meth:`Calibration.apply` scales later estimates by it.

The factor is the weighted median of the last :data:`WINDOW` ratios (weights grow with the
request's size, capped, so a one-line request says less than a long one and no single huge one
decides alone): a few odd turns (an image, a server-side prompt the estimate cannot see) do not
move it. Ratios outside :data:`OUTLIER_BOUNDS` are ignored, and the factor stays within
:data:`FACTOR_BOUNDS`. ``to_dict``/``from_dict`` keep it as plain data, so the engine can store
it and it survives kernel restarts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FACTOR_BOUNDS", "OUTLIER_BOUNDS", "WINDOW", "Calibration"]

WINDOW = 32  # observations kept per model
OUTLIER_BOUNDS = (0.25, 4.0)  # a reported/estimated ratio outside these is not evidence about the tokenizer
FACTOR_BOUNDS = (0.5, 2.0)  # the factor applied never leaves these
WEIGHT_CAP = 4096  # estimated tokens beyond this add no more weight to an observation
_FORMAT = 1


@dataclass(frozen=True, slots=True)
class _Observation:
    ratio: float  # reported / estimated
    weight: int  # min(estimated, WEIGHT_CAP)


@dataclass
class Calibration:
    """Reported-to-estimated token ratios per model (a ``provider:model`` string)."""

    _observations: dict[str, list[_Observation]] = field(default_factory=dict)

    def observe(self, model: str, estimated_tokens: int, reported_tokens: int) -> float:
        """Record one request: it was estimated at ``estimated_tokens`` and the provider reported
        ``reported_tokens`` input tokens. Returns the model's factor from now on.

        Nonsense observations (zero or negative counts, ratios outside ``OUTLIER_BOUNDS``) are
        ignored and leave the factor as it was.
        """
        if estimated_tokens > 0 and reported_tokens > 0:
            ratio = reported_tokens / estimated_tokens
            low, high = OUTLIER_BOUNDS
            if low <= ratio <= high:
                kept = self._observations.setdefault(model, [])
                kept.append(_Observation(ratio, min(estimated_tokens, WEIGHT_CAP)))
                del kept[:-WINDOW]
        return self.factor(model)

    def factor(self, model: str) -> float:
        """What estimates for ``model`` are multiplied by; 1.0 before any observation."""
        kept = self._observations.get(model)
        if not kept:
            return 1.0
        ordered = sorted(kept, key=lambda o: o.ratio)
        half = sum(o.weight for o in ordered) / 2
        running = 0
        for observation in ordered:
            running += observation.weight
            if running >= half:
                low, high = FACTOR_BOUNDS
                return min(max(observation.ratio, low), high)
        raise AssertionError("unreachable: the weights add up to more than their half")

    def apply(self, model: str, tokens: int) -> int:
        """``tokens`` (an estimate for ``model``) scaled by the model's factor, rounded up."""
        return math.ceil(tokens * self.factor(model) - 1e-9)

    def observations(self, model: str) -> int:
        """How many observations the factor for ``model`` rests on."""
        return len(self._observations.get(model, ()))

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(sorted(self._observations))

    # -- plain data ---------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "models": {
                model: [[round(o.ratio, 6), o.weight] for o in kept]
                for model, kept in sorted(self._observations.items())
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Calibration:
        """A calibration from :meth:`to_dict` data. Entries that do not make sense are dropped
        rather than failing the session that loads them."""
        calibration = cls()
        models = (data or {}).get("models")
        if not isinstance(models, Mapping):
            return calibration
        low, high = OUTLIER_BOUNDS
        for model, entries in models.items():
            if not isinstance(model, str) or not isinstance(entries, list):
                continue
            kept = []
            for entry in entries[-WINDOW:]:
                try:
                    ratio, weight = float(entry[0]), int(entry[1])
                except (TypeError, ValueError, IndexError, KeyError):
                    continue
                if low <= ratio <= high and 0 < weight <= WEIGHT_CAP:
                    kept.append(_Observation(ratio, weight))
            if kept:
                calibration._observations[model] = kept
        return calibration
