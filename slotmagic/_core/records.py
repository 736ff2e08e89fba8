"""Stored turn records: what a turn added to a slot and what produced it.

``TurnInfo`` is written with every turn and read back by replay, diff, export and the
footers, so it is one typed record with a version, converted to and from its stored JSON in
exactly one place (``to_dict`` / ``from_dict``). Records from before the version field
(version 0, a loose dict) are read too: a notebook run with an older slotmagic replays.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from .usage import Usage

TURN_INFO_VERSION = 1

TurnKind = Literal["turn", "append", "preset", "merge"]

# What turns of some kinds record in TurnInfo.extra, read by other modules than the writer's.
# A merge turn: the branch, how ("messages" or "summary"), the branch's length merged and its
# turns, and the summary's method.
_Merge = TypedDict("_Merge", {"merged_from": str, "as": str, "upto": int, "turns": list[int]})


class MergeExtra(_Merge, total=False):
    method: str  # the summary's, when the branch was merged as one


class FanOutExtra(TypedDict):
    """A fan-out column's turn: seconds from its request to its complete reply (None: not timed)."""

    latency: float | None


ForkReason = Literal["edit", "moved"]
_KINDS: tuple[TurnKind, ...] = ("turn", "append", "preset", "merge")


@dataclass(frozen=True, slots=True)
class CellRef:
    """The notebook cell a turn came from: its identity, its text and the request options it
    set itself (options taken from settings are not part of the cell)."""

    id: str
    text: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def same_text(self, other: CellRef) -> bool:
        """Whether running ``other`` again would send the same request as this cell did."""
        return self.text == other.text and dict(self.options) == dict(other.options)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "options": dict(self.options)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CellRef:
        return cls(str(data["id"]), str(data.get("text", "")), dict(data.get("options") or {}))


@dataclass(frozen=True, slots=True)
class ForkRef:
    """Why a turn is on a new branch: an edited cell (``edit``: forked just before ``turn``
    of ``slot``), or a slot that moved on while the reply was written (``moved``: forked at
    the end of the history the reply was made from)."""

    slot: str
    turn: int | None
    reason: ForkReason = "edit"

    def to_dict(self) -> dict[str, Any]:
        return {"slot": self.slot, "turn": self.turn, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ForkRef:
        reason = data.get("reason", "edit")
        turn = data.get("turn")
        return cls(str(data["slot"]), None if turn is None else int(turn), "moved" if reason == "moved" else "edit")


@dataclass(frozen=True, slots=True)
class TurnInfo:
    """What produced a turn. ``extra`` holds what the caller recorded with it (``info=``)."""

    kind: TurnKind = "turn"
    model: str | None = None
    system: str | None = None  # a system prompt given for this turn only
    cell: CellRef | None = None
    forked_from: ForkRef | None = None
    usage: Usage | None = None
    cost: float | None = None
    finish_reason: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    user: str | None = None  # who made the turn (a team's store: see _core/users.py)

    def replace(self, **changes: Any) -> TurnInfo:
        """A copy with ``changes``: its fields set straight into the slots (nothing here to
        check again; ``dataclasses.replace`` runs the frozen ``__init__``, and every turn the
        store writes on a team's store makes one)."""
        unknown = changes.keys() - _TURN_INFO_FIELDS
        if unknown:
            raise TypeError(f"TurnInfo has no field {sorted(unknown)[0]!r}")
        copy = object.__new__(TurnInfo)
        for name, put, get in _TURN_INFO_SLOTS:
            put(copy, changes[name] if name in changes else get(self))
        return copy

    def merged(self) -> MergeExtra | None:
        """What a merge turn recorded of its merge; None for any other turn."""
        extra = self.extra
        branch, how, upto, turns = (extra.get(k) for k in ("merged_from", "as", "upto", "turns"))
        if self.kind != "merge" or not isinstance(branch, str) or not isinstance(upto, int):
            return None  # another turn, or a record this version cannot read as a merge
        made: MergeExtra = {
            "merged_from": branch,
            "as": str(how),
            "upto": upto,
            "turns": [n for n in turns if isinstance(n, int)] if isinstance(turns, list) else [],
        }
        if isinstance(extra.get("method"), str):
            made["method"] = extra["method"]
        return made

    def latency(self) -> float | None:
        """Seconds a fan-out column's reply took, as it recorded them (:class:`FanOutExtra`)."""
        found = self.extra.get("latency")
        return float(found) if isinstance(found, (int, float)) and not isinstance(found, bool) else None

    def to_dict(self) -> dict[str, Any]:
        """The stored form. ``cell.id`` stays at ``$.cell.id``: the store indexes it."""
        out: dict[str, Any] = {"v": TURN_INFO_VERSION, "kind": self.kind}
        if self.model is not None:
            out["model"] = self.model
        if self.system is not None:
            out["system"] = self.system
        if self.cell is not None:
            out["cell"] = self.cell.to_dict()
        if self.forked_from is not None:
            out["forked_from"] = self.forked_from.to_dict()
        if self.usage is not None:
            out["usage"] = self.usage.to_dict()
        if self.cost is not None:
            out["cost"] = self.cost
        if self.finish_reason is not None:
            out["finish_reason"] = self.finish_reason
        if self.extra:
            out["extra"] = dict(self.extra)
        if self.user is not None:
            out["user"] = self.user
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TurnInfo:
        version = data.get("v", 0)
        if version == 0:
            return cls._from_v0(data)
        kind = data.get("kind", "turn")
        cost = data.get("cost")
        return cls(
            kind=kind if kind in _KINDS else "turn",
            model=data.get("model"),
            system=data.get("system"),
            cell=CellRef.from_dict(data["cell"]) if data.get("cell") else None,
            forked_from=ForkRef.from_dict(data["forked_from"]) if data.get("forked_from") else None,
            usage=Usage.from_dict(data["usage"]) if data.get("usage") else None,
            cost=float(cost) if isinstance(cost, (int, float)) and math.isfinite(cost) else None,
            finish_reason=data.get("finish_reason"),
            extra=dict(data.get("extra") or {}),
            user=data["user"] if isinstance(data.get("user"), str) else None,
        )

    @classmethod
    def _from_v0(cls, data: Mapping[str, Any]) -> TurnInfo:
        """Records written before ``v``: the known keys at the top level, the caller's too."""
        known = {"kind", "model", "system", "cell", "forked_from", "usage", "cost", "finish_reason"}
        upgraded = {key: data[key] for key in known if key in data}
        upgraded["extra"] = {key: value for key, value in data.items() if key not in known}
        upgraded["v"] = TURN_INFO_VERSION
        return cls.from_dict(upgraded)


_TURN_INFO_FIELDS = frozenset(TurnInfo.__slots__)
_TURN_INFO_SLOTS = tuple(
    (name, getattr(TurnInfo, name).__set__, getattr(TurnInfo, name).__get__) for name in TurnInfo.__slots__
)


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One stored turn: which messages it added to a slot's history, and what produced them.

    ``start`` is the position of the turn's first message in the slot's history and
    ``count`` how many messages it added. Turn 0 is a static slot's preset. ``origin`` says
    where the store keeps the turn: slots that share a turn report the same origin.
    """

    number: int
    start: int
    count: int
    info: TurnInfo = field(default_factory=TurnInfo)
    created_at: float = 0.0
    origin: tuple[int, int] = (0, 0)

    @property
    def end(self) -> int:
        return self.start + self.count
