"""Making a recovered file consistent: what :func:`~.recovery.recover` copied is whatever rows
could be read; here each slot keeps the turns whose rows were all read, in order, the gaps the
others leave are closed, counters match rows, every session has its default and a current
slot, and the state beside the histories (pins, compactions, working context …) is kept only
where it still fits. Each step is one function; :func:`make_consistent` runs them in order."""

from __future__ import annotations

import bisect
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .recovery_report import RecoveryReport

# What a session holds beside its histories, carried by recover(): large tool results and
# workflows (per session), then pins, compactions and working-context changes (per slot row, at
# positions of its history). Token counts are not carried: they are counted again when needed.
STATE_TABLES = ("namespace", "workflows", "marks", "compactions", "context_events", "meta", "cells")

Turn = tuple[int, int, int]  # (number, start, count)
Placed = tuple[int, int]  # a message's (turn, tokens)


@dataclass
class Read:
    """The rows that were read and parse: slots by row id, messages by slot and position,
    turn rows by slot."""

    slots: dict[int, dict[str, Any]]
    messages: dict[int, dict[int, Placed]]
    turns: dict[int, list[Turn]]


@dataclass
class Histories:
    """Each slot's history as kept: the old positions, in order, and (turn, tokens) of each;
    the turns rebuilt from their messages (their row was lost); and for each slot whose
    positions move, its new fork point, its (old, new) positions and (turn, new start)s."""

    kept: dict[int, list[int]] = field(default_factory=dict)
    values: dict[int, list[Placed]] = field(default_factory=dict)
    made_turns: list[tuple[int, int, int, int]] = field(default_factory=list)  # (slot, number, start, count)
    moves: dict[int, tuple[int, list[tuple[int, int]], list[tuple[int, int]]]] = field(default_factory=dict)


def make_consistent(db: sqlite3.Connection, report: RecoveryReport) -> set[int]:
    """Keep every turn whose rows were all read, in order, and close the gaps the others
    leave (positions and fork points move up); make each slot's counters match its rows and
    every session hold its default slot and a current slot. Returns the slot rows whose
    positions moved."""
    read = read_rows(db)
    histories = settle_histories(read, report)
    add_rebuilt_turns(db, read, histories)
    renumber_slots(db, read, histories)
    drop_unplaceable_rows(db, report)
    complete_sessions(db)
    count_saved(db, report)
    return set(histories.moves)


def read_rows(db: sqlite3.Connection) -> Read:
    """Slots, messages and turns as read, leaving out rows whose values do not parse."""
    from .._core.messages import ROLES

    slots: dict[int, dict[str, Any]] = {}
    for key, session_id, name, parent, fork_at, length, config, created_at, deleted_at in db.execute(
        "SELECT id, session_id, name, parent, fork_at, length, config, created_at, deleted_at FROM slots"
    ):
        slots[key] = {
            "session": session_id,
            "name": name,
            "parent": parent,
            "fork_at": fork_at if isinstance(fork_at, int) and fork_at >= 0 else 0,
            "length": length if isinstance(length, int) else 0,
            "config": config,
            "created_at": created_at,
            "live": deleted_at is None,
        }
    messages: dict[int, dict[int, Placed]] = {}
    for slot, seq, turn, role, content, tokens, extra in db.execute(
        "SELECT slot, seq, turn, role, content, tokens, extra FROM messages"
    ):
        if (
            isinstance(seq, int)
            and isinstance(turn, int)
            and isinstance(tokens, int)
            and role in ROLES
            and isinstance(content, str)
            and (extra is None or _json_ok(extra))
        ):
            messages.setdefault(slot, {})[seq] = (turn, tokens)
    turns: dict[int, list[Turn]] = {}
    for slot, number, start, count, info in db.execute("SELECT slot, number, start, count, info FROM turns"):
        if (
            isinstance(number, int)
            and isinstance(start, int)
            and isinstance(count, int)
            and count > 0
            and _json_ok(info)
        ):
            turns.setdefault(slot, []).append((number, start, count))
    return Read(slots, messages, turns)


