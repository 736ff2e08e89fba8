"""The store contract runs against both stores: ``store_target`` is a SQLite file, then a
fresh schema on the PostgreSQL server at ``$SLOTMAGIC_TEST_POSTGRES`` (default
``postgresql://postgres@127.0.0.1:5432/test``), dropped afterwards.

A module joins the contract by defining ``db_path`` from ``store_target`` (see
``test_session.py``). Without a server the PostgreSQL runs skip, unless
``SLOTMAGIC_REQUIRE_POSTGRES=1`` (set by ``.ci/run``), which makes them fail instead.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from stores import POSTGRES, require_postgres


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A URL of a fresh schema of its own, dropped after the test."""
    require_postgres()
    import psycopg

    schema = "t_" + secrets.token_hex(6)
    yield f"{POSTGRES}?schema={schema}"
    with psycopg.connect(POSTGRES, autocommit=True) as db:
        db.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture(params=["sqlite", "postgres"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where the store under test lives: a SQLite file, then a PostgreSQL schema."""
    if request.param == "sqlite":
        yield str(tmp_path / "slots.sqlite3")
        return
    yield request.getfixturevalue("postgres_url")
