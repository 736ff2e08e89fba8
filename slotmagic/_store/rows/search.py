"""Exploring a session: full-text search over its messages, and gc of what nothing reaches.

The dialects search differently, side by side here: SQLite through an FTS5 index that a
search first brings up to date (migration v8), PostgreSQL through ``to_tsvector`` on the fly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from ..._errors import ConfigError, StoreError
from ..base import GcReport, SearchHit
from ..history import Piece
from .cache import SessionRows, SlotRow, replacement, tree_order
from .common import Connection, Dialect, RowsBase

# Whether a message's content holds a kept tool result's key (gc keeps those results).
CONTAINS_KEY_SQL: dict[Dialect, str] = {
    "sqlite": "instr(m.content, namespace.key) > 0",
    "postgresql": "strpos(m.content, namespace.key) > 0",
}


class SearchRows(RowsBase):
    """``%slot search`` and ``%slot gc``; a dialect's store says how big it is and compacts."""

    # -- exploring: search -----------------------------------------------------------------------

    def search(self, session_id: str, query: str, slot_id: str | None = None, *, limit: int = 20) -> list[SearchHit]:
        if self._DIALECT == "sqlite":  # its index is brought up to date here; PostgreSQL's needs none
            self._index_new_messages()
        words = search_words(query)
        if not words:
            raise ConfigError("nothing to search for: give a word or two, e.g. %slot search deposit")
        with self._read() as db:
            rows = self._rows(db, session_id)
            only = None if slot_id is None else self._row(rows, slot_id)
            holders = [(r, self._pieces(rows, r)) for r in ([only] if only else tree_order(rows))]
            hits: list[SearchHit] = []
            for key, seq, turn, role, snippet in self._matches_for(db, session_id, words, limit):
                hit = self._hit_home(rows, holders, key, seq, only is None)
                if hit is not None:
                    hits.append(SearchHit(hit[0], turn, seq, role, snippet, hit[1]))
                    if len(hits) >= limit:
                        break
            return hits

    def _hit_home(
        self, rows: SessionRows, holders: list[tuple[SlotRow, list[Piece]]], key: int, seq: int, anywhere: bool
    ) -> tuple[str, bool] | None:
        """The slot to name for a message: its owner if live, a live slot holding it, else
        (``anywhere``) the slot whose undo history holds it."""
        owner = rows.rows.get(key)
        if anywhere and owner is not None and owner.live:
            return owner.name, False
        for row, pieces in holders:
            if any(p.key == key and p.lo <= seq < p.hi for p in pieces):
                return row.name, False
        if anywhere:
            for hidden in rows.rows.values():
                replaced = replacement(rows, hidden) if hidden.undo is not None else None
                if replaced is not None and any(
                    p.key == key and p.lo <= seq < p.hi for p in self._pieces(rows, hidden)
                ):
                    return replaced.name, True
        return None

    # -- exploring: gc ---------------------------------------------------------------------------

    def gc(self, session_id: str, *, drop_undo: bool = False) -> GcReport:
        if self.refusal is not None:  # before the checkpoint below, which writes
            raise StoreError(self.refusal)
        before = self._file_size()
        with self._write() as db:
            rows = self._rows(db, session_id)
            for row in rows.rows.values():
                if row.undo is not None and (drop_undo or replacement(rows, row) is None):
                    # Forgotten on request, or its slot was deleted: a plain tombstone now.
                    db.execute("UPDATE slots SET undo = NULL WHERE id = ?", (row.key,))
                    row.undo = None
            # How far into each segment a live slot or a kept undo step reaches.
            reach: dict[int, int] = {}
            for row in rows.rows.values():
                if row.live or row.undo is not None:
                    for piece in self._pieces(rows, row):
                        reach[piece.key] = max(reach.get(piece.key, 0), piece.hi)
            messages = turns = 0
            for row in list(rows.rows.values()):
                if row.live or row.undo is not None:
                    continue
                end = reach.get(row.key, row.fork_at)
                if end <= row.fork_at and not any(r.parent == row.key for r in rows.rows.values()):
                    end = -1  # nothing of it is reached and nothing hangs from it: the row goes too
                cut = max(end, 0)
                messages += db.execute("DELETE FROM messages WHERE slot = ? AND seq >= ?", (row.key, cut)).rowcount
                turns += db.execute("DELETE FROM turns WHERE slot = ? AND start >= ?", (row.key, cut)).rowcount
                db.execute("DELETE FROM token_counts WHERE slot = ? AND seq >= ?", (row.key, cut))
                db.execute("DELETE FROM marks WHERE slot = ? AND position >= ?", (row.key, cut))
                db.execute("DELETE FROM compactions WHERE slot = ? AND at > ?", (row.key, cut))
                db.execute("DELETE FROM context_events WHERE slot = ? AND at > ?", (row.key, cut))
                if end < 0:
                    db.execute("DELETE FROM slots WHERE id = ?", (row.key,))
                else:
                    db.execute("UPDATE slots SET length = ? WHERE id = ?", (max(cut, row.fork_at), row.key))
            namespace = db.execute(
                "DELETE FROM namespace WHERE session_id = ? AND NOT EXISTS (SELECT 1 FROM messages m"
                " JOIN slots s ON s.id = m.slot WHERE s.session_id = namespace.session_id"
                f" AND {CONTAINS_KEY_SQL[self._DIALECT]})",
                (session_id,),
            ).rowcount
            self._forget()
        compacted = self._compact_file()
        return GcReport(messages, turns, namespace, before, self._file_size(), compacted)

    def _matches_for(
        self, db: Connection, session_id: str, words: list[str], limit: int
    ) -> Iterable[tuple[int, int, int, str, str]]:
        """Messages of the session matching every word, best first: (slot row, position, turn,
        role, snippet with the matches marked ``[…]``). The dialect's full-text search, for a
        search that keeps about ``limit`` of them: a dialect that can make snippets only for
        those does so (SQLite)."""
        return _MATCHES[self._DIALECT](db, session_id, words, limit)

    def _index_new_messages(self) -> None:
        """Put the messages stored since the last search into the index (see migration v8);
        a store that cannot be written searches them without it (``_sqlite_matches``)."""
        if self.refusal is not None:
            return
        with self._read() as db:  # nothing new (the usual case): no write transaction
            upto = db.execute("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'fts_upto'").fetchone()[0]
            if db.execute("SELECT COALESCE(MAX(rowid), 0) FROM messages").fetchone()[0] <= upto:
                return
        with self._write() as db:
            upto = db.execute("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'fts_upto'").fetchone()[0]
            top = db.execute("SELECT COALESCE(MAX(rowid), 0) FROM messages").fetchone()[0]
            if top > upto:
                db.execute(
                    "INSERT INTO messages_fts (rowid, content) SELECT rowid, content FROM messages WHERE rowid > ?",
                    (upto,),
                )
                db.execute("UPDATE meta SET value = ? WHERE key = 'fts_upto'", (str(top),))

    def _file_size(self) -> int:
        """How many bytes the store takes (gc reports the difference)."""
        raise NotImplementedError

    def _compact_file(self) -> bool:
        """Give the space gc freed back; False when it could not be done now."""
        return True


