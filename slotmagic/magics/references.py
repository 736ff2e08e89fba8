"""References in a ``%%turn`` cell: ``{name}`` and ``{expression}`` filled from the user
namespace, ``In[n]``, ``Out[n]``, ``Err[n]``, ``_`` and ``__`` among them; ``{{`` and ``}}``
are literal braces. And the objects ``--attach`` names.

An undefined name or an expression that fails stops the cell with one line
(:class:`ReferenceFailed`) before anything is sent. The filled text is what the turn sends and
stores, so replay, diff and export see what the model saw.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import ConfigError

_OUT = re.compile(r"^\s*Out\s*\[\s*(-?\d+)\s*\]\s*$")


class ReferenceFailed(ConfigError):
    """A ``{reference}`` or an ``--attach`` name that cannot be filled in."""


def _pieces(text: str) -> Iterator[tuple[str, bool]]:
    """(text, is_expression) pieces; ``{{``/``}}`` become literal braces. The closing brace of an
    expression is found past nested brackets and string literals (``{d['}']}``)."""
    i, n, literal = 0, len(text), []
    while i < n:
        c = text[i]
        if c == "{" and text.startswith("{{", i):
            literal.append("{")
            i += 2
        elif c == "}" and text.startswith("}}", i):
            literal.append("}")
            i += 2
        elif c == "{":
            end = _closing(text, i + 1)
            if literal:
                yield "".join(literal), False
                literal = []
            yield text[i + 1 : end], True
            i = end + 1
        elif c == "}":
            raise ReferenceFailed("a single '}' in the turn: write '}}' for a literal brace (or run it with --raw)")
        else:
            literal.append(c)
            i += 1
    if literal:
        yield "".join(literal), False


def _closing(text: str, start: int) -> int:
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
        elif c == "\n" and depth == 0:
            break
        i += 1
    snippet = text[start - 1 : start + 30].split("\n")[0]
    raise ReferenceFailed(f"'{snippet}' has no closing '}}': write '{{{{' for a literal brace (or run it with --raw)")


def _compile(source: str) -> tuple[Any, bool]:
    """(code, formatted): an expression, else an f-string replacement field (``x!r``,
    ``x:.2f``), whose value is then the formatted text."""
    try:
        return compile(source, "<turn reference>", "eval"), False
    except SyntaxError:
        pass
    if '"""' not in source and "\\" not in source:
        try:
            return compile(f'f"""{{{source}}}"""', "<turn reference>", "eval"), True
        except SyntaxError:
            pass
    raise ReferenceFailed(
        f"{{{source:.60}}} is not a Python expression: write '{{{{' for a literal brace (or run it with --raw)"
    )


def evaluate(expression: str, namespace: Mapping[str, Any], extra: Mapping[str, Any]) -> Any:
    """``expression``'s value in the user namespace (``extra``, e.g. ``Err``, where the user
    has no name of their own); ReferenceFailed in one line when it cannot be."""
    source = expression.strip()
    if not source:
        raise ReferenceFailed("'{}' is empty: write a name or an expression in it, or '{{}}' for literal braces")
    local = {k: v for k, v in extra.items() if k not in namespace}
    code, _ = _compile(source)
    scope = namespace if isinstance(namespace, dict) else dict(namespace)
    try:
        return eval(code, scope, local)  # the user's own expression, in their own kernel
    except NameError as exc:
        name = getattr(exc, "name", None) or str(exc)
        raise ReferenceFailed(f"{{{source:.60}}}: {name!s} is not defined; nothing was sent") from None
    except KeyError as exc:
        said = exc.args[0] if exc.args and isinstance(exc.args[0], str) and " " in exc.args[0] else f"no key {exc}"
        raise ReferenceFailed(f"{{{source:.60}}}: {said}; nothing was sent") from None
    except Exception as exc:
        raise ReferenceFailed(
            f"{{{source:.60}}} failed: {type(exc).__name__}: {exc!s:.160}; nothing was sent"
        ) from None


def fill(text: str, namespace: Mapping[str, Any], extra: Mapping[str, Any] | None = None) -> str:
    """``text`` with each ``{reference}`` replaced by ``str`` of its value."""
    if "{" not in text and "}" not in text:
        return text
    out = []
    for piece, is_expression in _pieces(text):
        out.append(str(evaluate(piece, namespace, extra or {})) if is_expression else piece)
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
