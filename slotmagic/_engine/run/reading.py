"""The tools a turn offers for what is out of the model's sight: ``read_namespace`` pages through
a tool result kept aside, ``recall`` searches and reads the messages a compaction folded away.

Both are made for one turn, bound to a :class:`PageRoom`: before each round the tool loop says
how many tokens the round's results may take in the next request, and a page is cut to fit it
(the result says how much is left and how to read on). Their results are never kept aside
again: a model reading a page gets the page, not another reference to chase.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from ..._core.request import ToolSpec
from ..._namespace import PAGE_CHARS, Namespace
from ..._store.base import History, Store
from ...tools import Tool

READ_NAMESPACE, RECALL = "read_namespace", "recall"
READERS = frozenset((READ_NAMESPACE, RECALL))  # results never kept aside
_RECALL_HITS = 8
_EXCERPT = 300


@dataclass
class PageRoom:
    """Tokens one result may take in the next request (None: no limit, a read outside a turn),
    counted with ``count``."""

    tokens: int | None = None
    count: Callable[[str], int] = len

    def fit(self, make: Callable[[int], str], length: int) -> str | None:
        """``make(n)`` for the largest ``n <= length`` whose text fits (None: not even a
        little does)."""
        text = make(length)
        if self.tokens is None or self.count(text) <= self.tokens:
            return text
        lo, hi = 0, length  # the largest n that fits lies in [lo, hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.count(make(mid)) <= self.tokens:
                lo = mid
            else:
                hi = mid
        return make(lo) if lo > 0 else None


def read_namespace_tool(namespace: Namespace, room: PageRoom | None = None) -> Tool[..., str]:
    """The built-in tool that pages through a result kept aside in the namespace store."""
    room = room if room is not None else PageRoom()

    def read_namespace(ref: str, offset: int = 0, length: int = PAGE_CHARS) -> str:
        return namespace.read(ref, offset, length, fit=room.fit)

    return _bound(_read_template(), read_namespace)


def recall_tool(store: Store, session_id: str, slot_id: str, upto: int, room: PageRoom | None = None) -> Tool[..., str]:
    """The built-in tool that searches and reads the first ``upto`` messages of ``slot_id``:
    what a compaction folded into its summary (the stored messages never change)."""
    room = room if room is not None else PageRoom()

    def recall(query: str = "", position: int = -1, offset: int = 0) -> str:
        if position >= 0:
            return _read_position(store, session_id, slot_id, upto, position, offset, room)
        if not query.strip():
            return "error: give words to search for (query) or a message's position (position)"
        return _search(store, session_id, slot_id, upto, query, room)

    return _bound(_recall_template(), recall)


def _read_position(
    store: Store, session_id: str, slot_id: str, upto: int, position: int, offset: int, room: PageRoom
) -> str:
    if position >= upto:
        return f"error: position {position} is not folded away (positions 0 to {upto - 1} are): it is in view"
    history = store.history(session_id, slot_id)
    if position >= len(history):
        return f"error: slot {slot_id!r} has no message at position {position}"
    message = history.messages(position, position + 1)[0]
    content = message.content or "(no text)"
    calls = "".join(f"\n-> tool call {c.name}({c.arguments})" for c in message.tool_calls)
    whole = content + calls
    offset = max(0, offset)

    def page(n: int) -> str:
        text = whole[offset : offset + n]
        end = offset + len(text)
        more = "" if end >= len(whole) else f" (cut: {len(whole) - end:,} more characters from offset {end})"
        return f"[message {position}, {message.role}{more}]\n{text}"

    fitted = room.fit(page, max(1, len(whole) - offset))
    return fitted if fitted is not None else "error: this request has no room left for the message"


def _search(store: Store, session_id: str, slot_id: str, upto: int, query: str, room: PageRoom) -> str:
    hits = [h for h in store.search(session_id, query, slot_id, limit=200) if h.position < upto]
    if not hits:
        return f"no folded message of this conversation matches {query!r}"
    history = store.history(session_id, slot_id)
    lines = [
        f"[message {h.position}, {h.role}, turn {h.turn}] {_excerpt(_literal(history, h.position), query)}"
        for h in hits[:_RECALL_HITS]
    ]
    more = len(hits) - _RECALL_HITS

    def listing(n: int) -> str:
        shown = lines[: max(1, n)]
        rest = more + len(lines) - len(shown)
        tail = f"\n({rest} more; narrow the query)" if rest > 0 else ""
        return "\n".join(shown) + tail + "\nrecall(position=N) reads a message whole."

    fitted = room.fit(listing, len(lines))
    return fitted if fitted is not None else "error: this request has no room left for search results"


def _literal(history: History, position: int) -> str:
    """The stored text of the message at ``position``, its tool calls included (what a search
    matched, as it was written: no marks around the words found)."""
    message = history.messages(position, position + 1)[0]
    return message.content + "".join(f" -> tool call {c.name}({c.arguments})" for c in message.tool_calls)


def _excerpt(text: str, query: str) -> str:
    """About :data:`_EXCERPT` characters of ``text`` around the first word of ``query`` it
    holds, literally (the whole text when it is short)."""
    line = " ".join(text.split())
    if len(line) <= _EXCERPT:
        return line
    lower = line.lower()
    found = [i for word in query.lower().split() if (i := lower.find(word.strip("\"'*"))) >= 0]
    start = max(0, min(found, default=0) - _EXCERPT // 3)
    start = min(start, len(line) - _EXCERPT + 1)
    piece = line[start : start + _EXCERPT - 2]
    return ("…" if start else "") + piece + ("…" if start + len(piece) < len(line) else "")


def recall_spec() -> ToolSpec:
    """What a request says about ``recall`` (for counting it before it is offered)."""
    return _recall_template().spec()


def _bound(template: Tool[..., str], function: Callable[..., str]) -> Tool[..., str]:
    """A tool with ``template``'s name and schema that calls ``function`` (a closure over one
    turn's room): the schema is worked out and checked once per process, not once per turn."""
    return template._calling(function)


@cache
def _read_template() -> Tool[..., str]:
    def read_namespace(ref: str, offset: int = 0, length: int = PAGE_CHARS) -> str:
        """Read a page of a large tool result that was kept aside (cut to the room left).

        Args:
            ref: The namespace://tool/key reference.
            offset: The first character to read.
            length: How many characters (at most 50,000).
        """
        raise AssertionError("a template")

    return Tool.from_function(read_namespace)


@cache
def _recall_template() -> Tool[..., str]:
    def recall(query: str = "", position: int = -1, offset: int = 0) -> str:
        """Search or read the earlier messages that the summary replaced.

        Args:
            query: Words to find (all must match).
            position: A message's position, to read it whole.
            offset: Where to start reading a long message.
        """
        raise AssertionError("a template")

    return Tool.from_function(recall)