MAX_SEARCH_WORDS = 50


def search_words(query: str) -> list[str]:
    """The different words of a search (case aside; a NUL separates words, as the full-text
    index reads it). More than :data:`MAX_SEARCH_WORDS` is refused in one line: each word is a
    condition every message is checked against, and a pasted page made SQLite refuse the
    query ("Expression tree is too large") or PostgreSQL take minutes."""
    words: dict[str, str] = {}
    for word in query.replace("\x00", " ").split():
        words.setdefault(word.casefold(), word)
    if len(words) > MAX_SEARCH_WORDS:
        raise ConfigError(
            f"a search takes at most {MAX_SEARCH_WORDS} different words, not {len(words):,}: "
            "search for the few that matter (a message is found when it holds every one)"
        )
    return list(words.values())


def _sqlite_matches(
    db: Connection, session_id: str, words: list[str], limit: int
) -> Iterable[tuple[int, int, int, str, str]]:
    # Each word as a quoted FTS5 string: the user's text is never read as query syntax.
    match = " ".join('"' + w.replace('"', '""') + '"' for w in words)
    # Read as the caller goes, best first: the index ranks a window of matches (FTS5 alone,
    # where ORDER BY rank is cheapest), then the window's messages of this session are
    # read, and snippets made only for the ``limit`` the caller keeps: a frequent word's
    # thousands of matches cost their ranking, not thousands of rows and snippets.
    offset, window = 0, max(2 * limit, 20)
    while True:
        rowids = [
            r
            for (r,) in db.execute(
                "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rank LIMIT ? OFFSET ?",
                (match, window, offset),
            )
        ]
        if not rowids:
            break
        marks = ",".join("?" * len(rowids))
        found = {
            rowid: rest
            for rowid, *rest in db.execute(
                f"SELECT m.rowid, m.slot, m.seq, m.turn, m.role FROM messages m JOIN slots s ON s.id = m.slot"
                f" WHERE m.rowid IN ({marks}) AND s.session_id = ?",
                (*rowids, session_id),
            )
        }
        mine = [r for r in rowids if r in found]
        for at in range(0, len(mine), limit):
            part = mine[at : at + limit]
            snippets = dict(
                db.execute(
                    "SELECT rowid, snippet(messages_fts, 0, '[', ']', '…', 12) FROM messages_fts"
                    f" WHERE messages_fts MATCH ? AND rowid IN ({','.join('?' * len(part))})",
                    (match, *part),
                )
            )
            for rowid in part:
                key, seq, turn, role = found[rowid]
                yield key, seq, turn, role, snippets.get(rowid, "")
        if len(rowids) < window:
            break
        offset, window = offset + window, min(window * 2, 4_096)  # SQLite binds at most 32,766
    # Messages not indexed yet (a store opened read-only): every word, anywhere in the text.
    likes = " AND ".join("m.content LIKE ? ESCAPE '\\'" for _ in words)
    patterns = ["%" + w.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%" for w in words]
    yield from db.execute(
        "SELECT m.slot, m.seq, m.turn, m.role, substr(m.content, 1, 120) FROM messages m"
        " JOIN slots s ON s.id = m.slot"
        " WHERE m.rowid > (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'fts_upto')"
        f" AND s.session_id = ? AND {likes}",
        (session_id, *patterns),
    )


def _postgres_matches(
    db: Connection, session_id: str, words: list[str], limit: int
) -> Iterable[tuple[int, int, int, str, str]]:
    # plainto_tsquery reads the words literally (no query syntax) and ANDs them; 'simple'
    # case-folds without stemming, as FTS5's default tokenizer. Shorter messages first on a
    # tie, as bm25 ranks them. Each run of letters and digits is looked for first as a
    # substring: cheap, and a message lacking one is never parsed. (``limit`` is SQLite's.)
    text = " ".join(words)
    parts = re.findall(r"\w+", text) or [""]
    words_sql = " AND ".join("strpos(lower(m.content), lower(?)) > 0" for _ in parts)
    document = "to_tsvector('simple', left(m.content, 262144))"
    return db.execute(
        "SELECT m.slot, m.seq, m.turn, m.role,"
        " ts_headline('simple', left(m.content, 262144), q,"
        " 'StartSel=[, StopSel=], MaxWords=12, MinWords=6, ShortWord=0')"
        " FROM messages m JOIN slots s ON s.id = m.slot, plainto_tsquery('simple', ?) q"
        f" WHERE s.session_id = ? AND {words_sql} AND numnode(q) > 0 AND {document} @@ q"
        f" ORDER BY ts_rank({document}, q, 1) DESC, length(m.content), m.slot, m.seq",
        (text, session_id, *parts),
    )


_MATCHES: dict[Dialect, Callable[[Connection, str, list[str], int], Iterable[tuple[int, int, int, str, str]]]] = {
    "sqlite": _sqlite_matches,
    "postgresql": _postgres_matches,
}
