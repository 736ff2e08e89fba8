"""The cell record: what a magic run from a notebook cell did, kept so that running the cell
again with the same text replays it (``_engine/plan/cells.py`` decides; the store keeps it).

A record holds what the cell showed (printed text and displayed outputs, a widget as its
static form), whether the command changes the session or only reads it, the current slot
it left, a marker of the session's state right after it, and ``after``: the magic run just
before it, which tells a Run All that retraces the recorded run from cells run by hand later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .._errors import DamagedRecord

__all__ = ["START", "CellOutput", "CellRecord", "Kind"]

# What a command does to the session: ``changes`` (replayed when run again unchanged),
# ``reads`` (shows the session as of its cell while a Run All retraces the first run), or
# ``runs`` (not recorded: it acts on the kernel's settings or on files, e.g. %slot session).
Kind = Literal["changes", "reads", "runs", "turn"]
START = ""  # what a notebook's first magic cell ran after: nothing


@dataclass(frozen=True)
class CellOutput:
    """One output: printed text (``stream``), a displayed mimebundle (``display``), or a live
    widget's class and state (``widget``, in ``data``; its static form is the next output)."""

    kind: Literal["stream", "display", "widget"]
    text: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "stream":
            return {"kind": "stream", "text": self.text}
        return {"kind": self.kind, "data": dict(self.data), "metadata": dict(self.metadata)}

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> CellOutput:
        if value.get("kind") == "stream" and isinstance(value.get("text"), str):
            return cls("stream", value["text"])
        kind = value.get("kind")
        if (kind == "display" or kind == "widget") and isinstance(value.get("data"), Mapping):
            metadata = value.get("metadata")
            return cls(kind, data=dict(value["data"]), metadata=dict(metadata or {}))
        raise DamagedRecord(f"a cell record holds an output slotmagic cannot read: {str(value)[:80]}", "cell")


@dataclass(frozen=True)
class CellRecord:
    """What one magic from one cell did the first time (see the module's docstring)."""

    command: str  # the magic as written, e.g. "%slot compact" (for messages)
    kind: Kind
    outputs: tuple[CellOutput, ...] = ()
    current: str | None = None  # the current slot it left
    marker: str = ""  # the session's state right after it (``Store.state_marker``)
    after: str = START  # the key of the magic run just before it, in the run it was recorded in
    notes: tuple[str, ...] = ()  # a turn's: the notes under its reply (a compaction it made)
    seq: int = 0  # set by the store: the order cells were recorded in

    def with_seq(self, seq: int) -> CellRecord:
        return replace(self, seq=seq)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": 1,
            "command": self.command,
            "kind": self.kind,
            "outputs": [o.to_dict() for o in self.outputs],
            "current": self.current,
            "marker": self.marker,
            "after": self.after,
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, value: Mapping[str, Any], seq: int = 0) -> CellRecord:
        kind = value.get("kind")
        outputs = value.get("outputs")
        if kind not in ("changes", "reads", "turn") or not isinstance(outputs, list):
            raise DamagedRecord(f"a cell record slotmagic cannot read: {str(value)[:80]}", "cell")
        current = value.get("current")
        return cls(
            str(value.get("command", "")),
            kind,
            tuple(CellOutput.from_dict(o) for o in outputs),
            current if isinstance(current, str) else None,
            str(value.get("marker", "")),
            str(value.get("after", START)),
            tuple(str(n) for n in value.get("notes") or ()),
            seq,
        )
