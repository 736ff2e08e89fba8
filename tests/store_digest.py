"""A session's stored rows as one comparable string: what "the store as the first run left it" means
in the Run All tests (headless and in the browser)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slotmagic import Session


def stored(db: Path, session_id: str) -> str:
    """Every row of the session, timestamps left out."""
    with Session.open(session_id, db_path=db) as session:
        dump = session.store.dump_session(session_id)  # type: ignore[attr-defined]

    def strip(row: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(v for v in row if not (isinstance(v, float) and v > 1e9))

    tables = {name: [strip(r) for r in rows] for name, rows in dump.tables.items()}
    return repr((dump.current, [strip(r) for r in dump.slots], sorted(tables.items())))
