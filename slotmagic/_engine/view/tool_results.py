"""A step of the view pipeline: older tool results are the first thing to go when space is short.

When the conversation (history and tool results) is past the compaction threshold, tool
results are replaced, oldest first (the latest turns' last), by their namespace reference and
a one-line preview, until the conversation fits. Only then does
the turn fold history into a summary. The full result stays readable: a result already kept
aside is read with ``read_namespace`` as before; a smaller one is kept aside by the turn that
sends the shortened form (:func:`to_shelve`), before the request leaves. A preview shows the
same shortened form, and writes nothing.

A pinned result is never shortened; the stored messages never change.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ..._core.messages import Message
from ..._namespace import PREFIX, content_key, parse_reference
from ..._store.base import History
from ..run.reading import RECALL
from ..steps import step
from .view import ViewBuild, ViewEntry, tokens_of

_PREVIEW = 100  # characters of the one-line preview
_SHORTEST = 400  # bytes: a result this short costs about what its reference would


def system_side(build: ViewBuild) -> tuple[int, int]:
    """Tokens on the system side and of the tool definitions (the request's, else the bare
    ones the wire adds beside a history's tool calls), as ``budgeted`` counts them."""
    counting = build.counting
    definitions = build.tools or build.bare_tools
    first = next((e.message.content for e in build.system if e.message.role == "system"), None)
    tools = counting.scale(counting.counter.count_tools_after(definitions, first))
    return tokens_of(build.system), tools


@step("counting", "budget", "reserve", "tools")
def aged_tool_results(build: ViewBuild) -> None:
    for entry in build.conversation:  # a loop, not any(): most views hold no tool result to shorten
        if entry.message.role == "tool":
            break
    else:
        return
    system, tools = system_side(build)
    room = build.budget.history_available(system + tools, build.reserve)
    conversation = tokens_of(build.conversation) + build.counting.counter.priming
    if conversation <= room:
        return
    # Oldest first: the latest turns' results, which the model is likeliest still to need, go
    # last (a shortened result is still read whole on request; a summary is not).
    for i, entry in enumerate(build.conversation):
        if entry.kind != "history" or entry.message.role != "tool" or entry.position in build.pinned:
            continue
        short = shortened(entry.message)
        if short is None:
            continue
        tokens = build.counting.count(short)
        if tokens >= entry.tokens:
            continue
        build.conversation[i] = ViewEntry(short, "elided", entry.position, tokens)
        conversation -= entry.tokens - tokens
        if conversation <= room:
            return


_PAGE = re.compile(r"^\[(namespace://\S+) characters ([\d,]+) to ([\d,]+) of ([\d,]+)")


def shortened(message: Message) -> Message | None:
    """A tool result as a reference and a one-line preview; None when it is too short to gain
    anything. A page read with ``read_namespace`` points back to where it was read from, a
    ``recall`` result says how to ask again: neither is kept aside a second time."""
    content = message.content
    tool = message.name or "tool"
    parsed = parse_reference(content)
    page = _PAGE.match(content)
    if parsed is not None:
        head, _, rest = content.partition("\n")
        size_line, _, preview = rest.partition("\n")
        kept = size_line.split(";")[0].lstrip("[")
        text = f"{head}\n[{kept}; read_namespace(ref) reads them] {_one_line(preview)}"
    elif len(content.encode("utf-8")) < _SHORTEST:
        return None
    elif page is not None:
        ref, lo, hi, size = page.groups()
        offset = lo.replace(",", "")
        text = (
            f"{ref}\n[characters {lo} to {hi} of {size}, read in an earlier turn and shortened to save room; "
            f"read_namespace(ref, offset={offset}) reads them again]"
        )
    elif tool == RECALL:
        text = f"[recall results of an earlier turn, shortened to save room: recall again] {_one_line(content)}"
    else:
        size = len(content.encode("utf-8"))
        text = (
            f"{PREFIX}{tool}/{content_key(content)}\n"
            f"[an older result, {size:,} bytes, shortened to save room; read_namespace(ref) reads it] "
            f"{_one_line(content)}"
        )
    return replace(message, content=text)


def kept_aside_by(short: Message, original: Message) -> bool:
    """Whether ``short`` refers to ``original``'s own text by its content key (which must then
    be kept aside for the reference to read), not to a result kept aside already."""
    parsed = parse_reference(short.content)
    return parsed is not None and parsed[1] == content_key(original.content)


def to_shelve(entries: Sequence[ViewEntry], history: History) -> list[tuple[str, str]]:
    """``(tool, content)`` of the shortened results whose full text is not kept aside yet: the
    turn that sends the view keeps them aside first, so every reference is readable."""
    out = []
    for entry in entries:
        if entry.kind == "elided" and entry.position is not None:
            original = history.messages(entry.position, entry.position + 1)[0]
            if kept_aside_by(entry.message, original):
                out.append((original.name or "tool", original.content))
    return out


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _PREVIEW else line[: _PREVIEW - 1] + "…"
