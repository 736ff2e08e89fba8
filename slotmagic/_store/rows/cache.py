"""What a row store keeps in memory: slot rows as read, each session's rows, the parts of
each segment read so far, and the order slots are listed in.

Stored messages never change, so a cached segment only ever grows (see ``common.py`` for
when the caches are dropped).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from functools import lru_cache
from operator import attrgetter
from typing import Any

from ..._core.compaction import Compaction
from ..._core.context import ContextEvent
from ..._core.messages import ROLES, Message, fields_from_extra
from ..._core.records import TurnInfo, TurnRecord
from ..._core.slots import DEFAULT_SLOT, Slot, SlotConfig, SlotMeta, SlotSource
from ..history import Mark

# One string per role for every message read: a row's role is otherwise a string of its own.
_ROLE_STRINGS: dict[str, str] = {role: role for role in ROLES}


# Each field's slot, set through its descriptor: object.__setattr__ would look the name up on
# every call, nine times a message (a frozen dataclass refuses plain assignment).
_SET = {name: getattr(Message, name).__set__ for name in Message.__slots__}


def messages_from_rows(rows: Iterable[tuple[str, str, int, str | None]]) -> list[Message]:
    """Rebuild messages from trusted rows without re-running validation: loading a long
    history is otherwise dominated by object construction. Kept small, since a full slot's
    history stays in memory: a message has slots, not a dict; every message of a role shares
    its role string, and equal token counts one int."""
    out: list[Message] = []
    append = out.append
    new = object.__new__
    roles = _ROLE_STRINGS
    numbers: dict[int, int] = {}
    setters = _SET
    role_, content_, tokens_ = setters["role"], setters["content"], setters["tokens"]
    tool_calls_, tool_call_id_, name_ = setters["tool_calls"], setters["tool_call_id"], setters["name"]
    thinking_, is_error_, images_ = setters["thinking"], setters["is_error"], setters["images"]
    for role, content, tokens, extra in rows:
        message = new(Message)
        role_(message, roles.get(role, role))
        content_(message, content)
        tokens_(message, numbers.setdefault(tokens, tokens))
        if extra is None:  # the defaults (NO_EXTRA), set one by one: this runs for every message read
            tool_calls_(message, ())
            tool_call_id_(message, None)
            name_(message, None)
            thinking_(message, ())
            is_error_(message, False)
            images_(message, ())
        else:
            for name, value in fields_from_extra(json.loads(extra)).items():
                setters[name](message, value)
        append(message)
    return out


# The columns a turn record is read from (what a turn holds beyond them is TurnInfo's JSON).
TURN_COLUMNS = ("number", "start", "count", "info", "created_at")


def turn_record(key: int, got: Sequence[Any]) -> TurnRecord:
    """The record of turn row ``got`` (of ``TURN_COLUMNS``) of slot row ``key``."""
    number, start, count, info, created_at = got
    return TurnRecord(number, start, count, TurnInfo.from_dict(json.loads(info)), created_at, (key, number))


@dataclass(slots=True)
class SlotRow:
    """One row of the slots table, as cached.

    The fields ``__init__`` takes are the table's columns, in the order ``SLOT_COLUMNS`` lists
    them: the statements that read slot rows select that list, and a row is made of what they
    read (``SlotRow(*got)``). A new column of slots is one field here (its migrations aside):
    reading it, caching it and copying it (``rows/dump.py``) follow. The other fields are
    what is worked out from the columns, kept.
    """

    # A field's column is the one of its name, unless its metadata names another.
    key: int = field(metadata={"column": "id"})
    name: str
    parent: int | None
    fork_at: int
    length: int
    tokens: int
    turns: int
    # the JSON text as read, parsed when first asked
    stored_config: dict[str, Any] | str = field(metadata={"column": "config"})
    created_at: float
    deleted_at: float | None
    # set on a row hidden by %slot undo (see migrations v7): the JSON text as read, parsed when first asked
    stored_undo: dict[str, Any] | str | None = field(default=None, metadata={"column": "undo"})
    # worked out from the columns: (parent name, config), parsed once; the Slot last made of it,
    # and from what; its part of the state marker (as JSON, escaped)
    parsed: tuple[str | None, SlotConfig] | None = field(default=None, init=False)
    shown: tuple[tuple[Any, ...], Slot] | None = field(default=None, init=False)
    marked: tuple[tuple[Any, ...], tuple[str, str]] | None = field(default=None, init=False)

    @property
    def undo(self) -> dict[str, Any] | None:
        """What hid this row (``{"by": the row that replaced it, ...}``), or None."""
        stored = self.stored_undo
        if isinstance(stored, str):
            stored = self.stored_undo = json.loads(stored)
        assert stored is None or isinstance(stored, dict)
        return stored

    @undo.setter
    def undo(self, value: dict[str, Any] | None) -> None:
        self.stored_undo = value

    @property
    def live(self) -> bool:
        return self.deleted_at is None

    @property
    def config(self) -> dict[str, Any]:
        # parsed on demand: opening a session of 5,000 slots reads one or two of them
        if isinstance(self.stored_config, str):
            self.stored_config = json.loads(self.stored_config)
        assert isinstance(self.stored_config, dict)
        return self.stored_config

    @config.setter
    def config(self, value: dict[str, Any]) -> None:
        self.stored_config = value

    def slot_config(self, parent_name: str | None) -> SlotConfig:
        if self.parsed is None or self.parsed[0] != parent_name:
            stored = self.stored_config
            # most rows hold the same few texts: parse each text once per parent (SlotConfig is frozen)
            made = (
                _config_of(stored, parent_name)
                if isinstance(stored, str)
                else SlotConfig.from_dict(stored, parent_name)
            )
            self.parsed = (parent_name, made)
        return self.parsed[1]


# SlotRow's column fields and the slots columns they hold, in SlotRow's order: the one list the
# statements that read or copy slot rows are made from.
SLOT_COLUMNS: dict[str, str] = {f.name: f.metadata.get("column", f.name) for f in fields(SlotRow) if f.init}


@lru_cache(maxsize=4_096)
def _config_of(text: str, parent_name: str | None) -> SlotConfig:
    base = _parsed(text)
    return base if parent_name is None else _with_parent(base, parent_name)


@lru_cache(maxsize=1_024)
def _parsed(text: str) -> SlotConfig:
    """A stored config parsed (and checked) once per text; its parent is put in per slot."""
    return SlotConfig.from_dict(json.loads(text), None)


# Set through the slots' descriptors (the dataclasses are frozen): a config checked once is
# copied with another parent's name, not parsed and checked again (a tree of 10,000 slots
# under 500 parents).
_CONFIG_FIELDS = tuple((getattr(SlotConfig, n).__get__, getattr(SlotConfig, n).__set__) for n in SlotConfig.__slots__)
_SOURCE_FIELDS = tuple((getattr(SlotSource, n).__get__, getattr(SlotSource, n).__set__) for n in SlotSource.__slots__)


def _with_parent(config: SlotConfig, parent_name: str) -> SlotConfig:
    source = object.__new__(SlotSource)
    for get, put in _SOURCE_FIELDS:
        put(source, get(config.source))
    object.__setattr__(source, "parent_id", parent_name)
    made = object.__new__(SlotConfig)
    for get, put in _CONFIG_FIELDS:
        put(made, get(config))
    object.__setattr__(made, "source", source)
    return made


# Each field's slot, set through its descriptor, one after the other: a listing makes a Slot
# and a SlotMeta per slot (10,000 in a tree), and the frozen dataclasses' __init__ sets each
# field through object.__setattr__, ~3x the time.
_META_ID, _META_PARENT, _META_LENGTH, _META_TOKENS, _META_CREATED, _META_TURNS, _META_FORK = (
    getattr(SlotMeta, name).__set__
    for name in ("id", "parent_id", "message_count", "total_tokens", "created_at", "turns", "fork_at")
)
_SLOT_ID, _SLOT_CONFIG, _SLOT_META, _SLOT_CURRENT = (
    getattr(Slot, name).__set__ for name in ("id", "config", "meta", "current")
)


def made_slot(row: SlotRow, parent_name: str | None, config: SlotConfig, current: bool) -> Slot:
    """``Slot(row.name, config, SlotMeta(row.name, parent_name, ...), current)`` of a row as
    read (its values are the store's, checked when written)."""
    meta = object.__new__(SlotMeta)
    _META_ID(meta, row.name)
    _META_PARENT(meta, parent_name)
    _META_LENGTH(meta, row.length)
    _META_TOKENS(meta, row.tokens)
    _META_CREATED(meta, row.created_at)
    _META_TURNS(meta, row.turns)
    _META_FORK(meta, row.fork_at)
    slot = object.__new__(Slot)
    _SLOT_ID(slot, row.name)
    _SLOT_CONFIG(slot, config)
    _SLOT_META(slot, meta)
    _SLOT_CURRENT(slot, current)
    return slot


@dataclass(slots=True)
class SessionRows:
    """The slot rows of one session read so far (tombstones included), the live ones by
    name, and the current slot: every row, or (``partial_of`` set to the session's id) only
    the rows of the slots asked for and of the current slot, each with all its ancestors, so
    that a cell on one slot of 10,000 reads a few rows (``RowsBase._rows``)."""

    rows: dict[int, SlotRow]
    current: int | None
    by_name: dict[str, int] = field(default_factory=dict)
    order: tuple[list[tuple[Any, ...]], list[SlotRow]] | None = None  # tree_order's, and what it was made of
    partial_of: str | None = None  # the session's id while only some of its rows are read

    def __post_init__(self) -> None:
        # deleted_at, not the live property: a property call per row, 10,000 in a large session
        self.by_name = {row.name: key for key, row in self.rows.items() if row.deleted_at is None}

    def add(self, row: SlotRow) -> None:
        """A row read after the others (a partial set's slot asked for later)."""
        self.rows[row.key] = row
        if row.live:
            self.by_name[row.name] = row.key


@dataclass(slots=True)
class Segment:
    """The part of one slot's own rows read so far: positions ``start`` to ``start + len``."""

    created_at: float
    start: int
    messages: list[Message]
    turns_until: int = 0  # turns starting before this position are in ``turns``
    turns: list[TurnRecord] = field(default_factory=list)
    cached_until: int = 0  # turns served partly from a prompt cache, before this position, are in ``cached``
    cached: list[TurnRecord] = field(default_factory=list)
    system_until: int = 0  # the first system message was looked for before this position
    first_system: tuple[int, Message] | None = None
    compactions: list[Compaction] | None = None  # all of the segment's, once read
    counts: dict[str, dict[int, int]] = field(default_factory=dict)  # encoding -> position -> tokens
    marks: list[tuple[int, Mark, float]] | None = None  # (position, mark, created_at), once read
    context: list[ContextEvent] | None = None  # all of the row's working-context changes, once read

    @property
    def end(self) -> int:
        return self.start + len(self.messages)


def tree_order(rows: SessionRows) -> list[SlotRow]:
    """Live slots depth first, each after its nearest live ancestor, siblings by fork point
    then id: the same order whatever order they were made in, so a re-run notebook lists
    its slots as the first run did. Kept until a row's place changes (a turn changes none)."""
    assert rows.partial_of is None, "the order of a session's slots needs all its rows"
    shape = [
        (r.key, r.name, r.parent, r.fork_at, r.deleted_at, r.stored_undo and r.undo and r.undo.get("by"))
        for r in rows.rows.values()
    ]
    if rows.order is None or rows.order[0] != shape:
        rows.order = (shape, _order(rows))
    return rows.order[1]


def _order(rows: SessionRows) -> list[SlotRow]:
    children: dict[int | None, list[SlotRow]] = {}
    by_key = rows.rows
    for row in by_key.values():
        if row.deleted_at is None:
            parent = None if row.parent is None else by_key[row.parent]
            if parent is not None and parent.deleted_at is not None:  # deleted or undone: look further up
                parent = live_ancestor(rows, row)
            children.setdefault(None if parent is None else parent.key, []).append(row)
    out: list[SlotRow] = []
    stack = sorted(children.get(None, []), key=lambda r: (r.name != DEFAULT_SLOT, r.fork_at, r.name), reverse=True)
    by_fork = attrgetter("fork_at", "name")  # a sort key made in C: a tree of 10,000 slots sorts them all
    while stack:
        row = stack.pop()
        out.append(row)
        kids = children.get(row.key)
        if kids:  # most rows of a large tree are leaves
            stack.extend(sorted(kids, key=by_fork, reverse=True))
    return out


def replacement(rows: SessionRows, row: SlotRow) -> SlotRow | None:
    """The live row that now holds the slot a row hidden by undo was (None: not hidden by
    undo, or that slot is gone)."""
    seen: set[int] = set()
    current: SlotRow | None = row
    while current is not None and not current.live and current.undo is not None and current.key not in seen:
        seen.add(current.key)
        current = rows.rows.get(current.undo.get("by", -1))
    return current if current is not None and current.live else None


def live_ancestor(rows: SessionRows, row: SlotRow) -> SlotRow | None:
    """The nearest live ancestor: a deleted parent hands its children to its own parent; one
    hidden by undo, to the slot that replaced it (unless that is ``row`` itself)."""
    parent = row.parent
    while parent is not None:
        ancestor = rows.rows[parent]
        if ancestor.live:
            return ancestor
        replaced = replacement(rows, ancestor)
        if replaced is not None and replaced.key != row.key:
            return replaced
        parent = ancestor.parent
    return None
