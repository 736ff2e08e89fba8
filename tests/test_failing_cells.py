"""A failing cell pays nothing for slotmagic: the variables its lines name are summarized only
when the error is read (``Err[n]``, ``%%turn --error``, ``%slot explain``), and then each
``repr`` is bounded in time and size, so a slow or hanging one never blocks the kernel.

The reprs here count their calls (nothing is timed): a plain failing cell calls none."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from slotmagic._magics import cells


class Counted:
    """A variable whose repr counts its calls and, while ``hold`` is unset, never returns."""

    def __init__(self, hang: bool = False, size: int = 10) -> None:
        self.calls = 0
        self.hang = hang
        self.size = size
        self.hold = threading.Event()

    def __repr__(self) -> str:
        self.calls += 1
        if self.hang:
            self.hold.wait(30)  # a remote object that does not answer (bounded: pytest reprs it on failure)
        return "x" * self.size


@pytest.fixture
def released() -> Iterator[list[Counted]]:
    """Objects whose hanging reprs are let go at the end of the test."""
    made: list[Counted] = []
    yield made
    for value in made:
        value.hold.set()


def run(ip: Any, cell: str) -> Any:
    return ip.run_cell(cell, store_history=True)


def fail(ip: Any, cell: str) -> int:
    """Run a cell that raises (the test shell raises it again); its execution count."""
    with pytest.raises(Exception):  # noqa: B017 - any error the cell raises
        run(ip, cell)
    return int(ip.execution_count) - 1


def variable(text: str, name: str) -> str:
    """What a description says of one variable (after its type's name)."""
    line = next(line for line in text.splitlines() if line.startswith(f"- {name}: "))
    return line.split("Counted: ", 1)[1]


def sent(ip: Any) -> str:
    from slotmagic._magics import current_session

    return [m for m in current_session().messages() if m.role == "user"][-1].content


def test_a_failing_cell_calls_no_repr(ip: Any) -> None:
    value = Counted()
    ip.user_ns["lazy"] = value
    fail(ip, "lazy.missing_attribute")
    fail(ip, "def f(v):\n    return v.other\nf(lazy)")
    run(ip, "%%turn\nno reference to any error")  # a turn that reads no error describes none
    assert value.calls == 0


def test_err_describes_only_the_error_read_and_only_once(ip: Any) -> None:
    first, second = Counted(), Counted()
    ip.user_ns.update(first=first, second=second)
    failed = fail(ip, "first.missing")
    fail(ip, "second.missing")
    run(ip, f"%%turn\n{{Err[{failed}]}}")
    assert variable(sent(ip), "first") == "xxxxxxxxxx"
    assert (first.calls, second.calls) == (1, 0)
    run(ip, f"%%turn\nagain {{Err[{failed}]}}")
    assert (first.calls, second.calls) == (1, 0)  # described once, kept
    assert "cells" in repr(ip.user_ns.get("Err", cells.ErrMapping({})))


def test_a_hanging_repr_becomes_a_note_and_the_turn_goes_on(
    ip: Any, released: list[Counted], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cells, "REPR_SECONDS", 0.3)
    stuck, fine = Counted(hang=True), Counted()
    released += [stuck]
    ip.user_ns.update(stuck=stuck, fine=fine)
    fail(ip, "fine.missing + stuck.missing")
    assert stuck.calls == 0
    run(ip, "%%turn --error\nWhy?")
    text = sent(ip)
    assert variable(text, "fine") == "xxxxxxxxxx"
    assert variable(text, "stuck").startswith("(not shown: its repr took over")
    run(ip, "%slot explain")  # asked again: the note is kept, no second thread is left waiting
    assert variable(sent(ip), "stuck").startswith("(not shown")
    assert stuck.calls == 1


def test_the_time_for_all_summaries_is_shared(released: list[Counted], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cells, "REPR_SECONDS", 0.2)
    values = [Counted(hang=True) for _ in range(4)]
    released += values
    error = cells.CellError(1, "a + b + c + d", "NameError", "x", "", tuple(zip("abcd", values, strict=True)))
    notes = dict(error.variables)
    assert notes["a"].endswith("Counted: (not shown: its repr took over 0.2 s)")
    assert all("not shown" in note for note in notes.values())
    assert sum(v.calls for v in values) < 4  # once the time is out, the rest are not even tried


def test_a_huge_repr_is_cut_short(ip: Any) -> None:
    huge = Counted(size=5_000_000)
    ip.user_ns["huge"] = huge
    fail(ip, "huge.missing")
    run(ip, "%%turn --error\nWhy?")
    line = next(line for line in sent(ip).splitlines() if line.startswith("- huge:"))
    assert len(line) < 400 and "5,000,000 characters in all" in line


def test_an_exception_whose_message_fails_is_still_kept(ip: Any) -> None:
    run(ip, "class Odd(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\n")
    fail(ip, "raise Odd()")
    run(ip, "%%turn --error\nWhy?")
    assert "Odd: (its message could not be read: RuntimeError)" in sent(ip)


def test_read_variable_bounds_a_hanging_repr(released: list[Counted], monkeypatch: pytest.MonkeyPatch) -> None:
    """The model's read_variable tool calls a repr too: one that hangs is a note, not a hung turn."""
    from slotmagic.tools import _variables

    monkeypatch.setattr(_variables, "_REPR_SECONDS", 0.2)
    stuck = Counted(hang=True)
    released.append(stuck)
    tool = _variables.read_variable_tool({"stuck": stuck})
    said = tool("stuck")
    assert "stuck: " in said and "(not shown: its repr took over 0.2 s)" in said


def test_only_the_latest_errors_keep_the_objects_they_name(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A frame's big locals are not kept alive by every error of the session."""
    import gc
    import weakref

    monkeypatch.setattr(cells, "_KEPT_VALUES", 2)
    first = Counted()
    ip.user_ns["big"] = first
    failed = fail(ip, "big.missing")
    gone = weakref.ref(first)
    del ip.user_ns["big"], first
    ip.user_ns["other"] = Counted()
    fail(ip, "other.missing")
    fail(ip, "other.missing_too")  # the first error is no longer among the latest 2
    gc.collect()
    assert gone() is None  # let go: nothing else held it
    run(ip, f"%%turn\n{{Err[{failed}]}}")
    assert "Variables it names: big (not shown: only the latest 2 errors keep the variables they name)" in sent(ip)
