"""What some turns record beside their messages, read through typed accessors wherever it is
read: a merge turn's merge, a fan-out column's time, the item a working-context change made."""

from __future__ import annotations

import pytest

from slotmagic._core.context import ContextEvent
from slotmagic._core.records import TurnInfo


def test_a_merge_is_read_back_as_it_was_recorded() -> None:
    extra = {"merged_from": "draft", "as": "summary", "upto": 6, "turns": [2, 3], "method": "model"}
    info = TurnInfo.from_dict(TurnInfo(kind="merge", extra=extra).to_dict())
    assert info.merged() == extra
    assert TurnInfo(kind="turn", extra=extra).merged() is None  # only a merge turn holds one
    damaged = TurnInfo(kind="merge", extra={"merged_from": "draft", "upto": "six", "as": "messages"})
    assert damaged.merged() is None  # read as no merge, never an error


def test_a_columns_time_is_a_number_or_none() -> None:
    assert TurnInfo(extra={"latency": 1.25}).latency() == 1.25
    assert TurnInfo(extra={"latency": None}).latency() is None
    assert TurnInfo(extra={"latency": True}).latency() is None and TurnInfo().latency() is None


def test_a_context_change_names_the_item_it_made() -> None:
    assert ContextEvent("goal", {"id": "g1", "text": "get the deposit back"}).item_id == "g1"
    assert ContextEvent("step", {"text": "write the letter"}).item_id == ""


def test_a_replaced_record_differs_only_in_what_was_replaced() -> None:
    info = TurnInfo(kind="append", model="echo", extra={"k": 1})
    changed = info.replace(user="ana", cost=0.5)
    assert changed == TurnInfo(kind="append", model="echo", extra={"k": 1}, user="ana", cost=0.5)
    assert info.user is None and info.replace() == info
    with pytest.raises(TypeError, match="usr"):
        info.replace(usr="ana")
