"""A session with a networked model loads what its first turn needs on a thread of its own
(once per process and model); the offline model loads nothing; turns work whether or not the
warm-up has finished."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from reflect_server import ReflectServer

from slotmagic import Session

ROOT = Path(__file__).resolve().parent.parent

WARMED = """
import sys
from slotmagic import Session
heavy = ("genai_prices", "httpx", "httpcore", "slotmagic.providers._openai")
with Session.open("w", db_path=":memory:") as offline:
    assert offline._warming is None
    print(sorted(m for m in heavy if m in sys.modules))
with Session.open("w", db_path=":memory:", model="openai:gpt-4o-mini") as first:
    first._warming.join(timeout=120)
    with Session.open("v", db_path=":memory:", model="openai:gpt-4o-mini") as second:
        assert second._warming is first._warming  # once per process and model
    from slotmagic.providers._transport import _tls_context
    print(sorted(m for m in heavy if m in sys.modules), _tls_context.cache_info().currsize)
"""


def test_a_networked_model_is_warmed_up_once_and_the_offline_one_not_at_all() -> None:
    out = subprocess.run(
        [sys.executable, "-c", WARMED], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.splitlines()
    assert out == ["[]", "['genai_prices', 'httpcore', 'httpx', 'slotmagic.providers._openai'] 1"]


def test_turns_right_after_opening_do_not_wait_for_or_trip_over_the_warm_up(tmp_path: Path) -> None:
    with ReflectServer() as server:
        for i in range(2):
            with Session.open(
                f"s{i}", db_path=tmp_path / "w.sqlite3", model="openai:gpt-4o", settings=server.settings()
            ) as session:
                assert session.submit_turn("hello").text == "seen 1: hello"
                session.model = "openai:gpt-4o-mini"  # another model: warmed up too
                assert session.submit_turn("again").text == "seen 3: again"
