"""The options of a turn and of a fan-out, as a type checker and an editor see them.

``Session.submit_turn(text, **options)`` and the other turn entry points take these keyword
arguments; their ``**options`` is typed ``Unpack[TurnArgs]`` (PEP 692), so a misspelt or
mistyped option (``temprature=0.2``, ``max_tokens="many"``) is an error in mypy and the
editor, as well as a ``ConfigError`` at run time. Every option may be left out or given as
None (the default); each is checked when the turn is planned (``_engine/plan/pending.py``'s
``TurnOptions``, which holds the same names: ``tests/test_turn_args.py`` keeps the two alike).

An option is added in three places: a field of ``TurnOptions``, a key here (of ``FanOutArgs``
when a fan-out takes it too, else of ``TurnArgs``), and a line in the docstring of
``Session.submit_turn``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from typing import Any, TypedDict

__all__ = ["FanOutArgs", "TurnArgs"]


class FanOutArgs(TypedDict, total=False):
    """What a turn and a fan-out (``Session.fan_out``, ``afan_out``, ``plan_fan_out``) both take."""

    model: str | None  # "provider:model"; None: the slot's, else the session's
    system: str | None  # this turn's system prompt, instead of the slot's
    temperature: float | None
    max_tokens: int | None
    params: Mapping[str, Any] | None  # provider-specific request fields (JSON values)
    info: Mapping[str, Any] | None  # recorded with the turn (JSON values)
    cell_id: str | None  # the notebook cell the text comes from: replay and edit-fork
    rerun: bool  # run the cell again even if its text is unchanged
    tools: Sequence[str] | Set[str] | None  # this turn's tools by name; () none; None the slot's
    attachments: Mapping[str, object] | Sequence[object] | None  # {label: object} or [objects]
    schema: type | Mapping[str, Any] | None  # the reply's shape: a pydantic model class or a JSON schema


class TurnArgs(FanOutArgs, total=False):
    """What one turn (``Session.submit_turn``, ``stream_turn``, ``asubmit_turn``,
    ``astream_turn``) takes besides: its slot, and the opt-in variables tool."""

    slot: str | None  # None: the current slot
    read_variables: bool  # offer the read_variable tool (a kernel's variables by name)
