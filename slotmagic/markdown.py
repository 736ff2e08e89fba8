"""A reply's Markdown as HTML that is safe to put in a page: what the fan-out columns show.

A ``%%turn`` reply is shown through JupyterLab's own Markdown renderer and sanitizer; a widget's
view has neither, so the columns get their HTML from here. markdown-it (CommonMark, with tables
and strikethrough) renders with raw HTML turned off, so ``<img onerror=…>`` or ``<script>`` in a
reply is shown as text, and refuses ``javascript:``, ``vbscript:``, ``file:`` and non-image
``data:`` links. Links open in a new tab rather than navigating away from the notebook.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

__all__ = ["reply_html"]


def reply_html(text: str) -> str:
    """``text`` rendered as Markdown, raw HTML escaped."""
    return _renderer().render(text) if text else ""


@cache
def _renderer() -> MarkdownIt:
    from markdown_it import MarkdownIt  # imported when a fan-out first shows a reply

    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])

    def link_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        tokens[idx].attrSet("target", "_blank")
        tokens[idx].attrSet("rel", "noopener noreferrer")
        return str(self.renderToken(tokens, idx, options, env))

    md.add_render_rule("link_open", link_open)
    return md
