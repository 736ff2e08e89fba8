"""Views, budgets and workflows as plain data for the widgets, and as escaped HTML.

Plain Python (no IPython, no widgets): the widgets send these dicts to the front end, and
``View._repr_html_`` / ``SlotBudget._repr_html_`` (what a notebook shows where widgets are not
available: GitHub, nbconvert) are made from the same data, so both say the same thing. Every
text that comes from a model or a user is escaped here; the front end inserts it as text.
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING, Any

from .core.slots import SlotConfig, SlotMode

if TYPE_CHECKING:
    from .engine.budgeting import SlotBudget
    from .engine.pipeline import View, ViewEntry

__all__ = [
    "BODY_LIMIT",
    "ROW_LIMIT",
    "budget_data",
    "budget_html",
    "describe_mode",
    "entry_label",
    "view_data",
    "view_html",
]

BODY_LIMIT = 4_000  # characters of one message body sent to a widget
ROW_LIMIT = 400  # history entries a preview widget shows (the latest); the text form shows all
CATEGORY_LABELS = {
    "system": "system",
    "history": "history",
    "tools": "tools",
    "tool_results": "tool results",
    "reserve": "reserve",
}
_LABELS = {
    "system": "system prompt",
    "summary": "summary",
    "compaction": "compaction summary",
    "new": "new message",
}
_NAMESPACE_REF = re.compile(r"namespace://[^\s)\]>\"']+")


def describe_mode(config: SlotConfig) -> str:
    """A slot's mode in words: ``full``, ``readonly``, or what a focused slot keeps."""
    if config.mode is SlotMode.FOCUSED:
        focus = config.focused
        parts = [f"last {_plural(focus.recent_messages, 'message')}"]
        parts.append("system prompt kept" if focus.keep_system else "system prompt dropped")
        if focus.summary_override:
            parts.append("with a summary")
        return "focused: " + ", ".join(parts)
    return str(config.mode)


def entry_label(kind: str) -> str:
    """What an entry is, for a label: a stored message says nothing more than its role; an
    injected block says what put it there (a kind this version does not know by its name)."""
    return "" if kind == "history" else _LABELS.get(kind, kind)


def _plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _entry_row(number: int, entry: ViewEntry, pinned: bool = False) -> dict[str, Any]:
    message = entry.message
    text = message.content or ""
    cut = max(0, len(text) - BODY_LIMIT)
    return {
        "type": "entry",
        "number": number,
        "kind": entry.kind,
        "label": "pinned" if pinned else entry_label(entry.kind),
        "pinned": pinned,
        "injected": entry.kind not in ("history", "new"),
        "role": message.role,
        "tokens": entry.tokens,
        "position": entry.position,
        "text": text[:BODY_LIMIT] if cut else text,
        "cut": cut,
        "calls": [f"{c.name}({c.arguments})" for c in message.tool_calls],
        "refs": sorted(set(_NAMESPACE_REF.findall(text))),
    }


def _gap_row(lo: int, hi: int, reason: str) -> dict[str, Any]:
    what = {
        "compacted": "folded into the compaction summary",
        "filtered": "left out by the focused filter",
        "excluded": "excluded: the model never sees it",
    }.get(reason, f"left out ({reason})")
    where = f"position {lo}" if hi - lo == 1 else f"positions {lo}-{hi - 1}"
    return {
        "type": "omitted",
        "reason": reason,
        "lo": lo,
        "hi": hi,
        "count": hi - lo,
        "text": f"{_plural(hi - lo, 'stored message')} {what} ({where})",
    }


