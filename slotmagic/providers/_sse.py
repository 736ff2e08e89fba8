"""What a reply's bytes say: its server-sent events, read within the reply's byte budget; an
event's JSON; an error event; and a server's error text as one safe line.

The transport (:mod:`._transport`) hands this module the bytes it receives and raises what it
returns; nothing here touches the network.
"""

from __future__ import annotations

import json
import re
from typing import Any

from httpx_sse import ServerSentEvent
from httpx_sse._decoders import SSEDecoder  # fed by SSEReader, which bounds what it buffers

from .._core.secrets import redact_all
from .._errors import MalformedReply, ProviderHTTPError, ReplyTooLarge
from ._error_page import html_page

MAX_DETAIL = 300  # characters of a server's error text worth showing in one line

_LINE_END = re.compile(rb"[\r\n]")


class SSEReader:
    """Server-sent events from a reply's bytes, holding at most ``limit`` bytes of it.

    Lines end at CRLF, LF or CR (the SSE rule); each complete line goes to httpx-sse's
    ``SSEDecoder``. Bytes are counted as they arrive, so a reply, or one line of it, longer
    than ``limit`` raises ``ReplyTooLarge`` once ``limit`` is passed, never later.
    """

    def __init__(self, limit: int, label: str) -> None:
        self.limit = limit
        self.label = label
        self.total = 0
        self._buffer = bytearray()
        self._scan = 0  # where to look for the next line end
        self._decoder = SSEDecoder()

    def feed(self, data: bytes) -> list[ServerSentEvent]:
        self.total += len(data)
        if self.total > self.limit:
            self._buffer = bytearray()
            raise ReplyTooLarge(
                f"{self.label}: the reply passed max_reply_bytes ({_size(self.limit)}) before it was complete; "
                f"the connection was closed and the partial reply discarded (raise max_reply_bytes for longer replies)"
            )
        self._buffer += data
        return self._events(final=False)

    def close(self) -> list[ServerSentEvent]:
        """The events still held at the end of the body (an unterminated last line counts)."""
        events = self._events(final=True)
        if self._buffer:
            event = self._decoder.decode(self._buffer.decode("utf-8", "replace"))
            self._buffer.clear()
            if event is not None:
                events.append(event)
        return events

    def _events(self, *, final: bool) -> list[ServerSentEvent]:
        buffer = self._buffer
        events: list[ServerSentEvent] = []
        start = 0
        while True:
            match = _LINE_END.search(buffer, self._scan)
            if match is None:
                break
            at = match.start()
            if buffer[at] == 0x0D:  # CR: a CRLF may be split across reads
                if at + 1 == len(buffer) and not final:
                    break
                end = at + 2 if at + 1 < len(buffer) and buffer[at + 1] == 0x0A else at + 1
            else:
                end = at + 1
            event = self._decoder.decode(buffer[start:at].decode("utf-8", "replace"))
            if event is not None:
                events.append(event)
            start = self._scan = end
        del buffer[:start]
        self._scan = len(buffer) - 1 if buffer.endswith(b"\r") else len(buffer)
        return events


def _size(n: int) -> str:
    if n >= 1024 * 1024 and n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


def error_detail(text: str, reason_phrase: str, secrets: tuple[str, ...]) -> tuple[str | None, str]:
    """(the API's error type, its message) from an error response's body, as safe one-line text.

    Understands OpenAI's ``{"error": {"message", "type", "code"}}``, Anthropic's
    ``{"type": "error", "error": {"type", "message"}}`` and Ollama's ``{"error": "..."}``.
    """
    error_type: str | None = None
    detail = text
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        body = None
        page = html_page(text)
        if page is not None:  # a proxy's or gateway's error page: what it is called, not its markup
            detail = f"an error page: {page}" if page else "an error page"
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            # OpenAI's "code" (invalid_api_key) says more than its "type" (invalid_request_error)
            code = error.get("code")
            error_type = code if isinstance(code, str) else error.get("type")
            detail = str(error.get("message") or error.get("detail") or text)
        elif isinstance(error, str):
            detail = error
    error_type = one_line(error_type, secrets) if isinstance(error_type, str) else None
    return error_type, one_line(detail, secrets) or one_line(reason_phrase, secrets) or "no details"


def stream_error(label: str, error: Any, secrets: tuple[str, ...]) -> ProviderHTTPError:
    """An error event inside a reply stream (both APIs send ``{"error": {"type", "message"}}``)."""
    error_type = error.get("type") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    error_type = one_line(error_type, secrets) if isinstance(error_type, str) else None
    return ProviderHTTPError(
        f"{label} reported an error in the middle of the reply"
        f"{f' ({error_type})' if error_type else ''}: "
        f"{one_line(str(message), secrets) or 'no details'}; the partial reply was discarded",
        error_type=error_type,
    )


def parse_event_json(label: str, event: ServerSentEvent) -> Any:
    try:
        return json.loads(event.data)
    except ValueError as exc:
        raise MalformedReply(
            f"{label}: an event in the reply is not valid JSON ({exc}); the partial reply was discarded"
        ) from None
    except RecursionError:
        raise MalformedReply(
            f"{label}: an event in the reply nests JSON deeper than can be read; the partial reply was discarded"
        ) from None


def one_line(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` on one line, at most ``MAX_DETAIL`` characters, with every secret redacted (the
    request's, and the environment's: a server may echo another key it was sent)."""
    text = redact_all(re.sub(r"\s+", " ", text[: 4 * MAX_DETAIL]).strip(), secrets)
    if len(text) > MAX_DETAIL:
        text = text[: MAX_DETAIL - 1].rstrip() + "…"
    return text