def settle_histories(read: Read, report: RecoveryReport) -> Histories:
    """Each slot's history, parents first: what it inherits up to its fork point, then its own
    turns that were read whole; what is lost is counted in ``report``."""
    histories = Histories()
    for key in sorted(read.slots):
        _settle(read, histories, report, key)
    return histories


def _settle(read: Read, out: Histories, report: RecoveryReport, key: int, seen: frozenset[int] = frozenset()) -> None:
    if key in out.kept:
        return
    row = read.slots[key]
    parent, fork_at = row["parent"], row["fork_at"]
    if parent is not None and parent in read.slots and parent not in seen:
        _settle(read, out, report, parent, seen | {key})
        cut = bisect.bisect_left(out.kept[parent], fork_at)
        old_positions, history = list(out.kept[parent][:cut]), list(out.values[parent][:cut])
        new_fork = cut
        inherited_whole = cut == fork_at and all(p == i for i, p in enumerate(old_positions))
    else:
        old_positions, history, new_fork = [], [], 0
        inherited_whole = fork_at == 0
        row["parent"] = None
    mine = read.messages.get(key, {})
    seq_moves: list[tuple[int, int]] = []
    turn_moves: list[tuple[int, int]] = []
    end = fork_at
    lost_turns = 0
    candidates = [(number, start, count, False) for number, start, count in read.turns.get(key, [])]
    candidates += _unrecorded_turns(mine, read.turns.get(key, []), fork_at, row["length"])
    for number, start, count, made in sorted(candidates, key=lambda t: t[1]):
        if start < end:
            continue  # overlaps a turn kept before it: not a turn of this history
        part = [mine.get(seq) for seq in range(start, start + count)]
        if any(m is None or m[0] != number for m in part):
            lost_turns += 1
            continue
        if made:
            out.made_turns.append((key, number, start, count))
        turn_moves.append((number, len(history)))
        for offset, m in enumerate(part):
            assert m is not None
            seq_moves.append((start + offset, len(history)))
            history.append(m)
            old_positions.append(start + offset)
        end = start + count
    out.kept[key], out.values[key] = old_positions, history
    lost = max(0, row["length"] - fork_at) - len(seq_moves)
    if lost > 0 or not inherited_whole:
        report.lost_messages += max(0, lost)
        report.lost_turns += lost_turns
        if row["live"]:
            report.lost_slots.append(f"{row['session']}/{row['name']}")
    if not inherited_whole or any(old != new for old, new in seq_moves):
        out.moves[key] = (new_fork, seq_moves, turn_moves)
    row["fork_at"] = new_fork


def add_rebuilt_turns(db: sqlite3.Connection, read: Read, histories: Histories) -> None:
    """A row for each turn whose row was lost but whose messages were all read."""
    created = max((r["created_at"] for r in read.slots.values() if isinstance(r["created_at"], float)), default=0.0)
    db.executemany(
        "INSERT OR IGNORE INTO turns (slot, number, start, count, info, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        [
            (key, n, start, count, json.dumps({"kind": "append", "recovered": True}), created)
            for key, n, start, count in histories.made_turns
        ],
    )


