"""Schema versions of the SQLite store.

Each migration moves the schema one version forward; ``PRAGMA user_version`` records where
a file is. Migrations only ever append to this list: a released step is never edited.

The runner, not the steps, does what every upgrade needs: a file that holds data is copied to
``<file>.v<N>.bak`` before its first step runs, and every file it touches is marked as
slotmagic's (``PRAGMA application_id``) in the same transaction as a step.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from .._errors import StoreError

# "SlMg": slotmagic's mark in the SQLite header (PRAGMA application_id), set on every file it
# creates or upgrades, so a database that is someone else's is never mistaken for a store.
APPLICATION_ID = 0x536C4D67

Migration = Callable[[sqlite3.Connection], None]


def _run(db: sqlite3.Connection, script: str) -> None:
    # Not executescript(): it would COMMIT the migration's transaction half way.
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            db.execute(statement)
            statement = ""
    if statement.strip():
        raise ValueError(f"incomplete SQL statement in migration: {statement.strip()[:60]}")


def _v1_initial(db: sqlite3.Connection) -> None:
    _run(
        db,
        """
        CREATE TABLE sessions (
            id           TEXT PRIMARY KEY,
            current_slot INTEGER,              -- slots.id
            created_at   REAL NOT NULL
        );
        -- A slot is a branch: it shares its parent's first `fork_at` messages and owns the
        -- messages at positions fork_at .. length-1 of its history. A deleted slot that
        -- still has derived slots stays as a tombstone (deleted_at set) holding their rows.
        CREATE TABLE slots (
            id          INTEGER PRIMARY KEY,
            session_id  TEXT NOT NULL,
            name        TEXT NOT NULL,
            parent      INTEGER,               -- slots.id
            fork_at     INTEGER NOT NULL DEFAULT 0,
            length      INTEGER NOT NULL DEFAULT 0,   -- messages in the history, inherited included
            tokens      INTEGER NOT NULL DEFAULT 0,   -- their tokens
            turns       INTEGER NOT NULL DEFAULT 0,   -- number of the last turn
            config      TEXT NOT NULL,         -- SlotConfig as JSON
            created_at  REAL NOT NULL,
            deleted_at  REAL
        );
        CREATE UNIQUE INDEX slots_by_name ON slots (session_id, name) WHERE deleted_at IS NULL;
        CREATE INDEX slots_by_parent ON slots (parent);
        -- One row per message, append-only; `seq` is the position in the slot's history.
        CREATE TABLE messages (
            slot        INTEGER NOT NULL,
            seq         INTEGER NOT NULL,
            turn        INTEGER NOT NULL,
            role        TEXT NOT NULL,
            content     TEXT NOT NULL,
            tokens      INTEGER NOT NULL,
            extra       TEXT,                  -- JSON: tool calls, tool_call_id, name
            created_at  REAL NOT NULL,
            PRIMARY KEY (slot, seq)
        );
        CREATE TABLE turns (
            slot        INTEGER NOT NULL,
            number      INTEGER NOT NULL,
            start       INTEGER NOT NULL,
            count       INTEGER NOT NULL,
            info        TEXT NOT NULL,         -- JSON: model, usage, cost, cell id ...
            created_at  REAL NOT NULL,
            PRIMARY KEY (slot, number)
        );
        """,
    )


def _v2_turns_by_cell(db: sqlite3.Connection) -> None:
    # Re-run notebook cells look up their earlier turns; most cells have none, and this index
    # answers that without reading every slot's turns.
    db.execute(
        "CREATE INDEX turns_by_cell ON turns (json_extract(info, '$.cell.id'))"
        " WHERE json_extract(info, '$.cell.id') IS NOT NULL"
    )


def _v3_system_messages(db: sqlite3.Connection) -> None:
    # A focused view keeps the first system message of a history and reads only its tail;
    # this small index finds that message without scanning the history.
    db.execute("CREATE INDEX messages_system ON messages (slot, seq) WHERE role = 'system'")


def _v4_budgets(db: sqlite3.Connection) -> None:
    _run(
        db,
        """
        -- A compaction replaces the first `upto` messages of a history in the model's view by
        -- a summary. It belongs to the slot row that made it, at history length `at`: slots
        -- derived later inherit it, slots derived before do not.
        CREATE TABLE compactions (
            slot        INTEGER NOT NULL,
            number      INTEGER NOT NULL,
            at          INTEGER NOT NULL,
            record      TEXT NOT NULL,         -- JSON: upto, card, text, model, tokens ...
            created_at  REAL NOT NULL,
            PRIMARY KEY (slot, number)
        );
        -- Exact token counts of stored messages, per encoding (o200k_base, cl100k_base):
        -- counted once, read back after a restart. Estimates stay in messages.tokens.
        CREATE TABLE token_counts (
            slot      INTEGER NOT NULL,
            encoding  TEXT NOT NULL,
            seq       INTEGER NOT NULL,
            tokens    INTEGER NOT NULL,
            PRIMARY KEY (slot, encoding, seq)
        ) WITHOUT ROWID;
        -- Small values kept across sessions (the token-estimate calibration per model).
        CREATE TABLE meta (
            key    TEXT PRIMARY KEY,
            value  TEXT NOT NULL
        );
        """,
    )


def _v5_namespace(db: sqlite3.Connection) -> None:
    # Large tool results, kept once per session by content hash (seed T2); messages hold a
    # namespace:// reference to them.
    _run(
        db,
        """
        CREATE TABLE namespace (
            session_id  TEXT NOT NULL,
            key         TEXT NOT NULL,
            tool        TEXT NOT NULL,
            content     TEXT NOT NULL,
            created_at  REAL NOT NULL,
            PRIMARY KEY (session_id, key)
        );
        """,
    )


def _v6_working_context_and_workflows(db: sqlite3.Connection) -> None:
    _run(
        db,
        """
        -- A slot's working context (goals, decisions, questions, current step) as append-only
        -- events, kept as compactions are: on the slot row that made them, at history length
        -- `at`; slots derived later see them, slots derived before do not.
        CREATE TABLE context_events (
            slot        INTEGER NOT NULL,
            number      INTEGER NOT NULL,
            at          INTEGER NOT NULL,
            turn        INTEGER NOT NULL,      -- the turn the change counts for
            event       TEXT NOT NULL,         -- JSON: op, data, by (user or model)
            created_at  REAL NOT NULL,
            PRIMARY KEY (slot, number)
        );
        -- A session's workflows (DAGs of steps, written as edge lists); at most one is active.
        CREATE TABLE workflows (
            session_id  TEXT NOT NULL,
            name        TEXT NOT NULL,
            record      TEXT NOT NULL,         -- JSON: body, current step, statuses, slots
            active      INTEGER NOT NULL DEFAULT 0,
            created_at  REAL NOT NULL,
            PRIMARY KEY (session_id, name)
        );
        CREATE UNIQUE INDEX workflows_active ON workflows (session_id) WHERE active = 1;
        """,
    )


def _v7_exploring(db: sqlite3.Connection) -> None:
    _run(
        db,
        """
        -- Pins and exclusions of stored messages, as append-only events kept as compactions
        -- are: on the slot row that made them; slots derived later see them. The latest event
        -- for a position wins (`mark` is pin, exclude or clear).
        CREATE TABLE marks (
            slot        INTEGER NOT NULL,
            number      INTEGER NOT NULL,
            position    INTEGER NOT NULL,
            mark        TEXT NOT NULL,
            created_at  REAL NOT NULL,
            PRIMARY KEY (slot, number)
        );
        -- %slot undo: the slot's name moves to a new row forked before the undone turns; the
        -- old row stays, hidden (deleted_at set), with JSON {"by": the row that replaced it,
        -- "turns": how many were undone, "cell": the cell that asked}, until redo or gc.
        ALTER TABLE slots ADD COLUMN undo TEXT;
        -- Full-text search over every message (SQLite FTS5), kept in step by triggers. Its
        -- rowids are the messages' rowids, which VACUUM may renumber: gc rebuilds it after.
        CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='rowid');
        INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
        CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts (rowid, content) VALUES (new.rowid, new.content);
        END;
        CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
        END;
        """,
    )


def _v8_search_indexed_when_searched(db: sqlite3.Connection) -> None:
    # Indexing a message costs more than storing it (~130 µs for 1,500 characters): a turn
    # no longer pays for it. Messages up to rowid ``fts_upto`` are in the index; the rest are
    # indexed by the next search. Deleting a message takes it out of the index only if it is
    # in it, and lowers ``fts_upto`` to the highest rowid left, since SQLite may give a
    # removed top rowid to the next message.
    _run(
        db,
        """
        DROP TRIGGER messages_fts_insert;
        DROP TRIGGER messages_fts_delete;
        INSERT INTO meta (key, value) VALUES ('fts_upto', (SELECT COALESCE(MAX(rowid), 0) FROM messages))
            ON CONFLICT (key) DO UPDATE SET value = excluded.value;
        CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, content)
                SELECT 'delete', old.rowid, old.content
                WHERE old.rowid <= (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'fts_upto');
            UPDATE meta SET value = MIN(CAST(value AS INTEGER), (SELECT COALESCE(MAX(rowid), 0) FROM messages))
                WHERE key = 'fts_upto';
        END;
        """,
    )


def _v9_cell_records(db: sqlite3.Connection) -> None:
    _run(
        db,
        """
        -- What each magic run from a notebook cell did, so that running it again with the same
        -- text replays it (_engine/plan/cells.py): `key` names the cell and its text, `seq` is the
        -- order cells first ran in (per session), `record` a JSON CellRecord.
        CREATE TABLE cells (
            session_id  TEXT NOT NULL,
            key         TEXT NOT NULL,
            seq         INTEGER NOT NULL,
            record      TEXT NOT NULL,
            created_at  REAL NOT NULL,
            PRIMARY KEY (session_id, key)
        );
        """,
    )


def _v10_turns_cached(db: sqlite3.Connection) -> None:
    # A budget's savings line reads the turns a prompt cache served; most turns have none, and
    # without this index the first budget of a slot scans (and decodes) every turn it holds.
    # The condition is the store's query's to the letter (rows/segments.py ``CACHED_SQL``).
    db.execute(
        "CREATE INDEX turns_cached ON turns (slot, start)"
        " WHERE COALESCE(json_extract(info, '$.usage.cached_tokens'), 0) > 0"
    )


MIGRATIONS: tuple[Migration, ...] = (
    _v1_initial,
    _v2_turns_by_cell,
    _v3_system_messages,
    _v4_budgets,
    _v5_namespace,
    _v6_working_context_and_workflows,
    _v7_exploring,
    _v8_search_indexed_when_searched,
    _v9_cell_records,
    _v10_turns_cached,
)


def newer_schema_message(version: int, known: int | None = None) -> str:
    known = len(MIGRATIONS) if known is None else known
    return (
        f"this state file has schema version {version} but this slotmagic knows only "
        f"{known}; upgrade slotmagic (pip install -U slotmagic)"
    )


def migrate(
    db: sqlite3.Connection,
    migrations: Sequence[Migration] = MIGRATIONS,
    *,
    backup: Callable[[sqlite3.Connection, int], object] | None = None,
) -> int:
    """Bring ``db`` to the newest schema, one transaction per step; return the version.

    A file that holds data (version 1 or more) is first handed to ``backup`` (the store passes
    ``files.backup_before_migrating``); a file from a newer slotmagic is refused. Each step also
    marks the file as slotmagic's.
    """
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > len(migrations):
        raise StoreError(newer_schema_message(version, len(migrations)))
    if backup is not None and 0 < version < len(migrations):
        # Outside the write transaction: SQLite's backup cannot read through a connection
        # that holds one. A step another process runs meanwhile is found below and skipped.
        backup(db, version)
    for number in range(version + 1, len(migrations) + 1):
        db.execute("BEGIN IMMEDIATE")
        try:
            # A second process may have migrated while we waited for the write lock.
            if db.execute("PRAGMA user_version").fetchone()[0] >= number:
                db.execute("ROLLBACK")
                continue
            migrations[number - 1](db)
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {number}")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
    if db.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
        # A slotmagic file from before the mark, already at the newest schema.
        db.execute("BEGIN IMMEDIATE")
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        db.execute("COMMIT")
    return len(migrations)