def view_data(view: View, mode: str | None = None, *, row_limit: int = ROW_LIMIT) -> dict[str, Any]:
    """The view in order, as ``%slot preview`` prints it: each entry (role, tokens, label, its
    body) and, where they were, the stored positions left out. Entries on the system side
    come first; stored messages at their positions."""
    placed: list[tuple[int, dict[str, Any]]] = []
    for number, entry in enumerate(view.entries, 1):
        at = entry.position if entry.kind == "history" and entry.position is not None else -1
        pinned = entry.kind == "history" and entry.position in view.pinned
        placed.append((at, _entry_row(number, entry, pinned)))
    for gap in view.omitted:
        placed.append((gap.lo, _gap_row(gap.lo, gap.hi, gap.reason)))
    rows = [row for _, row in sorted(placed, key=lambda item: item[0])]
    hidden = 0
    stored = [i for i, row in enumerate(rows) if row["type"] == "entry" and row["kind"] == "history"]
    if len(stored) > row_limit:
        drop = set(stored[: len(stored) - row_limit])
        hidden = len(drop)
        note = {
            "type": "hidden",
            "count": hidden,
            "text": f"{_plural(hidden, 'earlier message')} sent but not shown here (%slot preview prints them all)",
        }
        rows = [note if i == stored[0] else row for i, row in enumerate(rows) if i == stored[0] or i not in drop]
    report = view.report
    budget = view.budget
    return {
        "slot": view.slot,
        "mode": mode or "",
        "count": len(view.entries),
        "tokens": view.tokens,
        "exact": view.exact,
        "encoding": view.encoding,
        "history_length": view.history_length,
        "omitted": sum(o.count for o in view.omitted),
        "hidden": hidden,
        "budget": None
        if report is None or budget is None
        else {
            "total": budget.total,
            "used": report.used,
            "history_used": report.history.used,
            "history_available": report.history_available,
            "needs_compaction": report.needs_compaction,
            "over": list(report.over),
        },
        "rows": rows,
    }


def view_summary(data: dict[str, Any]) -> str:
    """The line above a preview: how many messages, how many tokens, against the budget."""
    about = "" if data["exact"] else "~"
    line = f"slot {data['slot']}" + (f" ({data['mode']})" if data["mode"] else "")
    line += f" would send {_plural(data['count'], 'message')}, {about}{data['tokens']:,} tokens"
    budget = data["budget"]
    if budget is not None:
        line += (
            f" · history {about}{budget['history_used']:,} of {budget['history_available']:,} before compaction"
            f" · budget {budget['total']:,}"
        )
        if budget["needs_compaction"]:
            line += " · past the threshold: the next turn compacts"
    if data["omitted"]:
        line += f" · {_plural(data['omitted'], 'stored message')} left out"
    return line


def view_html(view: View, mode: str | None = None) -> str:
    """The preview as HTML: one collapsed ``<details>`` per message, what was left out greyed
    where it was. Every text escaped."""
    data = view_data(view, mode)
    e = html.escape
    out = [f'<div class="slotmagic-preview"><div>{e(view_summary(data))}</div>']
    for row in data["rows"]:
        if row["type"] != "entry":
            out.append(f'<div style="opacity:0.6"><i>… {e(row["text"])}</i></div>')
            continue
        label = f" · {e(row['label'])}" if row["label"] else ""
        head = f"[{row['number']}] <b>{e(row['role'])}</b> ({_plural(row['tokens'], 'token')}{label})"
        body = e(row["text"]) + (f"\n… {row['cut']:,} more characters" if row["cut"] else "")
        calls = "".join(f"\n-> tool call {e(c)}" for c in row["calls"])
        refs = "".join(f"\nnamespace reference: {e(r)}" for r in row["refs"])
        out.append(
            f'<details><summary>{head}</summary><pre style="white-space:pre-wrap">{body}{calls}{refs}</pre></details>'
        )
    out.append("</div>")
    return "".join(out)


# -- budgets ------------------------------------------------------------------------------------


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
    scale = max(budget.window, report.allowed, 1)
    return {
        "slot": budget.slot,
        "model": budget.model,
        "window": budget.window,
        "window_known": budget.window_known,
        "scale": scale,
        "exact": budget.exact,
        "categories": categories,
        "used": report.used,
        "allowed": report.allowed,
        "threshold": budget.threshold,
        "threshold_at": history_start + budget.threshold,
        "history_used": report.history.used,
        "needs_compaction": report.needs_compaction,
        "compactions": len(budget.compactions),
        "folded": sum(c.replaced for c in budget.compactions),
        "cached_tokens": budget.cached_tokens,
        "cache_saved": budget.cache_saved,
    }


def budget_line(data: dict[str, Any]) -> str:
    about = "" if data["exact"] else "~"
    window = f"{data['window']:,}" + ("" if data["window_known"] else " (assumed)")
    line = (
        f"slot {data['slot']} · {data['model']} · {about}{data['used']:,} of {window} tokens · "
        f"compaction past {data['threshold']:,} tokens of history ({about}{data['history_used']:,} now)"
    )
    if data.get("cached_tokens"):
        saved = "" if data.get("cache_saved") is None else f", saved ${data['cache_saved']:.4f}"
        line += f" · {data['cached_tokens']:,} tokens from the prompt cache{saved}"
    return line + (" · the next turn compacts" if data["needs_compaction"] else "")


def budget_html(budget: SlotBudget) -> str:
    """The budget as a table (category, used, allowed), every text escaped."""
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
