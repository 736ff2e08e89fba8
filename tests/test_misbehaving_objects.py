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


# -- attachments ---------------------------------------------------------------------------------


class BadPng:
    def _repr_png_(self) -> bytes:
        raise ValueError("the renderer is gone")


class Unstringable:
    def __str__(self) -> str:
        raise RuntimeError("no text")

    __repr__ = __str__


def lone_surrogate_frame() -> object:
    import pandas as pd

    return pd.DataFrame({"name": ["ok", "bad \ud800 here"], "n": [1, 2]})


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (lambda: lone_surrogate_frame(), "its text holds '\\ud800', a lone surrogate, which is not valid Unicode"),
        (lambda: "text with \udcff in it", "its text holds '\\udcff', a lone surrogate"),
        (lambda: __import__("PIL.Image").Image.new("RGB", (0, 0)), "an empty image (0x0 pixels)"),
        (lambda: __import__("PIL.Image").Image.new("RGB", (5, 0)), "an empty image (5x0 pixels)"),
        (lambda: BadPng(), "making its image raised ValueError: the renderer is gone; nothing was sent"),
        (
            lambda: __import__("pandas").DataFrame({"a": [Unstringable()]}),
            "the pandas DataFrame cannot be read (RuntimeError: no text)",
        ),
    ],
)
def test_an_attachment_that_cannot_be_sent_is_one_line(value: Callable[[], object], said: str) -> None:
    from slotmagic import ConfigError
    from slotmagic._attach import attach_all

    with pytest.raises(ConfigError) as refused:
        attach_all({"df": value()})
    line = str(refused.value)
    assert line.startswith("df: ") and said in line and "\n" not in line
    line.encode("utf-8")  # the line itself can be printed


def test_a_label_that_is_no_text_is_one_line() -> None:
    from slotmagic import ConfigError
    from slotmagic._attach import attach_all

    for label in (Unstringable(), "bad \ud800"):
        with pytest.raises(ConfigError, match="label attachments with plain strings"):
            attach_all({label: "x"})


def test_a_refused_attachment_in_a_cell_is_one_line_and_nothing_is_stored(ip: Any) -> None:
    from IPython.core.error import UsageError

    from slotmagic._magics import current_session

    ip.user_ns["frame"] = lone_surrogate_frame()
    ip.user_ns["plot"] = BadPng()
    for name in ("frame", "plot"):
        with pytest.raises(UsageError, match=f"^{name}: "):
            ip.run_cell(f"%%turn --attach {name}\nLook", store_history=True)
    assert current_session().messages() == []
