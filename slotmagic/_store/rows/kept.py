"""What a store keeps beside slots: large tool results (the namespace store), small values
kept across sessions (meta), what notebook cells did, and a digest of a session's state."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import suppress

from ..._core.cells import CellRecord
from ..._errors import DamagedRecord
from .cache import SlotRow
from .common import RowsBase


class KeptRows(RowsBase):
    """The namespace store, meta, cell records and the state marker."""

    # -- large tool results (the namespace store) -----------------------------------------

    def namespace_put(self, session_id: str, key: str, tool: str, content: str) -> bool:
        with self._write() as db:
            cursor = db.execute(
                "INSERT INTO namespace (session_id, key, tool, content, created_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                (session_id, key, tool, self._text_in(content), time.time()),
            )
            return cursor.rowcount > 0

    def namespace_get(self, session_id: str, key: str) -> str | None:
        with self._read() as db:
            row = db.execute("SELECT content FROM namespace WHERE session_id = ? AND key = ?", (session_id, key))
            found = row.fetchone()
            return None if found is None else self._messages([("tool", found[0], 0, None)])[0].content

    def namespace_has(self, session_id: str, key: str) -> bool:
        with self._read() as db:
            row = db.execute("SELECT 1 FROM namespace WHERE session_id = ? AND key = ?", (session_id, key))
            return row.fetchone() is not None

    # -- small values kept across sessions ------------------------------------------------

    def meta(self, key: str) -> str | None:
        with self._read() as db:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            return None if row is None else str(row[0])

    def update_meta(self, key: str, update: Callable[[str | None], str]) -> str:
        """Replace a value by ``update(old value)``, in one transaction (two kernels updating
        it at once each see the other's update)."""
        with self._write() as db:
            self._quiet = True
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            value = update(None if row is None else str(row[0]))
            db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )
            return value

    # -- cell records (_engine/plan/cells.py) -------------------------------------------------------

    def cell_record(self, session_id: str, key: str) -> CellRecord | None:
        """What the cell named ``key`` did when it first ran; None if it never ran. A record that
        cannot be read raises :class:`DamagedRecord` (the cell acts anew, and says so)."""
        with self._read() as db:
            found = db.execute(
                "SELECT seq, record FROM cells WHERE session_id = ? AND key = ?", (session_id, key)
            ).fetchone()
        if found is None:
            return None
        try:
            value = json.loads(found[1])
            if not isinstance(value, dict):
                raise DamagedRecord(f"a cell record is {type(value).__name__}, not an object", "cell")
            return CellRecord.from_dict(value, int(found[0]))
        except (ValueError, TypeError, AttributeError, RecursionError) as exc:
            raise DamagedRecord(f"a cell record slotmagic cannot read ({type(exc).__name__})", "cell") from None

    def record_cell(self, session_id: str, key: str, record: CellRecord, *, replace: bool = False) -> CellRecord:
        """Keep ``record`` for the cell ``key``, numbered after every cell recorded so far;
        a record already there stays unless ``replace``. Returns the record kept."""
        with self._write() as db:
            found = db.execute(
                "SELECT seq, record FROM cells WHERE session_id = ? AND key = ?", (session_id, key)
            ).fetchone()
            if found is not None and not replace:
                with suppress(ValueError, TypeError, AttributeError, DamagedRecord):
                    return CellRecord.from_dict(json.loads(found[1]), int(found[0]))
            seq = int(
                db.execute(
                    "SELECT COALESCE(MAX(seq), 0) + 1 FROM cells WHERE session_id = ?", (session_id,)
                ).fetchone()[0]
            )
            text = json.dumps(record.to_dict(), ensure_ascii=False)
            db.execute(
                "INSERT INTO cells (session_id, key, seq, record, created_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (session_id, key) DO UPDATE SET seq = excluded.seq, record = excluded.record,"
                " created_at = excluded.created_at",
                (session_id, key, seq, text, time.time()),
            )
            return record.with_seq(seq)

    def state_marker(self, session_id: str) -> str:
        """A digest of the session's state (slots, current slot, compactions, working-context
        changes, pins and workflows; not the messages' text, which only grows with a slot's
        length): equal markers, same state."""
        with self._read() as db:
            rows = self._rows(db, session_id)
            names = {row.key: row.name for row in rows.rows.values()}
            slots = sorted(_marked(row, names, rows.current) for row in rows.rows.values())
            counts = []
            for table in ("compactions", "context_events", "marks"):
                found = db.execute(
                    f"SELECT slot, COUNT(*) FROM {table} WHERE slot IN (SELECT id FROM slots WHERE session_id = ?)"
                    " GROUP BY slot",
                    (session_id,),
                )
                counts.append(sorted((names.get(k, ""), int(n)) for k, n in found))
            flows = [
                tuple(r)
                for r in db.execute(
                    "SELECT name, record, active FROM workflows WHERE session_id = ? ORDER BY name", (session_id,)
                )
            ]
        # json.dumps([slots, counts, flows], ...) to the letter, each row's text escaped once (kept)
        shown = [json.dumps(part, ensure_ascii=False, sort_keys=True, default=str) for part in (counts, flows)]
        whole = "[[" + ", ".join(escaped for _, escaped in slots) + "], " + ", ".join(shown) + "]"
        import hashlib  # here: OpenSSL's module loads in ~3 ms, at the first digest

        return hashlib.sha256(whole.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _marked(row: SlotRow, names: dict[int, str], current: int | None) -> tuple[str, str]:
    """The row's part of ``state_marker``, kept on the row while what it shows stands: a
    recorded cell asks for the marker, and a session of 10,000 slots has a turn change one."""
    parent = names.get(row.parent) if row.parent is not None else None
    config = row.config  # parsed once: ``stored_config`` is this dict from now on
    undo = row.stored_undo and row.undo  # most rows have none: not asked of the property
    # its config and undo compared by identity first (a change sets new ones): no JSON made again
    state = (row.name, parent, row.fork_at, row.length, row.turns, config, row.deleted_at, undo, row.key == current)
    if row.marked is None or row.marked[0] != state:
        text = json.dumps(
            [
                row.name,
                parent,
                row.fork_at,
                row.length,
                row.turns,
                config,
                row.deleted_at is not None,
                undo,
                row.key == current,
            ],
            sort_keys=True,
            default=str,
        )
        row.marked = (state, (text, json.dumps(text, ensure_ascii=False)))
    return row.marked[1]
