"""Outputs read back from a store, made safe to show: what a cell record holds is data.

A cell record (``_core/cells.py``) keeps what a magic displayed, to show it again when its cell
runs again. The record comes from a store, and a store can come from a colleague (a
``.slotmagic/`` folder shipped beside a notebook) or a shared PostgreSQL server, so nothing in
it is trusted as markup or code. Every displayed output a magic keeps, and every one it shows
again, passes through :func:`clean_bundle`:

- only the kinds of output slotmagic itself shows are kept: ``text/plain``, ``text/html`` and
  PNG or JPEG images (base64); a widget view, JavaScript, Markdown (which JupyterLab renders
  with raw HTML passed through), SVG or any other kind is dropped;
- HTML is rebuilt from its parse, keeping only the tags and attributes slotmagic's own
  renderers write (tables, lists, code, details, links, images): no script, no event
  handler, no ``style`` beyond a few layout properties without ``url()``, links only to
  ``http(s)``, ``mailto`` or relative places, images only from ``data:image/png|jpeg|gif|webp``;
  text is escaped again.
- metadata keeps only slotmagic's provenance (session, slot, turn, model), as plain values.

What slotmagic renders itself passes unchanged in meaning (the same tags, attributes and text),
so a replayed cell reads as its first run did.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from html.parser import HTMLParser
from typing import Any

__all__ = ["clean_bundle", "clean_html", "clean_metadata"]

_TEXT = "text/plain"
_HTML = "text/html"
_IMAGES = ("image/png", "image/jpeg")
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_TAGS = _words(
    "a abbr b blockquote br caption code col colgroup dd del details div dl dt em h1 h2 h3 h4 h5 h6 hr i "
    "img kbd li ol p pre q s small span strong sub summary sup table tbody td tfoot th thead tr u ul"
)
_VOID = frozenset({"br", "col", "hr", "img"})
# Tags whose content is not text to show either: dropped with everything inside them.
_DROPPED = _words(
    "script style template iframe object embed applet noscript noembed noframes frameset textarea select "
    "svg math title head xmp"
)
_ATTRIBUTES: dict[str, frozenset[str]] = {
    "*": frozenset({"class", "title", "style"}),
    "a": frozenset({"href", "target", "rel"}),
    "img": frozenset({"src", "alt", "width", "height"}),
    "td": frozenset({"colspan", "rowspan", "align"}),
    "th": frozenset({"colspan", "rowspan", "align"}),
    "col": frozenset({"span"}),
    "ol": frozenset({"start"}),
    "details": frozenset({"open"}),
}
_STYLES = _words(
    "text-align vertical-align white-space opacity margin padding border max-width max-height width "
    "height font-weight font-style"
)
_STYLE_VALUE = re.compile(r"[A-Za-z0-9#%.,\s-]*")  # no parentheses: no url(), expression(), var()
_IMAGE_URL = re.compile(r"data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*", re.IGNORECASE)
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_LINKS = frozenset({"http", "https", "mailto"})
_CONTROL = re.compile(r"[\x00-\x20\x7f]+")


def clean_bundle(data: Mapping[str, Any]) -> dict[str, str]:
    """The kinds of output slotmagic shows, from ``data`` (a mimebundle), made safe; a value of
    the wrong type is left out. Empty when nothing is left."""
    out: dict[str, str] = {}
    text = data.get(_TEXT)
    if isinstance(text, str):
        out[_TEXT] = text
    markup = data.get(_HTML)
    if isinstance(markup, str):
        out[_HTML] = clean_html(markup)
    for kind in _IMAGES:
        image = data.get(kind)
        if isinstance(image, str) and _BASE64.fullmatch(image):
            out[kind] = image
    return out


def clean_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Only slotmagic's provenance (``{"slotmagic": {...}}``), its values plain."""
    found = metadata.get("slotmagic")
    if not isinstance(found, Mapping):
        return {}
    kept = {str(k): v for k, v in found.items() if isinstance(v, (str, int, float, bool)) or v is None}
    return {"slotmagic": kept}


def clean_html(markup: str) -> str:
    """``markup`` rebuilt from its parse with only the tags and attributes slotmagic writes."""
    cleaner = _Cleaner()
    cleaner.feed(markup)
    cleaner.close()
    return cleaner.result()


def _allowed(tag: str, name: str, value: str) -> str | None:
    """The attribute's value as kept, or None to leave it out."""
    if name not in _ATTRIBUTES["*"] and name not in _ATTRIBUTES.get(tag, frozenset()):
        return None
    if name == "style":
        return _style(value)
    if name == "href":
        plain = _CONTROL.sub("", value)
        scheme = _SCHEME.match(plain)
        return value if scheme is None or scheme.group(1).lower() in _LINKS else None
    if name == "src":
        return value if _IMAGE_URL.fullmatch(value.strip()) else None
    if name == "target":
        return value if value == "_blank" else None
    return value


def _style(value: str) -> str | None:
    kept = []
    for declaration in value.split(";"):
        name, colon, setting = declaration.partition(":")
        name, setting = name.strip().lower(), setting.strip()
        if colon and name in _STYLES and _STYLE_VALUE.fullmatch(setting):
            kept.append(f"{name}:{setting}")
    return ";".join(kept) or None


class _Cleaner(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._out: list[str] = []
        self._open: list[str] = []  # allowed tags opened and not yet closed
        self._skipping: list[str] = []  # dropped tags whose content is being left out

    def result(self) -> str:
        return "".join(self._out) + "".join(f"</{tag}>" for tag in reversed(self._open))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skipping:
            if tag in _DROPPED and tag not in _VOID:
                self._skipping.append(tag)
            return
        if tag in _DROPPED:
            self._skipping.append(tag)
            return
        if tag not in _TAGS:
            return
        parts = [tag]
        for name, value in attrs:
            kept = _allowed(tag, name, value or "")
            if kept is not None:
                parts.append(f'{name}="{html.escape(kept, quote=True)}"')
        if tag == "a" and any(p.startswith('target="') for p in parts):
            parts = [p for p in parts if not p.startswith('rel="')] + ['rel="noopener noreferrer"']
        self._out.append(f"<{' '.join(parts)}>")
        if tag not in _VOID:
            self._open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skipping or tag in _DROPPED:  # <svg/>: nothing inside to leave out
            return
        self.handle_starttag(tag, attrs)
        if tag in _TAGS and tag not in _VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._skipping:
            if self._skipping[-1] == tag:
                self._skipping.pop()
            return
        if tag in self._open:
            while self._open:
                opened = self._open.pop()
                self._out.append(f"</{opened}>")
                if opened == tag:
                    break

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self._out.append(html.escape(data, quote=False))
