"""Helpers for tests that run on both stores (the fixtures are in ``conftest.py``)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

POSTGRES = os.environ.get("SLOTMAGIC_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


@functools.cache
def postgres_problem() -> str | None:
    """Why no PostgreSQL test can run here (None: the server answers)."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed: pip install -e '.[test]'"
    try:
        psycopg.connect(POSTGRES, connect_timeout=3).close()
    except psycopg.Error as exc:
        return f"no PostgreSQL server at {POSTGRES} ({' '.join(str(exc).split())[:200]})"
    return None


def require_postgres() -> None:
    problem = postgres_problem()
    if problem is None:
        return
    if os.environ.get("SLOTMAGIC_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"{problem}; SLOTMAGIC_REQUIRE_POSTGRES=1 needs one (see README, The store)")
    pytest.skip(problem)


def count_rows(target: str | Path, table: str) -> int:
    """Rows in a table of either store, read with the database's own client."""
    target = str(target)
    if target.startswith("postgresql://"):
        import psycopg

        base, _, schema = target.partition("?schema=")
        with psycopg.connect(base) as db:
            return int(db.execute(f"SELECT COUNT(*) FROM {schema}.{table}").fetchone()[0])  # type: ignore[index]
    import sqlite3

    with sqlite3.connect(target) as db:
        return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
