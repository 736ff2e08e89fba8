"""Objects whose dunder methods misbehave, where a notebook's values enter a turn: a
``{reference}`` in a ``%%turn`` cell is one line (``ReferenceFailed``) or text, whatever its
``__str__``, ``__repr__`` or ``__format__`` does (raise, raise an exception whose own message
raises, recurse without end, return what is not text); nothing else escapes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slotmagic._magics.references import ReferenceFailed, fill


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("not even its message")


class OddText(str):
    def __str__(self) -> str:
        raise ValueError("a str that will not be one")


def raising(exc: BaseException) -> Callable[..., Any]:
    def method(self: object, *args: object) -> Any:
        raise exc

    return method


def returning(value: object) -> Callable[..., Any]:
    return lambda self, *args: value


def recursing(self: object, *args: object) -> Any:
    return str(self)


BEHAVIOURS: list[Callable[..., Any]] = [
    returning("fine"),
    returning(OddText("odd")),
    returning(42),
    returning(None),
    returning(b"bytes"),
    raising(ValueError("bad value")),
    raising(KeyError("a key")),
    raising(KeyError(3)),
    raising(TypeError("no")),
    raising(Unprintable()),
    raising(StopIteration()),
    raising(RecursionError("deep")),
    raising(NameError("name 'ghost' is not defined")),
    recursing,
]

FORMS = ["{x}", "{x!s}", "{x!r}", "{x:>8}", "{x!r:>8}", "{[x]}", "{str(x)}", "{x.attribute}", "{x()}"]


@st.composite
def odd_objects(draw: st.DrawFn) -> object:
    methods = {
        name: draw(st.sampled_from(BEHAVIOURS))
        for name in ("__str__", "__repr__", "__format__", "__getattr__", "__call__")
        if draw(st.booleans())
    }
    return type("Odd", (), methods)()


@settings(max_examples=300, deadline=None)
@given(value=odd_objects(), form=st.sampled_from(FORMS))
def test_a_reference_to_a_misbehaving_object_is_text_or_one_line(value: object, form: str) -> None:
    try:
        text = fill(f"before {form} after", {"x": value})
    except ReferenceFailed as refused:
        line = str(refused)
        assert "\n" not in line and "nothing was sent" in line
    else:
        assert type(text) is str and text.startswith("before ") and text.endswith(" after")


@pytest.mark.parametrize(
    ("method", "said"),
    [
        (raising(ValueError("bad value")), "{x} (its str()) failed: ValueError: bad value; nothing was sent"),
        (recursing, "{x} (its str()) failed: RecursionError: maximum recursion depth exceeded"),
        (returning(42), "{x} (its str()) failed: TypeError: __str__ returned non-string (type int)"),
        (raising(Unprintable()), "{x} (its str()) failed: Unprintable: (its message cannot be shown: RuntimeError)"),
        (returning(OddText("odd")), None),  # a str subclass: its text as a plain str
    ],
)
def test_what_a_failing_str_says(method: Callable[..., Any], said: str | None) -> None:
    value = type("Odd", (), {"__str__": method})()
    if said is None:
        assert fill("{x}", {"x": value}) == "odd"
        return
    with pytest.raises(ReferenceFailed) as refused:
        fill("{x}", {"x": value})
    assert str(refused.value).startswith(said)