def renumber_slots(db: sqlite3.Connection, read: Read, histories: Histories) -> None:
    """Move each slot's messages and turns to their new positions (dropping the rest), and set
    its parent, fork point, counters and a config that parses."""
    from .._core.slots import SlotConfig

    for key, row in read.slots.items():
        history = histories.values[key]
        length = len(history)
        if key in histories.moves:
            _, seq_moves, turn_moves = histories.moves[key]
            # Out of the way first (negative), then into place: positions are a primary key.
            db.execute("UPDATE messages SET seq = -1 - seq WHERE slot = ?", (key,))
            db.executemany(
                "UPDATE messages SET seq = ? WHERE slot = ? AND seq = ?",
                [(new, key, -1 - old) for old, new in seq_moves],
            )
            db.execute("DELETE FROM messages WHERE slot = ? AND seq < 0", (key,))
            db.execute("UPDATE turns SET start = -1 - start WHERE slot = ?", (key,))
            db.executemany(
                "UPDATE turns SET start = ? WHERE slot = ? AND number = ?", [(new, key, n) for n, new in turn_moves]
            )
            db.execute("DELETE FROM turns WHERE slot = ? AND start < 0", (key,))
        else:
            db.execute("DELETE FROM messages WHERE slot = ? AND (seq < ? OR seq >= ?)", (key, row["fork_at"], length))
            db.execute("DELETE FROM turns WHERE slot = ? AND (start < ? OR start >= ?)", (key, row["fork_at"], length))
        tokens = sum(t for _, t in history)
        last_turn = max((n for n, _ in history), default=0)
        config = row["config"]
        try:
            SlotConfig.from_dict(json.loads(config))
        except Exception:  # a damaged config: the slot is kept as a plain full slot
            config = json.dumps(SlotConfig().to_dict())
        db.execute(
            "UPDATE slots SET parent = ?, fork_at = ?, length = ?, tokens = ?, turns = ?, config = ? WHERE id = ?",
            (row["parent"], row["fork_at"], length, tokens, last_turn, config, key),
        )


def drop_unplaceable_rows(db: sqlite3.Connection, report: RecoveryReport) -> None:
    """Rows whose slot row was lost cannot be placed in any history; nor can messages that no
    kept turn covers."""
    report.lost_turns += db.execute("SELECT COUNT(*) FROM turns WHERE slot NOT IN (SELECT id FROM slots)").fetchone()[0]
    db.execute("DELETE FROM turns WHERE slot NOT IN (SELECT id FROM slots)")
    report.lost_messages += db.execute(
        "SELECT COUNT(*) FROM messages WHERE slot NOT IN (SELECT id FROM slots)"
    ).fetchone()[0]
    db.execute(
        "DELETE FROM messages WHERE NOT EXISTS (SELECT 1 FROM turns t WHERE t.slot = messages.slot"
        " AND messages.seq >= t.start AND messages.seq < t.start + t.count)"
    )


def complete_sessions(db: sqlite3.Connection) -> None:
    """Sessions: one row each, a live default slot, a current slot that exists."""
    from .._core.slots import DEFAULT_SLOT, SlotConfig

    for (session_id,) in db.execute("SELECT DISTINCT session_id FROM slots").fetchall():
        created = db.execute("SELECT MIN(created_at) FROM slots WHERE session_id = ?", (session_id,)).fetchone()[0]
        db.execute(
            "INSERT OR IGNORE INTO sessions (id, current_slot, created_at) VALUES (?, NULL, ?)", (session_id, created)
        )
    for session_id, current, created in db.execute("SELECT id, current_slot, created_at FROM sessions").fetchall():
        default = db.execute(
            "SELECT id FROM slots WHERE session_id = ? AND name = ? AND deleted_at IS NULL", (session_id, DEFAULT_SLOT)
        ).fetchone()
        if default is None:
            cursor = db.execute(
                "INSERT INTO slots (session_id, name, config, created_at) VALUES (?, ?, ?, ?)",
                (session_id, DEFAULT_SLOT, json.dumps(SlotConfig().to_dict()), created or 0.0),
            )
            default = (cursor.lastrowid,)
        live = db.execute(
            "SELECT 1 FROM slots WHERE id = ? AND session_id = ? AND deleted_at IS NULL", (current, session_id)
        ).fetchone()
        if live is None:
            db.execute("UPDATE sessions SET current_slot = ? WHERE id = ?", (default[0], session_id))


def count_saved(db: sqlite3.Connection, report: RecoveryReport) -> None:
    report.sessions = db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
    report.slots = db.execute("SELECT COUNT(*) FROM slots WHERE deleted_at IS NULL").fetchone()[0]
    report.turns = db.execute("SELECT COUNT(*) FROM turns WHERE number > 0").fetchone()[0]
    report.messages = db.execute("SELECT COUNT(*) FROM messages").fetchone()[0]


