"""A provider's context-overflow reply, recovered from once.

OpenAI's ``context_length_exceeded`` ("This model's maximum context length is 128000 tokens.
However, your messages resulted in 130532 tokens", or for the gpt-5 family "Input tokens exceed
the configured limit of 272,000 tokens. Your messages resulted in 288,001 tokens"), Anthropic's
``invalid_request_error`` "prompt is too long: 210345 tokens > 200000 maximum", and HTTP 413
(``request_too_large``) all say the same: the request was larger than the model takes, though
slotmagic counted it within the budget (a window unknown or wrong, a tokenizer that counts
differently, images, a server configured smaller).

The turn learns from the numbers the error reports: the window a budget splits for that model
shrinks to what the model took, in slotmagic's own count (:attr:`ModelLimits.learned`, for the
life of the session), and a model counted by estimate is calibrated from the tokens the model
counted. Then the turn is made again: past the threshold now, it compacts and is sent again once
(with ``auto_compact`` "on"), saying so in one line; with "ask" or "off" the line names the
commands (``%slot compact``), and running the cell again finds the slot over its budget before
anything is sent. Nothing is stored until the turn's reply is: the slot is as it was on any failure.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from ..._core.budget import ContextBudget
from ..._core.request import ChatRequest
from ..._core.usage import Usage
from ..._errors import OverBudget, ProviderHTTPError, StoreError
from ...providers._limits import ModelLimits
from ..plan.pending import PendingTurn
from ..run.effects import Steps

__all__ = ["Recovering", "is_overflow", "learned_window", "overflow_numbers", "recover_steps"]
logger = logging.getLogger("slotmagic")


class Recovering(Protocol):
    """What a recovery asks of the turn's engine (a :class:`~slotmagic._engine.run.turn.TurnEngine`):
    named here so that this module, which the engine's stream uses, does not import the engine."""

    learned_windows: dict[str, int]

    def observe(self, model: str, request: ChatRequest, usage: Usage) -> None: ...

    def limits(self, model: str) -> ModelLimits: ...

    def remade(self, turn: PendingTurn) -> PendingTurn: ...

    def compact_steps(
        self, turn: PendingTurn, progress: Callable[[int, int], None] | None = None
    ) -> Steps[PendingTurn]: ...


_TYPES = frozenset({"context_length_exceeded", "request_too_large"})
_TEXT = re.compile(
    r"prompt is too long|maximum context length|context length|context window|input tokens exceed|"
    r"too many (?:input )?tokens|request_too_large|request too large",
    re.IGNORECASE,
)
_NUMBER = r"(\d[\d,]*)"
# (pattern, which group is the tokens sent, which the limit)
_SHAPES = (
    (re.compile(rf"too long:\s*{_NUMBER}\s*tokens?\s*>\s*{_NUMBER}", re.I), 1, 2),
    (re.compile(rf"maximum context length is {_NUMBER} tokens.*?(?:resulted in|requested) {_NUMBER}", re.I), 2, 1),
    (re.compile(rf"limit of {_NUMBER} tokens.*?resulted in {_NUMBER}", re.I), 2, 1),
    (re.compile(rf"{_NUMBER} tokens?\s*(?:>|exceeds?)\s*(?:the )?(?:limit of |maximum of )?{_NUMBER}", re.I), 1, 2),
)
_MARGIN = 0.95  # what a learnt window keeps below the model's reported limit
_UNSIZED = 0.75  # a refusal without numbers (a 413): the request shrinks by a quarter


def is_overflow(exc: BaseException) -> bool:
    """Whether ``exc`` is a provider saying the request was too large for the model."""
    if not isinstance(exc, ProviderHTTPError):
        return False
    if exc.status == 413 or exc.error_type in _TYPES:
        return True
    return exc.status in (400, None) and _TEXT.search(str(exc)) is not None


def overflow_numbers(text: str) -> tuple[int, int] | None:
    """(the tokens the model counted in the request, the limit it holds them to), when the
    error says both and the first is over the second."""
    for pattern, sent_at, limit_at in _SHAPES:
        found = pattern.search(text)
        if found is not None:
            sent, limit = (int(found.group(i).replace(",", "")) for i in (sent_at, limit_at))
            if sent > limit > 0:
                return sent, limit
    return None


def learned_window(budget_window: int, request_tokens: int, numbers: tuple[int, int] | None) -> int:
    """The window a budget should split after the model refused a request slotmagic counted at
    ``request_tokens``: one whose requests hold at most that many scaled by how far over the
    model counted it (its limit over what it counted, less a margin), or without numbers a
    quarter less; never more than ``budget_window``."""
    if numbers is None:
        target = request_tokens * _UNSIZED
    else:
        sent, limit = numbers
        target = request_tokens * limit / sent * _MARGIN
    split = ContextBudget.auto(max(1, budget_window))
    per_request = budget_window / max(1, split.request_limit())  # the window per token a request may hold
    return max(1, min(budget_window, int(target * per_request)))


def recover_steps(
    engine: Recovering, turn: PendingTurn, failure: Exception, progress: Callable[[int, int], None] | None = None
) -> Steps[PendingTurn]:
    """``turn`` made again after its model refused the request as too long: the window learnt
    from the error, then compacted to fit it (a model call, part of the turn); a line says so.
    ``OverBudget`` (naming the command) when it cannot or may not compact."""
    assert turn.view is not None and turn.view.report is not None
    numbers = overflow_numbers(str(failure))
    if numbers is not None:
        try:  # a model counted by estimate learns how it counts
            engine.observe(turn.model, turn.request, Usage(input_tokens=numbers[0]))
        except StoreError as exc:
            logger.info("the token estimate's calibration was not updated: %s", exc)
    used = turn.view.report.request_used
    engine.learned_windows[turn.model] = learned_window(engine.limits(turn.model).budget_window, used, numbers)
    said = f"{turn.model} refused the request as too long" + (
        f" ({numbers[0]:,} tokens by its count, over its {numbers[1]:,})" if numbers else f" ({failure})"
    )
    try:
        again = engine.remade(turn)
    except OverBudget as refusal:
        raise type(refusal)(f"{said}: {refusal}") from None
    if again.fold is None:
        raise OverBudget(
            f"{said}, and its slot has nothing more to fold: %slot compact --keep 2 folds more, or shorten "
            "the message; nothing was sent"
        )
    again = yield from engine.compact_steps(again, progress)
    return replace(again, notes=(*again.notes, f"{said}: compacted the slot and sent the request again"))
