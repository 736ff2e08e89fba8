"""A slot's budget as a plain object: what ``session.budget()`` and ``%slot budget`` show."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..._core.budget import BudgetReport, ContextBudget
from ..._core.compaction import Compaction, format_tokens
from ..._core.records import TurnRecord
from ..._render import CATEGORY_LABELS
from ...providers._prices import cache_savings_of
from ...providers._settings import Price


def cache_totals(turns: Iterable[TurnRecord], prices: Mapping[str, Price] | None = None) -> tuple[int, float | None]:
    """Input tokens the providers' prompt caches served over these turns, and the USD that
    saved (None when no turn's model has a price)."""
    cached, saved = 0, None
    for turn in turns:
        usage, model = turn.info.usage, turn.info.model
        if usage is None or model is None or not usage.cached_tokens:
            continue
        cached += usage.cached_tokens
        money = cache_savings_of(model, usage, prices)
        if money is not None:
            saved = (saved or 0.0) + money
    return cached, saved


@dataclass(frozen=True)
class SlotBudget:
    """The slot's next request against its budget, by category, within the model's window.

    ``threshold`` is the dynamic compaction threshold: the history and tool-result budgets less
    everything on the system side; a conversation past it is compacted before the request is
    sent (older tool results shortened first).
    """

    slot: str
    model: str
    window: int
    window_known: bool
    budget: ContextBudget
    report: BudgetReport
    exact: bool  # counted with the model's own encoding, else a calibrated estimate
    compactions: tuple[Compaction, ...]
    cached_tokens: int = 0  # input tokens the provider's prompt cache served, over the slot's turns
    cache_saved: float | None = None  # the USD that saved (None: no price known)

    @property
    def threshold(self) -> int:
        return self.report.history_available

    def to_text(self) -> str:
        counted = "exact counts" if self.exact else "estimated counts"
        window = f"{self.window:,}" + ("" if self.window_known else " (assumed)")
        if self.budget.total == self.window:
            size = f"window {window} tokens"
        else:
            size = f"budget {self.budget.total:,} tokens (window {window})"
        lines = [f"slot {self.slot} · {self.model} · {size} · {counted}"]
        width = max(len(name) for name in self.report.categories)
        for name, use in self.report.categories.items():
            share = use.used / use.allowed if use.allowed else 0.0
            bar = "█" * min(20, round(share * 20)) + "·" * max(0, 20 - round(share * 20))
            flag = "  over" if use.over else ""
            lines.append(f"  {name:<{width}}  {bar}  {use.used:>8,} / {use.allowed:,}{flag}")
        lines.append(
            f"  compaction threshold: history and tool results up to {self.threshold:,} tokens "
            f"({self.report.room_words()})"
        )
        if self.compactions:
            total = sum(c.replaced for c in self.compactions)
            last = self.compactions[-1]
            lines.append(
                f"  compactions: {len(self.compactions)}, {total} messages folded; the latest keeps "
                f"{format_tokens(last.tokens_after)} tokens for {format_tokens(last.tokens_before)}"
            )
        else:
            lines.append("  compactions: none")
        if self.cached_tokens:  # only then: models without a prompt cache print what they did
            saved = "" if self.cache_saved is None else f", saved ${self.cache_saved:.4f}"
            lines.append(f"  prompt cache: {self.cached_tokens:,} input tokens read from the cache{saved}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def _repr_html_(self) -> str:
        return budget_html(self)


# -- the data a budget widget is sent, and HTML ---------------------------------------------------


def budget_data(budget: SlotBudget) -> dict[str, Any]:
    """The budget by category within the model's window, where each category's allowance starts
    in it, and where the compaction threshold falls (tokens from the window's start)."""
    categories: list[dict[str, Any]] = []
    start = history_start = 0
    for name, use in budget.report.categories.items():
        if name == "history":
            history_start = start
        categories.append(
            {
                "name": name,
                "label": CATEGORY_LABELS.get(name, name),
                "used": use.used,
                "allowed": use.allowed,
                "start": start,
                "over": use.over,
            }
        )
        start += use.allowed
    report = budget.report
    # The bar spans the slot's budget: its own (--budget) when it has one, else the model's window.
    total = budget.budget.total
    scale = max(total, report.allowed, 1)
    return {
        "slot": budget.slot,
        "model": budget.model,
        "window": budget.window,
        "window_known": budget.window_known,
        "total": total,
        "own_budget": total != budget.window,
        "scale": scale,
        "exact": budget.exact,
        "categories": categories,
        "used": report.used,
        "allowed": report.allowed,
        "threshold": budget.threshold,
        "threshold_at": history_start + budget.threshold,
        "history_used": report.conversation_used,  # history and tool results: what the threshold is for
        "needs_compaction": report.needs_compaction,
        "compactions": len(budget.compactions),
        "folded": sum(c.replaced for c in budget.compactions),
        "cached_tokens": budget.cached_tokens,
        "cache_saved": budget.cache_saved,
    }


def budget_line(data: dict[str, Any]) -> str:
    about = "" if data["exact"] else "~"
    window = f"{data['window']:,}" + ("" if data["window_known"] else " (assumed)")
    of = f"budget {data['total']:,} (window {window})" if data["own_budget"] else window
    line = (
        f"slot {data['slot']} · {data['model']} · {about}{data['used']:,} of {of} tokens · "
        f"compaction past {data['threshold']:,} tokens of history and tool results "
        f"({about}{data['history_used']:,} now)"
    )
    if data.get("cached_tokens"):
        saved = "" if data.get("cache_saved") is None else f", saved ${data['cache_saved']:.4f}"
        line += f" · {data['cached_tokens']:,} tokens from the prompt cache{saved}"
    return line + (" · the next turn compacts" if data["needs_compaction"] else "")


def budget_html(budget: SlotBudget) -> str:
    """The budget as a table (category, used, allowed), every text escaped."""
    import html  # here: the HTML form is for a saved notebook, not every kernel

    data = budget_data(budget)
    e = html.escape
    rows = "".join(
        f"<tr><td>{e(c['label'])}</td><td style='text-align:right'>{c['used']:,}</td>"
        f"<td style='text-align:right'>{c['allowed']:,}</td><td>{'over' if c['over'] else ''}</td></tr>"
        for c in data["categories"]
    )
    return (
        f'<div class="slotmagic-budget"><div>{e(budget_line(data))}</div>'
        f"<table><thead><tr><th>category</th><th>used</th><th>allowed</th><th></th></tr></thead>"
        f"<tbody>{rows}</tbody></table></div>"
    )