def keep_state(db: sqlite3.Connection, moved: set[int], report: RecoveryReport) -> None:
    """Keep the state rows that still fit the recovered histories and parse; count the rest."""
    from .._core.cells import CellRecord
    from .._core.compaction import Compaction
    from .._core.context import ContextEvent
    from .._core.workflow import Workflow
    from ..tokens._calibration import Calibration

    lengths = dict(db.execute("SELECT id, length FROM slots").fetchall())
    sessions = {row[0] for row in db.execute("SELECT id FROM sessions")}

    def parses(read: Callable[[], object]) -> bool:
        try:
            read()
        except Exception:
            return False
        return True

    def fits(slot: int, position: int) -> bool:
        return slot in lengths and slot not in moved and isinstance(position, int) and 0 <= position <= lengths[slot]

    checks: dict[str, tuple[str, Callable[[tuple[Any, ...]], bool]]] = {
        "namespace": (
            "session_id, key, tool, content",
            lambda r: r[0] in sessions and all(isinstance(v, str) for v in r[1:]),
        ),
        "workflows": (
            "session_id, name, record",
            lambda r: r[0] in sessions and parses(lambda: Workflow.from_dict(r[1], json.loads(r[2]))),
        ),
        "marks": (
            "slot, position, mark",
            lambda r: fits(r[0], r[1]) and r[1] < lengths[r[0]] and r[2] in ("pin", "exclude", "clear"),
        ),
        "compactions": (
            "slot, at, record",
            lambda r: fits(r[0], r[1]) and parses(lambda: Compaction.from_dict(json.loads(r[2]))),
        ),
        "context_events": (
            "slot, at, turn, event",
            lambda r: fits(r[0], r[1]) and parses(lambda: ContextEvent.from_dict(json.loads(r[3]), r[2], r[1])),
        ),
        "cells": (  # what a notebook's magic cells did: a Run All after recovery replays them
            "session_id, record",
            lambda r: r[0] in sessions and parses(lambda: CellRecord.from_dict(json.loads(r[1]))),
        ),
        "meta": (
            "key, value",
            lambda r: r[0] != "calibration" or parses(lambda: Calibration.from_dict(json.loads(r[1]))),
        ),
    }
    for table, (columns, keep) in checks.items():
        gone = [
            (rowid,) for rowid, *row in db.execute(f"SELECT rowid, {columns} FROM {table}").fetchall() if not keep(row)
        ]
        if gone:
            db.executemany(f"DELETE FROM {table} WHERE rowid = ?", gone)
            report.dropped[table] = report.dropped.get(table, 0) + len(gone)
    # At most one active workflow per session survives a damaged page that left two.
    db.execute(
        "UPDATE workflows SET active = 0 WHERE active = 1 AND rowid NOT IN"
        " (SELECT MIN(rowid) FROM workflows WHERE active = 1 GROUP BY session_id)"
    )


def _unrecorded_turns(
    mine: dict[int, tuple[int, int]], recorded: list[tuple[int, int, int]], fork_at: int, length: int
) -> list[tuple[int, int, int, bool]]:
    """Turns whose row was lost but whose messages were all read: a run of messages of one
    turn number with a message of another turn (or the history's start or end) on each side,
    so it is known to be whole."""
    covered = {seq for _, start, count in recorded for seq in range(start, start + count)}
    out: list[tuple[int, int, int, bool]] = []
    seqs = sorted(seq for seq in mine if seq >= fork_at and seq not in covered)
    i = 0
    while i < len(seqs):
        start, number = seqs[i], mine[seqs[i]][0]
        j = i
        while j + 1 < len(seqs) and seqs[j + 1] == seqs[j] + 1 and mine[seqs[j + 1]][0] == number:
            j += 1
        end = seqs[j] + 1
        before = start == fork_at or (start - 1 in mine and mine[start - 1][0] != number)
        after = end == length or (end in mine and mine[end][0] != number)
        if before and after:
            out.append((number, start, end - start, True))
        i = j + 1
    return out


def _json_ok(text: object) -> bool:
    if not isinstance(text, str):
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
