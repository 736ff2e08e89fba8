"""The namespace store (seed T2): large tool results kept out of the prompt.

A tool result over the threshold (2,048 bytes by default) is stored once, by content hash, in
the session's store; the message the model sees holds a reference instead —
``namespace://<tool>/<key>`` with the size and a short preview — and the built-in
``read_namespace`` tool lets the model page through the original. The history keeps the
reference (what the model saw, and what its tokens were counted on); ``messages(expand=True)``,
exports and ``%slot show --expand`` give the original text back.

Reads go through an in-memory cache bounded by bytes (least recently used first out). A
reference is only ever looked up in its own session: one from another session, or one that
does not exist, is a clear tool error, never another session's data.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from ._core.messages import Message
from ._render import plural

PREFIX = "namespace://"
DEFAULT_THRESHOLD = 2048  # bytes of UTF-8
PREVIEW_CHARS = 300
PAGE_CHARS = 4000
_REFERENCE = re.compile(r"^namespace://(?P<tool>[A-Za-z0-9_-]{1,64})/(?P<key>[0-9a-f]{16})\b")


class NamespaceRows(Protocol):
    """What the namespace needs from a store."""

    def namespace_put(self, session_id: str, key: str, tool: str, content: str) -> bool: ...

    def namespace_get(self, session_id: str, key: str) -> str | None: ...

    def namespace_has(self, session_id: str, key: str) -> bool: ...


def content_key(content: str) -> str:
    import hashlib  # here: OpenSSL's module loads in ~3 ms, at the first digest

    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:16]


def reference_text(tool: str, key: str, content: str) -> str:
    """What the model sees instead of a large result."""
    preview = content[:PREVIEW_CHARS].rstrip()
    return (
        f"{_reference_head(tool, key, content)}; read them with "
        f"read_namespace(ref, offset, length). Preview:]\n{preview}{'…' if len(content) > PREVIEW_CHARS else ''}"
    )


def _reference_head(tool: str, key: str, content: str) -> str:
    """How a reference to ``content`` begins: what tells it from a result that merely starts
    with ``namespace://…``."""
    return f"{PREFIX}{tool}/{key}\n[{len(content.encode('utf-8')):,} bytes, {len(content):,} characters kept aside"


def parse_reference(text: str) -> tuple[str, str] | None:
    """(tool, key) of a reference at the start of ``text`` (or a bare ``namespace://…``)."""
    found = _REFERENCE.match(text.strip())
    return None if found is None else (found["tool"], found["key"])


class Namespace:
    """One session's namespace over a store, with a byte-bounded LRU cache."""

    def __init__(
        self,
        store: NamespaceRows,
        session_id: str,
        *,
        threshold: int = DEFAULT_THRESHOLD,
        cache_bytes: int = 32 * 1024 * 1024,
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.threshold = threshold
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._cached = 0
        self._lock = threading.Lock()

    def shelve(self, message: Message) -> Message:
        """A tool result as the model should see it: itself when small, else a reference
        (the original stored once, by content hash)."""
        if message.role != "tool" or len(message.content.encode("utf-8")) <= self.threshold:
            return message
        key = self.keep(message.name or "tool", message.content)
        return replace(message, content=reference_text(message.name or "tool", key, message.content))

    def keep(self, tool: str, content: str) -> str:
        """Keep ``content`` aside (once, by content hash) and return its key."""
        key = content_key(content)
        self.store.namespace_put(self.session_id, key, tool, content)
        self._remember(key, content)
        return key

    def keep_stored(self, originals: Sequence[Message]) -> None:
        """Make sure the originals of the references a turn is about to store are kept: called
        in the transaction that stores the turn. A result is stored when it is shelved, but
        until its turn is stored nothing refers to it, and ``gc`` in another kernel or
        process removes what nothing refers to; gc's own transaction and this one take turns."""
        for message in originals:
            key = content_key(message.content)
            if not self.store.namespace_has(self.session_id, key):
                self.store.namespace_put(self.session_id, key, message.name or "tool", message.content)

    def get(self, key: str) -> str | None:
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        found = self.store.namespace_get(self.session_id, key)
        if found is not None:
            self._remember(key, found)
        return found

    def read(
        self,
        ref: str,
        offset: int = 0,
        length: int = PAGE_CHARS,
        fit: Callable[[Callable[[int], str], int], str | None] | None = None,
    ) -> str:
        """A page of a stored result, for the ``read_namespace`` tool (errors as text). ``fit``
        cuts the page to the room a request has left for it: given the page's text for a
        length and the length asked for, the text of the longest that fits (None: none does)."""
        parsed = parse_reference(ref)
        if parsed is None:
            return f"error: {ref!r} is not a namespace reference (they look like namespace://tool/0123456789abcdef)"
        found = self.get(parsed[1])
        if found is None:
            return f"error: no namespace entry {ref.strip()!r} in this session"
        content, where = found, f"{PREFIX}{parsed[0]}/{parsed[1]}"
        offset, length = max(0, offset), max(1, min(length, 50_000))

        def page(n: int) -> str:
            text = content[offset : offset + n]
            end = offset + len(text)
            left = len(content) - end
            if left <= 0:
                more = "; the end"
            else:
                pages = -(-left // max(1, len(text)))
                more = f"; {left:,} more characters ({plural(pages, 'more page')}) from offset {end}"
            return f"[{where} characters {offset:,} to {end:,} of {len(content):,}{more}]\n{text}"

        text = page(length) if fit is None else fit(page, length)
        if text is None:
            return (
                "error: this request has no room left for a page; answer with what you have, or read on in a later turn"
            )
        return text

    def expand(self, messages: Sequence[Message]) -> list[Message]:
        """The messages with every reference replaced by its original text (a result that only
        starts with a ``namespace://…`` line, as a tool may return one, stays as it is)."""
        out = []
        for message in messages:
            parsed = parse_reference(message.content) if message.role == "tool" else None
            if parsed is not None:
                tool, key = parsed
                original = self.get(key)
                if original is not None and message.content.startswith(_reference_head(tool, key, original)):
                    message = replace(message, content=original)
            out.append(message)
        return out

    def _remember(self, key: str, content: str) -> None:
        size = len(content.encode("utf-8"))
        if size > self.cache_bytes:
            return
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return
            self._cache[key] = content
            self._cached += size
            while self._cached > self.cache_bytes:
                _, dropped = self._cache.popitem(last=False)
                self._cached -= len(dropped.encode("utf-8"))


_MENTION = re.compile(r"namespace://[A-Za-z0-9_-]{1,64}/[0-9a-f]{16}")


def has_reference(messages: Sequence[Message]) -> bool:
    """Whether any message holds a reference: a result kept aside, or a summary, a page or a
    recalled message that names one."""
    # every reference starts with PREFIX: a substring test (no Python call per message) first
    texts = [m for m in messages if PREFIX in m.content]
    return any((m.role == "tool" and m.content.startswith(PREFIX)) or _MENTION.search(m.content) for m in texts)
