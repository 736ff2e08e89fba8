"""A reply's Markdown as HTML that is safe to put in a page: how every reply is shown.

A ``%%turn`` reply, a ``Reply`` displayed in a notebook and the fan-out columns all get their
HTML from here, rendered by parsing the text, never by guessing at it: markdown-it (CommonMark,
with tables and strikethrough) renders with raw HTML turned off, so ``<img onerror=…>`` or
``<script>`` in a reply is shown as text, and refuses ``javascript:``, ``vbscript:``, ``file:``
and non-image ``data:`` links (they stay text too). Links open in a new tab rather than
navigating away from the notebook.

TeX is left as written: ``$…$``, ``$$…$$``, ``\\(…\\)``, ``\\[…\\]`` and
``\\begin{env}…\\end{env}`` are not read as Markdown (an ``_`` or a ``\\{`` in them would be), so
JupyterLab's MathJax typesets them as it does a Markdown cell's. A ``$`` opens math only when a
character other than a space follows it and closes it only when one precedes it and no digit
follows, as pandoc reads them: "$5 and $6" stays text.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_inline import StateInline
    from markdown_it.token import Token

__all__ = ["code_blocks", "reply_html"]


def reply_html(text: str) -> str:
    """``text`` rendered as Markdown, raw HTML escaped, unsafe links refused, TeX kept."""
    return _renderer().render(text) if text else ""


def code_blocks(text: str) -> list[str]:
    """The code of each fenced or indented code block of a reply, in order, read by the same
    parser that renders it (a fence inside a list or a quote counts)."""
    if not text:
        return []
    return [t.content for t in _renderer().parse(text) if t.type in ("fence", "code_block") and t.content.strip()]


@cache
def _renderer() -> MarkdownIt:
    from html import escape

    from markdown_it import MarkdownIt  # both imported when a reply is first shown

    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])

    def link_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        tokens[idx].attrSet("target", "_blank")
        tokens[idx].attrSet("rel", "noopener noreferrer")
        return str(self.renderToken(tokens, idx, options, env))

    def math(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        return escape(tokens[idx].content, quote=False)

    md.inline.ruler.before("escape", "math", _math)
    md.add_render_rule("link_open", link_open)
    md.add_render_rule("math", math)
    return md


_BEGIN = re.compile(r"\\begin\{([A-Za-z]*\*?)\}")


def _math(state: StateInline, silent: bool) -> bool:
    """An inline rule: TeX from its opening delimiter to its closing one, kept as one token."""
    src, pos = state.src, state.pos
    if src.startswith("$$", pos):
        end = _next(state, "$$", pos + 2)
        close = 2
    elif src.startswith("$", pos):
        following = src[pos + 1 : pos + 2]
        if not following or following.isspace():
            return False
        end = _next(state, "$", pos + 1)
        close = 1
    elif src.startswith(("\\(", "\\["), pos):
        end = _next(state, "\\)" if src[pos + 1] == "(" else "\\]", pos + 2)
        close = 2
    else:
        begun = _BEGIN.match(src, pos) if src.startswith("\\begin{", pos) else None
        if begun is None:
            return False
        closing = f"\\end{{{begun[1]}}}"
        end = _next(state, closing, begun.end())
        close = len(closing)
    if end < 0 or end > state.posMax - close:
        return False
    if not silent:
        token = state.push("math", "", 0)
        token.content = src[pos : end + close]
    state.pos = end + close
    return True


def _next(state: StateInline, delimiter: str, start: int) -> int:
    """Where the first closing ``delimiter`` at or after ``start`` is, or -1 (one that would
    leave the math empty does not count). Each delimiter's places in the text are found once
    per text, so a reply full of unclosed ``$`` costs no more than one without."""
    src = state.src
    places = state.env.setdefault("_math", {})
    key = (delimiter, src)
    found = places.get(key)
    if found is None:
        if delimiter == "$":
            # A closing $ follows a character other than a space or a backslash, is not part
            # of $$, and no digit follows it.
            found = [m.start() for m in re.finditer(r"(?<=[^\s\\$])\$(?![\d$])", src)]
        else:
            found = [m.start() for m in re.finditer(re.escape(delimiter), src)]
        places[key] = found
    i = bisect_left(found, start)
    while i < len(found) and found[i] == start:  # nothing between the delimiters: not math
        i += 1
    return found[i] if i < len(found) else -1
