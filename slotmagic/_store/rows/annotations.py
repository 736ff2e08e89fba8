"""What is said about a history, kept beside its messages: compactions, working-context
changes, pins and exclusions (each an append-only row numbered per slot), and the session's
workflows.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from ..._core.compaction import Compaction
from ..._core.context import ContextEvent, WorkingContext
from ..._core.workflow import Workflow, check_workflow_name, no_workflow
from ..._errors import ConfigError, DamagedRecord, SlotMoved, StoreError
from ..history import MARKS, Mark, Tip
from .common import Connection
from .segments import SegmentRows


class AnnotationRows(SegmentRows):
    """Compactions, working context, pins and exclusions, workflows."""

    # -- compactions ---------------------------------------------------------------------------

    def add_compaction(
        self, session_id: str, slot_id: str | None, compaction: Compaction, *, base: Tip | None = None
    ) -> Compaction:
        with self._write() as db:
            row = self._row(self._rows(db, session_id, every=False), slot_id)
            if base is not None and base != Tip(row.key, row.length, row.turns):
                raise SlotMoved(row.name)
            if not 0 < compaction.upto <= compaction.at <= row.length:
                raise StoreError(
                    f"a compaction of {row.name!r} must fold 1 to {row.length} messages, not {compaction.upto}"
                )
            number = db.execute("SELECT COALESCE(MAX(number), 0) + 1 FROM compactions WHERE slot = ?", (row.key,))
            number = number.fetchone()[0]
            now = time.time()
            db.execute(
                "INSERT INTO compactions (slot, number, at, record, created_at) VALUES (?, ?, ?, ?, ?)",
                (row.key, number, compaction.at, json.dumps(compaction.to_dict(), ensure_ascii=False), now),
            )
            stored = compaction.replace(created_at=now, origin=(row.key, number))
            segment = self._segments.get(row.key)
            if segment is not None and segment.compactions is not None:
                segment.compactions.append(stored)
            return stored

    # -- working context and workflows ---------------------------------------------------------

    def change_context(
        self,
        session_id: str,
        slot_id: str | None,
        change: Callable[[WorkingContext], ContextEvent | None],
    ) -> tuple[WorkingContext, ContextEvent | None]:
        with self._write() as db:
            rows = self._rows(db, session_id, every=False)
            row = self._row(rows, slot_id)
            context = self._history(rows, row).context()
            event = change(context)
            if event is None:
                return context, None
            number = db.execute(
                "SELECT COALESCE(MAX(number), 0) + 1 FROM context_events WHERE slot = ?", (row.key,)
            ).fetchone()[0]
            now = time.time()
            stamped = event.stamped(row.turns + 1, row.length, now, (row.key, number))
            db.execute(
                "INSERT INTO context_events (slot, number, at, turn, event, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (row.key, number, stamped.at, stamped.turn, json.dumps(stamped.to_dict(), ensure_ascii=False), now),
            )
            segment = self._segments.get(row.key)
            if segment is not None:
                segment.context = None  # read again, as stored, when next needed
            return context.apply(stamped), stamped

    def workflows(self, session_id: str) -> list[Workflow]:
        """The session's workflows that can be read (a damaged one is left out: see
        :meth:`damaged_workflows`)."""
        out = []
        with self._read() as db:
            for name, record, active in db.execute(
                "SELECT name, record, active FROM workflows WHERE session_id = ? ORDER BY created_at, name",
                (session_id,),
            ):
                try:
                    out.append(_workflow(name, record, bool(active)))
                except DamagedRecord:
                    continue
        return out

    def damaged_workflows(self, session_id: str) -> list[DamagedRecord]:
        """Why each workflow of the session that cannot be read cannot be."""
        out = []
        with self._read() as db:
            for name, record, active in db.execute(
                "SELECT name, record, active FROM workflows WHERE session_id = ? ORDER BY created_at, name",
                (session_id,),
            ):
                try:
                    _workflow(name, record, bool(active))
                except DamagedRecord as exc:
                    out.append(exc)
        return out

    def active_workflow(self, session_id: str) -> Workflow | None:
        with self._read() as db:
            # Every view asks: kept until it may have changed (see _workflows_changed), so a
            # turn, which changes none, does not make the next one read it again.
            if session_id in self._active_workflows:
                kept = self._active_workflows[session_id]
                if isinstance(kept, DamagedRecord):
                    raise kept
                return kept
            found = db.execute(
                "SELECT name, record FROM workflows WHERE session_id = ? AND active = 1", (session_id,)
            ).fetchone()
            try:
                workflow = None if found is None else _workflow(found[0], found[1], True)
            except DamagedRecord as exc:
                self._active_workflows[session_id] = exc
                raise
            self._active_workflows[session_id] = workflow
            return workflow

    def update_workflow(
        self,
        session_id: str,
        name: str,
        change: Callable[[Workflow | None], Workflow | None],
        *,
        activate: bool = False,
    ) -> Workflow | None:
        check_workflow_name(name)
        with self._write() as db:
            self._workflows_changed(session_id)
            found = db.execute(
                "SELECT record, active FROM workflows WHERE session_id = ? AND name = ?", (session_id, name)
            ).fetchone()
            try:
                before = None if found is None else _workflow(name, found[0], bool(found[1]))
            except DamagedRecord:
                before = None  # damaged: defining it again repairs it, deleting it removes it
            after = change(before)
            if after is None:
                db.execute("DELETE FROM workflows WHERE session_id = ? AND name = ?", (session_id, name))
                return None
            if after.name != name:
                raise StoreError(f"a change of workflow {name!r} cannot rename it to {after.name!r}")
            record = json.dumps(after.to_dict(), ensure_ascii=False)
            if before is None:
                db.execute(
                    "INSERT INTO workflows (session_id, name, record, created_at) VALUES (?, ?, ?, ?)",
                    (session_id, name, record, time.time()),
                )
            elif after.to_dict() != before.to_dict():
                db.execute(
                    "UPDATE workflows SET record = ? WHERE session_id = ? AND name = ?", (record, session_id, name)
                )
            active = before is not None and before.active
            if activate and not active:
                self._activate(db, session_id, name)
                active = True
            return after.replace(active=active)

    def use_workflow(self, session_id: str, name: str | None) -> Workflow | None:
        with self._write() as db:
            self._workflows_changed(session_id)
            if name is None:
                db.execute("UPDATE workflows SET active = 0 WHERE session_id = ? AND active = 1", (session_id,))
                return None
            found = db.execute(
                "SELECT record, active FROM workflows WHERE session_id = ? AND name = ?", (session_id, name)
            ).fetchone()
            if found is None:
                names = [r[0] for r in db.execute("SELECT name FROM workflows WHERE session_id = ?", (session_id,))]
                raise no_workflow(name, names)
            if not found[1]:
                self._activate(db, session_id, name)
            return _workflow(name, found[0], True)

    def _workflows_changed(self, session_id: str) -> None:
        """A write to the session's workflows: its active one is read again, and the write
        names the session (other kernels then read again that session's, not everything)."""
        self._active_workflows.pop(session_id, None)
        if self._touched is not None:
            self._touched.add(session_id)

    def _activate(self, db: Connection, session_id: str, name: str) -> None:
        db.execute("UPDATE workflows SET active = 0 WHERE session_id = ? AND active = 1", (session_id,))
        db.execute("UPDATE workflows SET active = 1 WHERE session_id = ? AND name = ?", (session_id, name))

    # -- exploring: pins and exclusions ----------------------------------------------------------

    def mark_message(self, session_id: str, slot_id: str | None, position: int, mark: Mark) -> None:
        if mark not in MARKS:
            raise ConfigError(f"unknown mark {mark!r}; use one of {', '.join(MARKS)}")
        with self._write() as db:
            row = self._row(self._rows(db, session_id, every=False), slot_id)
            if not 0 <= position < row.length:
                raise ConfigError(
                    f"slot {row.name!r} has no message {position + 1}: it holds {row.length} (%slot show lists them)"
                )
            now = self._insert_numbered(db, "marks", row.key, "position, mark", (position, mark))
            segment = self._segments.get(row.key)
            if segment is not None and segment.marks is not None:
                segment.marks.append((position, mark, now))

    def _insert_numbered(self, db: Connection, table: str, key: int, columns: str, values: tuple[Any, ...]) -> float:
        """Insert a row numbered after the segment's last; returns its created_at."""
        number = db.execute(f"SELECT COALESCE(MAX(number), 0) + 1 FROM {table} WHERE slot = ?", (key,)).fetchone()[0]
        marks = ", ".join("?" * (len(values) + 3))
        now = time.time()
        db.execute(
            f"INSERT INTO {table} (slot, number, {columns}, created_at) VALUES ({marks})", (key, number, *values, now)
        )
        return now


def _workflow(name: str, record: str, active: bool) -> Workflow:
    """A stored workflow; ``DamagedRecord`` saying how to repair it when it cannot be read."""
    try:
        return Workflow.from_dict(name, json.loads(record), active=active)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        why = " ".join(str(exc).split())[:120] or type(exc).__name__
        raise DamagedRecord(
            f"workflow {name!r} cannot be read ({why}): %workflow delete {name} removes it, "
            f"%%workflow {name} defines it again",
            name,
        ) from None
