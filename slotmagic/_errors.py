"""The exceptions slotmagic raises.

Every message is one line that says what was wrong and how to fix it, so the IPython layer
can show it as is (a ``UsageError``, no traceback). Anything that is *not* a
``SlotMagicError`` is a bug and keeps its traceback. Every class below is importable from
``slotmagic`` (``from slotmagic import OverBudget``) except the five marked with where they
live: ``RankFileError`` is ``slotmagic.tokens``', ``ServerDown`` ``slotmagic.tools``'; the magics
and widgets catch their own and show them (``tests/test_public_api.py`` holds this tree to the classes there are).

    SlotMagicError
    ├── SlotError
    │   ├── SlotNotFound          (also a KeyError)
    │   ├── SlotExists
    │   │   └── SlotConflict
    │   ├── SlotReadonly
    │   ├── ProtectedSlot
    │   ├── SlotNotEmpty
    │   ├── SlotMoved             (a turn's slot changed while its reply was written)
    │   └── InvalidSlotId          (also a ValueError)
    ├── ConfigError                (also a ValueError)
    │   └── ReferenceFailed        [_magics] a {reference} or --attach name a cell cannot fill in
    ├── StoreError
    │   ├── ConnectionLost         (lost before a write committed: nothing kept, may be run again)
    │   └── DamagedRecord          (a stored workflow or working context this version cannot read)
    ├── TurnNotStored              (its slot was renamed or deleted meanwhile; the reply is kept)
    ├── OverBudget                 (a request that cannot fit its budget, refused before sending)
    │   └── CompactionNeeded       (auto_compact is "ask": the compaction waits for a review)
    ├── RankFileError              [slotmagic.tokens] a shipped rank file is missing or altered
    ├── ServerDown                 [slotmagic.tools] an MCP server did not start or answer in time
    ├── NotLoaded                  [widgets] a widget's kernel has no %load_ext slotmagic
    ├── SlotGone                   [widgets] the slot a widget shows was deleted or renamed
    └── ProviderError              (the slot is always left unchanged)
        ├── UnknownModel
        ├── MissingAPIKey
        ├── ProviderConnectionError  the server cannot be reached
        ├── ProviderTimeout          no connection or no data within the configured timeout
        ├── ProviderHTTPError        the API answered with an error status or error event
        │   └── RateLimited          HTTP 429, still after the retries
        ├── StreamInterrupted        the reply stopped before its final event
        ├── RequestRefused           a request that would break the API's rules, never sent
        ├── MalformedReply           the reply held something that is not the API's format
        └── ReplyTooLarge            the reply passed max_reply_bytes before it was complete

Provider messages may quote the server's own error text; it is cut to one line and any API
key or URL credential in it is redacted before it gets here.
"""

from __future__ import annotations

from collections.abc import Iterable


def closest(name: str, known: Iterable[str], cutoff: float = 0.5) -> str | None:
    """The known name closest to a mistyped one, if any is close enough to suggest."""
    import difflib  # here: a mistyped name is rare, and every kernel imports this module

    return next(iter(difflib.get_close_matches(name, list(known), n=1, cutoff=cutoff)), None)


class SlotMagicError(Exception):
    """Base class: a problem the user can fix, described in one line."""


class SlotError(SlotMagicError):
    """Something about a slot's id or state."""


class SlotNotFound(SlotError, KeyError):
    def __init__(self, slot_id: str, known: Iterable[str] = ()) -> None:
        self.slot_id = slot_id
        known = sorted(known)
        self.suggestion = closest(slot_id, known)
        hint = (
            f"did you mean {self.suggestion!r}?"
            if self.suggestion
            else (f"existing slots: {', '.join(known)}" if known else "create it first")
        )
        super().__init__(f"no slot {slot_id!r} in this session; {hint}")

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class SlotExists(SlotError):
    def __init__(self, slot_id: str) -> None:
        self.slot_id = slot_id
        super().__init__(f"slot {slot_id!r} already exists; pick another id or switch to it")


class SlotConflict(SlotExists):
    """A slot of that id exists with another definition than the one asked for."""

    def __init__(self, slot_id: str, difference: str) -> None:
        self.slot_id = slot_id
        self.difference = difference
        SlotError.__init__(
            self, f"slot {slot_id!r} already exists but {difference}; delete it first or pick another id"
        )


class SlotNotEmpty(SlotError):
    """Refused to delete a slot holding turns that no other slot shares."""

    def __init__(self, slot_id: str, turns: int) -> None:
        self.slot_id = slot_id
        self.turns = turns
        SlotError.__init__(
            self,
            f"slot {slot_id!r} holds {turns} turn{'s' if turns != 1 else ''} that no other slot "
            "shares; delete it with --force (force=True in Python) to discard them",
        )


