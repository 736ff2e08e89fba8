"""A turn's ``max_tokens`` against its model's limits, before anything is sent.

A reply may take at most the model's maximum output (:mod:`slotmagic.providers._limits`): a
larger ``max_tokens`` is lowered to it, and the turn says so in one line. A ``max_tokens`` that
leaves no room for the request in the budget is refused, naming max_tokens. The same limit in
a turn's ``params`` (which pass through as given) is refused over the model's maximum, unless
those params carry Anthropic ``betas``, which may raise it.
"""

from __future__ import annotations

from dataclasses import replace

from ..._core.budget import BudgetReport, ContextBudget
from ..._errors import ConfigError, OverBudget
from ...providers._limits import ModelLimits
from .pending import TurnOptions


def fit_reply(
    model: str, options: TurnOptions, limits: ModelLimits, budget: ContextBudget
) -> tuple[TurnOptions, str | None]:
    """``options`` with ``max_tokens`` within ``model``'s maximum output, and the line saying it
    was lowered (None when it was not); ``OverBudget`` when it leaves the request no room."""
    _check_params(model, options, limits)
    asked = options.max_tokens
    if asked is None:
        return options, None
    note = None
    if limits.output is not None and asked > limits.output:
        note = (
            f"max_tokens={asked:,} is more than {model} can write in one reply ({limits.output:,} tokens, "
            f"{limits.source}); sent max_tokens={limits.output:,}"
        )
        asked = limits.output
        options = replace(options, max_tokens=asked)
    if budget.request_limit(asked) <= 0:
        most = f" ({model} writes at most {limits.output:,})" if limits.output is not None else ""
        raise OverBudget(
            f"max_tokens={asked:,} leaves no room for the request: the reply and the request share the "
            f"{budget.total:,} tokens of {model}'s budget; lower max_tokens{most}; nothing was sent"
        )
    return options, note


# The names the wires give the reply's limit (OpenAI's two, the Responses API's).
_REPLY_LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def _check_params(model: str, options: TurnOptions, limits: ModelLimits) -> None:
    """``ConfigError`` when ``params`` set the reply's limit above ``model``'s maximum output."""
    if limits.output is None or "betas" in options.params:
        return
    for name in _REPLY_LIMITS:
        asked = options.params.get(name)
        if isinstance(asked, int) and asked > limits.output:
            raise ConfigError(
                f"params {name}={asked:,} is more than {model} can write in one reply ({limits.output:,} "
                f"tokens, {limits.source}): lower it, or give max_tokens= instead, which is lowered to "
                "the model's maximum with a note; nothing was sent"
            )


def lower_reply(report: BudgetReport) -> str:
    """``lower max_tokens (N kept for the reply), `` when the turn's max_tokens took room from
    the request (more than the budget's reserve), else nothing."""
    if report.reserve.used <= report.reserve.allowed:
        return ""
    return f"lower max_tokens ({report.reserve.used:,} kept for the reply), "
