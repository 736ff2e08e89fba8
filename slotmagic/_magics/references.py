"""References in a ``%%turn`` cell: ``{name}`` and ``{expression}`` filled from the user
namespace, ``In[n]``, ``Out[n]``, ``Err[n]``, ``_`` and ``__`` among them; ``{{`` and ``}}``
are literal braces. And the objects ``--attach`` names.

An undefined name or an expression that fails stops the cell with one line
(:class:`ReferenceFailed`) before anything is sent. Braces around what is not a Python
expression (JSON such as ``{"id": 3}``, prose, a ``{`` left open) stay as written. The
filled text is what the turn sends and stores, so replay, diff and export see what the model
saw.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from typing import Any

from .._errors import ConfigError, exception_text

_OUT = re.compile(r"^\s*Out\s*\[\s*(-?\d+)\s*\]\s*$")


class ReferenceFailed(ConfigError):
    """A ``{reference}`` or an ``--attach`` name that cannot be filled in."""


def _pieces(text: str) -> Iterator[tuple[str, bool]]:
    """(text, is_candidate) pieces; ``{{``/``}}`` become literal braces. A candidate is what
    stands between a ``{`` and its closing ``}`` on the same line, found past nested brackets
    and string literals (``{d['}']}``); a ``{`` without one, or a lone ``}``, is text."""
    i, n, literal = 0, len(text), []
    while i < n:
        c = text[i]
        if c == "{" and text.startswith("{{", i):
            literal.append("{")
            i += 2
        elif c == "}" and text.startswith("}}", i):
            literal.append("}")
            i += 2
        elif c == "{" and (end := _closing(text, i + 1)) is not None:
            if literal:
                yield "".join(literal), False
                literal = []
            yield text[i + 1 : end], True
            i = end + 1
        else:
            literal.append(c)
            i += 1
    if literal:
        yield "".join(literal), False


def _closing(text: str, start: int) -> int | None:
    depth, quote, i = 0, "", start
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0 and c == "}":
                return i
            depth -= 1
        elif c == "\n":
            return None
        i += 1
    return None


def _compile(source: str) -> Any | None:
    """The code of a reference: an expression, else an f-string replacement field (``x!r``,
    ``x:.2f``); None when it is neither, or formats a bare constant (``{"id": 3}`` is JSON,
    not a reference), so it stays text."""
    try:
        return compile(source, "<turn reference>", "eval")
    except SyntaxError:
        pass
    if '"""' in source or "\\" in source:
        return None
    field = f'f"""{{{source}}}"""'
    try:
        tree = ast.parse(field, mode="eval")
    except SyntaxError:
        return None
    values = [v for v in getattr(tree.body, "values", ()) if isinstance(v, ast.FormattedValue)]
    if len(values) != 1 or isinstance(values[0].value, ast.Constant):
        return None
    return compile(tree, "<turn reference>", "eval")


def evaluate(expression: str, namespace: Mapping[str, Any], extra: Mapping[str, Any]) -> Any:
    """``expression``'s value in the user namespace (``extra``, e.g. ``Err``, where the user
    has no name of their own); ReferenceFailed in one line when it is not an expression or
    cannot be evaluated."""
    source = expression.strip()
    code = _compile(source) if source else None
    if code is None:
        raise ReferenceFailed(f"{source!r:.60} is not a Python expression")
    return _run(source, code, namespace, extra)


def _run(source: str, code: Any, namespace: Mapping[str, Any], extra: Mapping[str, Any]) -> Any:
    local = {k: v for k, v in extra.items() if k not in namespace}
    scope = namespace if isinstance(namespace, dict) else dict(namespace)
    try:
        return eval(code, scope, local)  # the user's own expression, in their own kernel
    except NameError as exc:
        name = getattr(exc, "name", None)
        said = f"{name:.80} is not defined" if type(name) is str else f"{exception_text(exc):.160}"
        raise ReferenceFailed(f"{{{source:.60}}}: {said}; nothing was sent (write {{{{ for a literal brace)") from None
    except KeyError as exc:
        first = exc.args[0] if exc.args else None
        told = str.__str__(first) if isinstance(first, str) and " " in first else f"no key {exception_text(exc)}"
        raise ReferenceFailed(f"{{{source:.60}}}: {told:.160}; nothing was sent") from None
    except Exception as exc:
        raise _failed(source, exc) from None


def _failed(source: str, exc: BaseException, doing: str = "") -> ReferenceFailed:
    """The one line for a reference that raised (its message read safely: an exception's own
    ``__str__`` may raise too)."""
    return ReferenceFailed(
        f"{{{source:.60}}}{doing} failed: {type(exc).__name__}: {exception_text(exc):.160}; nothing was sent"
    )


def _text(source: str, value: object) -> str:
    """``str(value)``, as an f-string makes it: one line when its ``__str__`` raises, recurses
    without end or returns what is not text."""
    try:
        text = str(value)
    except Exception as exc:  # RecursionError and TypeError (__str__ returned non-string) among them
        raise _failed(source, exc, " (its str())") from None
    if type(text) is not str:  # a str subclass may misbehave too: its plain text
        try:
            text = str.__str__(text)
        except Exception as exc:
            raise _failed(source, exc, " (its str())") from None
    return text


def fill(text: str, namespace: Mapping[str, Any], extra: Mapping[str, Any] | None = None) -> str:
    """``text`` with each ``{reference}`` replaced by ``str`` of its value. Braces around what
    is not a Python expression (JSON, prose) stay as written."""
    if "{" not in text and "}" not in text:
        return text
    out = []
    for piece, candidate in _pieces(text):
        code = _compile(piece.strip()) if candidate and piece.strip() else None
        if code is None:
            out.append(f"{{{piece}}}" if candidate else piece)
        else:
            source = piece.strip()
            out.append(_text(source, _run(source, code, namespace, extra or {})))
    return "".join(out)


def split_names(text: str) -> list[str]:
    """``df,fig,Out[7]`` (commas inside brackets kept) as its names."""
    names: list[str] = []
    current: list[str] = []
    depth = 0
    for c in text:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            names.append("".join(current).strip())
            current = []
        else:
            current.append(c)
    names.append("".join(current).strip())
    return [n for n in names if n]


def attach_values(
    names: list[str], namespace: Mapping[str, Any], images: Mapping[int, list[bytes]], extra: Mapping[str, Any]
) -> dict[str, object]:
    """Each ``--attach`` name's object: a name or expression's value, or for ``Out[n]`` the
    cell's value, else the image(s) it displayed. ReferenceFailed in one line otherwise."""
    out: dict[str, object] = {}
    for name in names:
        found = _OUT.match(name)
        if found is not None:
            count = int(found[1])
            outputs = namespace.get("Out") or {}
            if count in outputs:
                out[name] = outputs[count]
            elif images.get(count):
                shown = images[count]
                for n, raw in enumerate(shown, 1):
                    out[name if len(shown) == 1 else f"{name} image {n}"] = raw
            else:
                raise ReferenceFailed(
                    f"--attach {name}: cell {count} has no output and showed no image; nothing was sent"
                )
            continue
        try:
            out[name] = evaluate(name, namespace, extra)
        except ReferenceFailed as exc:
            raise ReferenceFailed(f"--attach {exc}") from None
    return out
