"""The side-by-side view of a fan-out as plain data, text and HTML.

A column is a plain dict (what the columns widget syncs): ``key``, ``slot``, ``model``,
``status`` (waiting, streaming, done, replayed, failed, interrupted), ``text``, ``html`` (the text
as Markdown, raw HTML escaped: see ``_markdown.py``), ``stored`` (where the reply went, a line),
``tokens``, ``latency``, ``cost`` and ``error``. The text form is what
``text/plain`` carries (side by side while the columns fit 100 characters, else one under the
other); the HTML form is a table with every text escaped, for GitHub and nbconvert.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from ._engine.run.fanout import ColumnResult, format_seconds
from ._engine.run.reply import Reply
from ._markdown import reply_html

__all__ = ["column_data", "columns_html", "columns_text", "stored_line"]

WIDTH = 100  # characters of the text form
_GAP = " │ "
_MIN_COLUMN = 28  # narrower than this, columns go one under the other


def _cost(usd: float | None) -> str | None:
    if usd is None:
        return None
    return "<$0.0001" if 0 < usd < 0.0001 else f"${usd:.4f}"


def stored_line(reply: Reply, branch: bool) -> str:
    """Where a column's reply is: replayed, a new branch, an edit's fork, or its slot's turn."""
    forked = reply.forked_from
    if forked is not None and forked.reason == "edit":
        line = f"edited: new branch {reply.slot} from {forked.slot}"
    elif forked is not None:
        line = f"{forked.slot} moved on: stored on new branch {reply.slot}"
    elif branch:
        line = f"new branch {reply.slot}, turn {reply.turn}"
    else:
        line = f"slot {reply.slot}, turn {reply.turn}"
    # A replay reads as the first run did, marked as a single turn's footer is.
    return f"replayed from the store, no model call · {line}" if reply.replayed else line


def column_data(
    key: str, slot: str, model: str, status: str, text: str = "", result: ColumnResult | None = None
) -> dict[str, Any]:
    """One column as the widget and the text forms take it."""
    data: dict[str, Any] = {
        "key": key, "slot": slot, "model": model, "status": status, "text": text,
        "stored": "", "tokens": "", "latency": None, "cost": None, "error": "",
    }  # fmt: skip
    if result is not None:
        reply = result.reply
        if reply is not None:
            data.update(
                text=reply.text,
                model=reply.model,
                stored=stored_line(reply, result.branch),
                tokens=f"{reply.usage.input_tokens} in / {reply.usage.output_tokens} out",
                cost=_cost(reply.cost),
            )
            data["latency"] = result.latency  # a failure's time says nothing about the model
    data["html"] = reply_html(data["text"])  # the reply as Markdown, as a %%turn shows it
    return data


def _facts(column: Mapping[str, Any]) -> str:
    """tokens · latency · cost, as far as known."""
    parts = [column["tokens"]] if column["tokens"] else []
    if column["latency"] is not None:
        parts.append(format_seconds(column["latency"]))
    if column["cost"]:
        parts.append(column["cost"])
    return " · ".join(parts)


def _head(column: Mapping[str, Any]) -> list[str]:
    title = column["key"] if column["key"] == column["slot"] else f"{column['key']} (from {column['slot']})"
    lines = [title, f"{column['model']} · {column['status']}"]
    if column["stored"]:
        lines.append(column["stored"])
    if _facts(column):
        lines.append(_facts(column))
    return lines


def _body(column: Mapping[str, Any]) -> str:
    if column["error"]:
        return f"failed: {column['error']}"
    if column["status"] == "interrupted":
        return (column["text"] + "\n\n" if column["text"] else "") + "interrupted: nothing stored"
    return str(column["text"]) or ("…" if column["status"] in ("waiting", "streaming") else "")


def columns_text(columns: Sequence[Mapping[str, Any]], summary: str) -> str:
    """The columns side by side (one under the other when they would be too narrow), the
    summary line under them."""
    if not columns:
        return summary
    width = (WIDTH - len(_GAP) * (len(columns) - 1)) // len(columns)
    if len(columns) == 1 or width < _MIN_COLUMN:
        blocks = []
        for column in columns:
            head = " · ".join(_head(column))
            blocks.append(f"── {head} ──\n{_body(column)}")
        return "\n\n".join([*blocks, summary])
    wrapped = []
    for column in columns:
        lines = [piece for line in _head(column) for piece in textwrap.wrap(line, width) or [""]]
        lines.append("─" * width)
        for line in _body(column).split("\n"):
            lines.extend(textwrap.wrap(line, width, replace_whitespace=False) or [""])
        wrapped.append(lines)
    height = max(len(lines) for lines in wrapped)
    rows = [
        _GAP.join((lines[i] if i < len(lines) else "").ljust(width) for lines in wrapped).rstrip()
        for i in range(height)
    ]
    return "\n".join([*rows, "", summary])


def columns_html(columns: Sequence[Mapping[str, Any]], summary: str) -> str:
    """A table, one column per reply: replies as Markdown (raw HTML escaped), every other
    text escaped."""
    esc = html.escape
    heads = "".join(
        "<th style='text-align:left;vertical-align:top'>" + "<br>".join(esc(x) for x in _head(c)) + "</th>"
        for c in columns
    )
    bodies = "".join(
        "<td style='text-align:left;vertical-align:top'>"
        + (
            c["html"]  # Markdown rendered with raw HTML escaped (_markdown.py)
            if c.get("html") and not c["error"] and c["status"] != "interrupted"
            else "<pre style='white-space:pre-wrap;text-align:left'>" + esc(_body(c)) + "</pre>"
        )
        + "</td>"
        for c in columns
    )
    return f"<table class='slotmagic-columns'><tr>{heads}</tr><tr>{bodies}</tr></table><p><em>{esc(summary)}</em></p>"
