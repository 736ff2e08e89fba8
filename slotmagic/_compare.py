"""Several slots side by side: each one's last reply, or everything it said since they parted,
so a user can decide which branch to keep (``%slot compare A B [C]``)."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from ._columns import column_data, columns_html, columns_text
from ._core.records import TurnRecord
from ._errors import ConfigError
from ._markdown import reply_html
from ._store.base import History, Store

__all__ = ["Comparison", "compare_slots"]


@dataclass(frozen=True)
class Comparison:
    """The slots' columns (as :func:`slotmagic._columns.column_data` makes them) and one line
    saying where they part."""

    columns: tuple[dict[str, Any], ...]
    summary: str

    def to_text(self) -> str:
        return columns_text(self.columns, self.summary)

    def __str__(self) -> str:
        return self.to_text()

    def _repr_html_(self) -> str:
        return columns_html(self.columns, self.summary)


def _shared_turns(turns: list[list[TurnRecord]]) -> int:
    """How many turns, from the start, every history holds (the same stored rows)."""
    shared = 0
    while all(shared < len(t) for t in turns) and len({t[shared].origin for t in turns}) == 1:
        shared += 1
    return shared


def compare_slots(store: Store, session_id: str, slots: list[str], *, since_fork: bool = False) -> Comparison:
    """Each slot's last reply (its last turn), or with ``since_fork`` every turn after the
    point where all of them part."""
    if not 2 <= len(slots) <= 6:
        raise ConfigError(f"compare takes 2 to 6 slots, not {len(slots)}: e.g. %slot compare a b")
    if len(set(slots)) != len(slots):
        raise ConfigError("compare needs different slots: name each once")
    histories: list[History] = [store.history(session_id, slot) for slot in slots]  # unknown: SlotNotFound
    turns = [h.turns() for h in histories]
    shared = _shared_turns(turns)
    columns = []
    for slot, history, own in zip(slots, histories, turns, strict=True):
        since = own[shared:]
        shown = since if since_fork else own[-1:] if len(own) > shared else []
        blocks = _transcript(history, shown, whole=since_fork)
        text = "\n\n".join(f"[{role}] {content}" if role else content for role, content in blocks)
        usage = [t.info.usage for t in shown if t.info.usage is not None]
        costs = [t.info.cost for t in shown if t.info.cost is not None]
        models = list(dict.fromkeys(t.info.model for t in shown if t.info.model))
        where = f"{len(since)} turn{'s' if len(since) != 1 else ''} since the fork"
        tokens = f"{sum(u.input_tokens for u in usage)} in / {sum(u.output_tokens for u in usage)} out"
        column = column_data(slot, slot, ", ".join(models) or "-", "since the fork" if since_fork else "last reply")
        column.update(text=text or "(nothing since the fork)", stored=where, tokens=tokens if usage else "")
        if blocks:  # Markdown, as a fan-out column shows a reply
            column["html"] = "".join(
                (f"<p><strong>{html.escape(role)}</strong></p>" if role else "") + reply_html(content)
                for role, content in blocks
            )
        column["cost"] = f"${sum(costs):.4f}" if costs else None
        columns.append(column)
    summary = (
        f"{', '.join(slots)} share {shared} turn{'s' if shared != 1 else ''}, then part"
        if shared
        else f"{', '.join(slots)} share no history"
    )
    return Comparison(tuple(columns), summary)


def _transcript(history: History, turns: list[TurnRecord], *, whole: bool) -> list[tuple[str, str]]:
    """The turns' messages as (role, text); a last reply alone is its assistant text, with no
    role."""
    if not turns:
        return []
    if not whole:
        turn = turns[-1]
        replies = [m for m in history.messages(turn.start, turn.end) if m.role == "assistant" and m.content]
        return [("", replies[-1].content)] if replies else []
    return [
        (message.role, message.content)
        for turn in turns
        for message in history.messages(turn.start, turn.end)
        if message.content
    ]
