"""Token counts as a session's turns use them: each model's counter, and for a model counted
by estimate the factor learnt from what its provider reported, kept in the store across
restarts (see :mod:`slotmagic.tokens._calibration`)."""

from __future__ import annotations

import json

from ..._core.request import ChatRequest
from ..._core.tokens import estimate_message_tokens
from ..._core.usage import Usage
from ..._store.base import Store
from ...providers import REGISTRY
from ...providers._wire import bare_tools
from ...tokens import Calibration, TokenCounter
from ..steps.bare_tools import BARE_TOOLS
from ..view.inputs import Counting

_CALIBRATION = "calibration"  # the store's meta key


class Calibrator:
    """Per-model counters and estimate factors for one store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._calibration: Calibration | None = None
        self._counters: dict[str, TokenCounter] = {}
        self._countings: dict[str, Counting] = {}  # the last per model (a turn asks more than once)

    @property
    def calibration(self) -> Calibration:
        """Per-model factors for token estimates, read from the store once."""
        if self._calibration is None:
            stored = self.store.meta(_CALIBRATION)
            self._calibration = Calibration.from_dict(json.loads(stored) if stored else None)
        return self._calibration

    def counting(self, model: str) -> Counting:
        """How ``model``'s tokens are counted: exactly, or by estimate times its factor."""
        counter = self._counters.get(model)
        if counter is None:
            counter = self._counters[model] = TokenCounter.for_model(model)
        factor = 1.0 if counter.exact else self.calibration.factor(model)
        counting = self._countings.get(model)
        if counting is None or counting.factor != factor:
            counting = self._countings[model] = Counting(counter, factor)
        return counting

    def observe(self, model: str, request: ChatRequest, usage: Usage) -> None:
        """Calibrate the estimate of a model counted by estimate, from what it reported for
        ``request``: its messages and the tool definitions it carries (the turn's, or the bare
        ones a wire adds beside a history's calls), estimated as a view counts them."""
        if usage.input_tokens <= 0 or model == "echo":
            return
        counter = self.counting(model).counter  # kept per model: a turn makes none
        if counter.exact:
            return
        estimated = sum(m.tokens or estimate_message_tokens(m) for m in request.messages)
        tools = request.tools or (bare_tools(request.messages) if REGISTRY.wire(model) in BARE_TOOLS else ())
        estimated += counter.count_tools(tools, has_system=any(m.role == "system" for m in request.messages))

        def update(stored: str | None) -> str:
            calibration = Calibration.from_dict(json.loads(stored) if stored else None)
            calibration.observe(model, estimated, usage.input_tokens)
            self._calibration = calibration
            return json.dumps(calibration.to_dict())

        self.store.update_meta(_CALIBRATION, update)
