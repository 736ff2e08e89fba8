"""``read_variable``: an opt-in built-in tool that lets the model look at a variable of the
kernel by name, with consent.

It never evaluates code: the name must be an identifier in the namespace it was given (dotted
attributes and subscripts are refused), and it answers with the value's type, shape or length
and a ``repr`` bounded in size and time (:func:`slotmagic._attach.summarize_within`). It is offered only when a turn or
a slot asks for it (``%%turn --read-vars``, ``tools=["read_variable"]``, or a slot whose tools
name it), never by default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._attach import summarize_within
from ._tool import Tool

READ_VARIABLE = "read_variable"
_REPR_CHARS = 2000
_REPR_SECONDS = 2.0  # a slower repr is a note, and the turn goes on


def read_variable_tool(namespace: Mapping[str, Any]) -> Tool[..., str]:
    """The tool over ``namespace`` (a kernel's ``user_ns``)."""

    def read_variable(name: str) -> str:
        """Read a summary of a variable in the user's Python session: its type, shape or length,
        and a bounded repr. Takes a plain variable name only; no code is evaluated.

        Args:
            name: The variable's name, e.g. df.
        """
        name = name.strip()
        if not name.isidentifier():
            return f"error: {name!r:.60} is not a variable name (plain names only; no code is evaluated)"
        if name.startswith("_") or name not in namespace:
            known = sorted(k for k in namespace if not k.startswith("_") and k not in ("In", "Out", "exit", "quit"))
            hint = ", ".join(known[:30]) or "none"
            return f"error: no variable {name!r} (variables: {hint})"
        return f"{name}: {summarize_within(namespace[name], chars=_REPR_CHARS, seconds=_REPR_SECONDS)}"

    return Tool.from_function(read_variable)
