"""Showing a reply: one display area, updated at a bounded rate while the reply streams.

Each output is a mimebundle (HTML rendered from the reply's Markdown, with a plain-text
fallback, so notebooks render on GitHub and under nbval) with provenance metadata (session,
slot, turn, model) that front-end code can find.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from time import monotonic
from typing import Any

from IPython.display import DisplayHandle, display

from .._core.images import Image
from .._engine.run.loop import ToolStep
from .._engine.run.reply import Reply
from .._markdown import reply_html


def format_cost(usd: float) -> str:
    """Dollars to four places; a cost too small for that is still shown as not nothing."""
    if 0 < usd < 0.0001:
        return "<$0.0001"
    return f"${usd:.4f}"


def footer(reply: Reply, *, note: str | None = None) -> str:
    """One line: where the turn went, what it cost, and whether it was replayed or forked."""
    parts = [
        f"slot {reply.slot}",
        f"turn {reply.turn}",
        f"{reply.usage.input_tokens} in / {reply.usage.output_tokens} out",
        reply.model,
    ]
    if reply.cost is not None:
        parts.append(format_cost(reply.cost))
    if reply.replayed:
        parts.insert(0, "replayed from the store, no model call")
    forked = reply.forked_from
    if forked is not None and not reply.replayed:
        if forked.reason == "moved":
            parts.insert(
                0, f"slot {forked.slot} moved on while this reply was written: stored on new branch {reply.slot}"
            )
        else:
            parts.insert(0, f"edited: new branch {reply.slot} from {forked.slot} before turn {forked.turn}")
    if note:
        parts.insert(0, note)
    if reply.usage.cached_tokens:
        saved = f", saved {format_cost(reply.saved)}" if reply.saved else ""
        parts.append(f"{reply.usage.cached_tokens:,} cached{saved}")
    line = " · ".join(parts)
    return "\n".join([line, *reply.notes]) if reply.notes else line


def step_html(step: ToolStep) -> str:
    """A tool call in one line, its whole result folded under it (all of it escaped)."""
    head = html.escape(f"{step.name}({step.arguments}) → {step.summary}")
    mark = "⚠️" if step.is_error else "🔧"
    return f"<details><summary>{mark} {head}</summary>\n<pre>{html.escape(step.result)}</pre>\n</details>\n"


def thumbnails(images: Sequence[Image]) -> tuple[str, str]:
    """The images a turn sent, as thumbnails (HTML) and one line each (plain text)."""
    if not images:
        return "", ""
    tags = "".join(
        f'<img class="slotmagic-thumb" src="{image.data_url()}" alt="{html.escape(image.label or "image")}" '
        f'title="{html.escape(f"{image.label} · {image.describe()}".strip(" ·"))}" '
        'style="max-height:96px;max-width:160px;margin:0 6px 4px 0;border:1px solid #ccc;vertical-align:top">'
        for image in images
    )
    plain = "".join(f"[sent image{' ' + image.label if image.label else ''}: {image.describe()}]\n" for image in images)
    return f'<div class="slotmagic-attached">{tags}</div>\n', plain


def bundle(text: str, line: str, steps: Sequence[ToolStep] = (), images: Sequence[Image] = ()) -> dict[str, str]:
    """The reply with its tool calls above it and its footer (one or more lines) under it, as
    HTML (the reply's Markdown rendered by :func:`~slotmagic._markdown.reply_html`: raw HTML
    escaped, unsafe links refused) and as plain text. There is deliberately no
    ``text/markdown`` form: JupyterLab renders the Markdown of an output it trusts with raw
    HTML passed through, unsanitized, so the model's text would be live there."""
    lines = line.split("\n")
    tools_html = "".join(step_html(s) for s in steps)
    tools_plain = "".join(f"[tool] {s.describe()}\n" for s in steps)
    footer = "<br>\n".join(f"<em>{html.escape(x)}</em>" for x in lines)
    thumbs_html, thumbs_plain = thumbnails(images)
    return {
        "text/html": f'{thumbs_html}{tools_html}{reply_html(text)}<p class="slotmagic-footer">{footer}</p>\n',
        "text/plain": f"{thumbs_plain}{tools_plain}{text}\n\n" + "\n".join(f"[{x}]" for x in lines),
    }


def reply_metadata(reply: Reply | None, session_id: str, slot: str, model: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"session": session_id, "slot": slot, "model": model}
    if reply is not None:
        meta.update(slot=reply.slot, turn=reply.turn, model=reply.model, replayed=reply.replayed)
    return {"slotmagic": meta}


class StreamView:
    """Shows a reply as it streams.

    Nothing is displayed until ``throttle`` seconds have passed (a quick reply is shown once,
    complete); after that the one display area is updated at most once per ``throttle``
    seconds, plus once at the end. So the number of updates is bounded by the reply's
    duration, not its length.
    """

    def __init__(
        self, *, live: bool, throttle: float, metadata: dict[str, Any], waiting: str, images: Sequence[Image] = ()
    ) -> None:
        self.images = tuple(images)  # what the turn sent: thumbnails above the reply
        self.live = live
        self.throttle = throttle
        self.metadata = metadata
        self.waiting = waiting
        self._waiting_before: str | None = None  # the line to go back to once the reply begins
        self._chunks: list[str] = []  # joined only when shown: += would copy the reply per chunk
        self.steps: list[ToolStep] = []
        self._handle: DisplayHandle | None = None
        self._started = monotonic()
        self._last = self._started

    def feed(self, chunks: Iterable[str]) -> None:
        for chunk in chunks:
            if self._waiting_before is not None:  # the reply has begun: what held it up is over
                self.waiting, self._waiting_before = self._waiting_before, None
            self._chunks.append(chunk)
            if self.live:
                now = monotonic()
                if now - self._last >= self.throttle:
                    self._last = now
                    self._show(bundle(self.text, self.waiting, self.steps, self.images))

    def step(self, step: ToolStep) -> None:
        """A tool call came back: shown at the same bounded rate as text."""
        self.steps.append(step)
        if self.live:
            now = monotonic()
            if now - self._last >= self.throttle:
                self._last = now
                self._show(bundle(self.text, self.waiting, self.steps, self.images))

    def waiting_for(self, line: str) -> None:
        """Say what the reply waits for (a long compaction's progress), at the bounded rate."""
        if self._waiting_before is None:
            self._waiting_before = self.waiting
        self.waiting = line
        if self.live:
            now = monotonic()
            if now - self._last >= self.throttle:
                self._last = now
                self._show(bundle(self.text, self.waiting, self.steps, self.images))

    @property
    def text(self) -> str:
        return "".join(self._chunks)

    def finish(self, reply: Reply, line: str) -> None:
        self.metadata = reply_metadata(reply, self.metadata["slotmagic"]["session"], reply.slot, reply.model)
        self._show(bundle(reply.text, line, reply.steps, self.images))

    def interrupted(self, line: str) -> None:
        if self._handle is not None:
            self._show(bundle(self.text, line, self.steps, self.images))

    def _show(self, data: dict[str, str]) -> None:
        if self._handle is None:
            self._handle = display(data, raw=True, metadata=self.metadata, display_id=True)
        else:
            self._handle.update(data, raw=True, metadata=self.metadata)
