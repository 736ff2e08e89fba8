"""Reviewed compaction: a summary previewed is kept, and applying it applies exactly that.

``%slot compact --preview`` asks the model for the summary and keeps it as the slot's *draft*
in the store (so another kernel, or the same notebook after a restart, finds it);
``--apply`` applies the draft without asking again; ``--edit`` and ``--summary`` put a text
of the user's own in its place. A draft holds the history it was made on (the slot's tip and
the compaction it follows): once the slot has moved on it is refused in one line, since it
would summarize something else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..._core.compaction import Compaction
from ..._errors import ConfigError
from ..._store.base import History, Store, Tip

_KEY = "compaction-draft:{session}:{slot}"  # the store's meta key


@dataclass(frozen=True)
class Draft:
    """A summary made for ``slot`` and not applied: ``tip`` the history it summarizes, ``after``
    where the compaction it follows stopped (0: none)."""

    slot: str
    compaction: Compaction
    tip: Tip
    after: int

    def to_json(self) -> str:
        tip = [self.tip.key, self.tip.length, self.tip.turns]
        return json.dumps({"v": 1, "compaction": self.compaction.to_dict(), "tip": tip, "after": self.after})

    @classmethod
    def from_json(cls, slot: str, text: str) -> Draft | None:
        try:
            data: dict[str, Any] = json.loads(text)
            key, length, turns = (int(x) for x in data["tip"])
            return cls(slot, Compaction.from_dict(data["compaction"]), Tip(key, length, turns), int(data["after"]))
        except (ValueError, KeyError, TypeError):
            return None  # an empty value (dropped) or one this version cannot read: no draft

    def check(self, history: History) -> None:
        """ConfigError unless ``history`` is still the one the draft summarizes."""
        previous = history.compaction()
        if history.tip != self.tip or (previous.upto if previous is not None else 0) != self.after:
            raise ConfigError(
                f"the summary previewed for slot {self.slot!r} no longer fits it: the slot has changed since "
                f"(%slot compact --preview {self.slot} makes a new one)"
            )


def keep_draft(store: Store, session_id: str, draft: Draft) -> None:
    store.update_meta(_KEY.format(session=session_id, slot=draft.slot), lambda _: draft.to_json())


def kept_draft(store: Store, session_id: str, slot: str) -> Draft | None:
    value = store.meta(_KEY.format(session=session_id, slot=slot))
    return None if not value else Draft.from_json(slot, value)


def drop_draft(store: Store, session_id: str, slot: str) -> None:
    key = _KEY.format(session=session_id, slot=slot)
    if store.meta(key):
        store.update_meta(key, lambda _: "")