class SlotMoved(SlotError):
    """The slot no longer holds the history a turn was made from: another turn (another
    thread, process or kernel) was stored on it meanwhile."""

    def __init__(self, slot_id: str) -> None:
        self.slot_id = slot_id
        super().__init__(
            f"slot {slot_id!r} changed while the reply was being written (another turn was stored "
            "on it meanwhile); run the turn again"
        )


class SlotReadonly(SlotError):
    def __init__(self, slot_id: str) -> None:
        self.slot_id = slot_id
        super().__init__(f"slot {slot_id!r} is readonly; derive a writable slot from it to continue the conversation")


class ProtectedSlot(SlotError):
    """Refused because the slot must always exist (the ``default`` slot)."""


class InvalidSlotId(SlotError, ValueError):
    def __init__(self, slot_id: object) -> None:
        self.slot_id = slot_id
        super().__init__(f"invalid slot id {slot_id!r}: use 1-64 letters, digits, '-', '_' or '.'")

    def __str__(self) -> str:
        return str(self.args[0])


class ConfigError(SlotMagicError, ValueError):
    """A setting or argument with a value that cannot work."""


class StoreError(SlotMagicError):
    """The state file cannot be opened or used."""


class ConnectionLost(StoreError):
    """The store's connection was lost (or could not be made) before the call's write
    committed: nothing of it was kept, and the call may be run again on a new connection
    (the PostgreSQL store does so, a few times, before it says so)."""


class DamagedRecord(StoreError):
    """A stored record (a workflow, a working-context change) cannot be read: damaged, or
    written by a newer slotmagic. ``name`` is the workflow's name, or the slot's. A turn goes
    on without it; the message says how to repair or remove it."""

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.name = name


class TurnNotStored(SlotMagicError):
    """A reply came back but its slot was renamed, deleted or undone while it was written
    (``happened`` says which). The text is kept on the exception (``text``) so nothing the
    model said is lost."""

    def __init__(self, slot_id: str, text: str, happened: str = "was renamed or deleted") -> None:
        self.slot_id = slot_id
        self.text = text
        super().__init__(
            f"the reply was not stored: slot {slot_id!r} {happened} while it was written; "
            "its text is on this error (.text), run the turn again"
        )


class OverBudget(SlotMagicError):
    """A request would not fit the slot's budget and compaction cannot make it fit (it is off
    for the slot, or the newest messages alone are too long). Nothing was sent."""


class CompactionNeeded(OverBudget):
    """A turn needs a compaction first and ``auto_compact`` is "ask": the message gives the
    numbers and the commands to review and apply it. Nothing was sent."""


class ProviderError(SlotMagicError):
    """The model could not answer; the slot is left as it was."""


class UnknownModel(ProviderError):
    pass


class MissingAPIKey(ProviderError):
    def __init__(self, provider: str, variable: str) -> None:
        self.provider = provider
        self.variable = variable
        super().__init__(
            f"no API key for {provider}: set the {variable} environment variable "
            "(keys are read at each turn, so no restart is needed)"
        )


class ProviderConnectionError(ProviderError):
    """Nothing came back: the server refused the connection, or the name does not resolve."""


class ProviderTimeout(ProviderError):
    """The connect or read timeout passed (``connect_timeout`` / ``read_timeout`` settings), or
    the reply was not complete within ``turn_timeout``."""


class ProviderHTTPError(ProviderError):
    """The API said no: an HTTP error status, or an error event in the middle of a reply.

    ``status`` is None for an error event inside a stream; ``error_type`` is the API's own
    name for the error (``invalid_request_error``, ``overloaded_error`` ...) when it gave one.
    """

    def __init__(self, message: str, *, status: int | None = None, error_type: str | None = None) -> None:
        self.status = status
        self.error_type = error_type
        super().__init__(message)


class RateLimited(ProviderHTTPError):
    """HTTP 429 after every retry, or a server that asks to wait longer than slotmagic will."""


class StreamInterrupted(ProviderError):
    """The connection dropped, or the stream ended, before the reply's final event."""


class RequestRefused(ProviderError):
    """A request that would break one of the API's documented rules (``wire rules`` in the
    provider modules) even after slotmagic kept them: refused before anything was sent."""


class MalformedReply(ProviderError):
    """An event that cannot be parsed, or a response that is not an event stream."""


class ReplyTooLarge(ProviderError):
    """The reply passed ``max_reply_bytes`` before it was complete; the connection was closed."""


def exception_text(exc: BaseException, limit: int = 500) -> str:
    """An exception's message on one line, at most ``limit`` characters; one whose own
    ``__str__`` raises is named so (a user's object, a plugin's error, may misbehave twice)."""
    try:
        text = " ".join(str(exc).split()) or "(no message)"
    except Exception as inner:  # its __str__ raised
        text = f"(its message cannot be shown: {type(inner).__name__})"
    return text if len(text) <= limit else text[: limit - 1] + "…"
