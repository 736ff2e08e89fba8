"""The turn options a type checker sees: every turn and fan-out entry point takes the options
of ``TurnArgs`` / ``FanOutArgs`` (slotmagic/session/_turn_args.py), so mypy finds a misspelt or
mistyped option; at run time the same mistake is one ConfigError line."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mypy_cache import shared_mypy_cache

from conftest import ROOT
from slotmagic import ConfigError, Session
from slotmagic._engine.plan.pending import TurnOptions
from slotmagic.session import FanOutArgs, TurnArgs

# Each call that mypy must refuse ends in "# refused"; the others must pass.
CALLS = """
import asyncio
from slotmagic import Session

session = Session.open("typed")
session.submit_turn("hi", slot="default", model="echo", system="Be brief.", temperature=0.2, max_tokens=50)
session.submit_turn("hi", params={"top_p": 0.9}, info={"why": "test"}, cell_id="c1", rerun=True, tools=["search"])
session.submit_turn("hi", attachments={"df": [1, 2]}, read_variables=True, temperature=None, tools=None)
session.submit_turn("hi", temprature=0.2)  # refused
session.submit_turn("hi", max_tokens="many")  # refused
session.stream_turn("hi", slto="default")  # refused
session.stream_turn("hi", model="echo")
asyncio.run(session.asubmit_turn("hi", rerun="yes"))  # refused
asyncio.run(session.asubmit_turn("hi", rerun=True))
session.astream_turn("hi", sytem="x")  # refused
session.astream_turn("hi", system="x")
session.fan_out("hi", slots="a,b", temperature=0.5, cell_id="c2")
session.fan_out("hi", slots="a,b", temprature=0.5)  # refused
session.fan_out("hi", slots="a,b", slot="a")  # refused
asyncio.run(session.afan_out("hi", models=["echo"], max_token=5))  # refused
session.plan_fan_out("hi", slots="all", tools=("search",))
session.plan_fan_out("hi", slots="all", attachments=[1], schema={"type": "object"})
session.plan_fan_out("hi", slots="all", read_variables=True)  # refused
session.submit_turn("hi", schema="Answer")  # refused
"""


def test_mypy_refuses_every_misspelt_or_mistyped_option(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    script = tmp_path / "calls.py"
    script.write_text(CALLS)
    # The run's mypy cache, shared with test_lint.py's check of slotmagic (mypy_cache.py says
    # why that checks what a cold run would): slotmagic's modules are most of the work.
    with shared_mypy_cache(tmp_path_factory) as cache:
        done = subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache), str(script)],
            cwd=tmp_path,
            # this checkout's slotmagic, not an installed one; not on PYTHONPATH as well, where mypy
            # would take it for an installed package, check its modules with their errors silenced
            # and leave cache entries that test_lint.py's check (errors shown) cannot use
            env={**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "MYPYPATH": str(ROOT)},
            capture_output=True,
            text=True,
        )
    lines = CALLS.splitlines()
    flagged = {int(n) for n in re.findall(r"calls\.py:(\d+): error", done.stdout)}
    refused = {n for n, line in enumerate(lines, 1) if line.endswith("# refused")}
    assert refused and flagged == refused, done.stdout


def test_the_typed_options_are_the_checked_ones() -> None:
    """A key of TurnArgs is a field of TurnOptions, and the other way round: an option added to
    one is added to the other (and to FanOutArgs when a fan-out takes it)."""
    assert set(TurnArgs.__annotations__) == {f.name for f in dataclasses.fields(TurnOptions)}
    assert set(FanOutArgs.__annotations__) < set(TurnArgs.__annotations__)
    assert "slot" not in FanOutArgs.__annotations__  # a fan-out takes slots=


def test_a_misspelt_option_at_run_time_is_one_line(db_path: Path) -> None:
    with Session.open("typed", db_path=db_path, model="echo") as session:
        with pytest.raises(ConfigError, match=r"^unknown turn option\(s\) temprature; known: slot, model") as caught:
            session.submit_turn("hi", temprature=0.2)  # type: ignore[call-arg]
        assert "\n" not in str(caught.value)
        assert session.messages() == []  # nothing stored
