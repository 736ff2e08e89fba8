"""An error response that is an HTML page (a proxy's or gateway's 502, a load balancer's
503): shown as what the page calls itself, never as its markup."""

from __future__ import annotations

import html
import re

__all__ = ["MAX_PAGE_TITLE", "html_page"]

_TITLE = re.compile(r"<(title|h1)\b[^>]*>(.*?)</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
MAX_PAGE_TITLE = 120  # characters of an HTML error page's title worth showing


def html_page(text: str) -> str | None:
    """The title (else the first heading, else the words) of an HTML page, short; None when
    ``text`` is no HTML page. A 502 from a proxy is its status and a few words, not markup."""
    head = text.lstrip()[:512].lower()
    if not head.startswith(("<!doctype html", "<html", "<head", "<body")) and "<html" not in head:
        return None
    found = _TITLE.search(text)
    words = found[2] if found else _TAG.sub(" ", text)
    title = " ".join(html.unescape(_TAG.sub(" ", words)).split())
    return title if len(title) <= MAX_PAGE_TITLE else title[: MAX_PAGE_TITLE - 1].rstrip() + "…"
