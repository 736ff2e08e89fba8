"""Streaming a reply over HTTP: POST a JSON request, read server-sent events back.

Both wire protocols share this: timeouts, retries (see :mod:`.retry`), and turning every
HTTP or network failure into a one-line ``ProviderError``. Those messages are built here from
the status, the API's error body and our own words, never from an httpx exception's text or
the request (which carries the key in its headers), and any key the server echoes back is
redacted.

A protocol module supplies the request (:class:`SSECall`) and an :class:`Assembler` that turns
events into text deltas and a final ``Completion``; :class:`HTTPProvider` drives the two, sync
or async. Closing the stream early (``break``, an exception, ``KeyboardInterrupt``, task
cancellation) closes the HTTP response at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator, Mapping
from contextlib import aclosing, closing, contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from httpx_sse import EventSource, ServerSentEvent

from ..errors import (
    MalformedReply,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeout,
    RateLimited,
    StreamInterrupted,
)
from .base import ChatRequest, Completion, StreamEvent
from .endpoint import Endpoint
from .registry import REGISTRY, Registry
from .retry import RetryPolicy, is_retryable, retry_after_seconds
from .settings import ProviderSettings

logger = logging.getLogger(__name__.rpartition(".")[0])  # "slotmagic.providers"

USER_AGENT = "slotmagic"
MAX_DETAIL = 300  # characters of a server's error text worth showing in one line


@dataclass(frozen=True)
class SSECall:
    """One streaming request. ``headers`` holds the key; it is never shown or logged."""

    endpoint: Endpoint
    path: str  # appended to the endpoint's base URL
    body: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def url(self) -> str:
        return self.endpoint.base_url + self.path

    @property
    def label(self) -> str:
        """How errors name the server: ``openai (api.openai.com)``."""
        return f"{self.endpoint.provider} ({self.endpoint.host})"


class Assembler(Protocol):
    """Builds one reply from its events; ``done`` once the protocol's final event arrived."""

    done: bool

    def feed(self, event: ServerSentEvent) -> list[StreamEvent]: ...

    def finish(self) -> Completion:
        """The assembled reply, or ``StreamInterrupted`` if the final event never came."""


class HTTPProvider:
    """A provider that streams replies over HTTP; subclasses say what to send and how to read it."""

    name: str

    def __init__(
        self, settings: ProviderSettings | None = None, *, name: str | None = None, registry: Registry | None = None
    ) -> None:
        if name is not None:
            self.name = name
        self.settings = settings or ProviderSettings()
        self.registry = registry or REGISTRY  # where the endpoint rule of ``name`` is registered
        self._transport = SSETransport(self.settings)

    def endpoint(self) -> Endpoint:
        """Where this provider's next request goes, from the settings and the environment now."""
        return self.registry.endpoint(self.settings, self.name)

    def call(self, request: ChatRequest) -> SSECall:
        raise NotImplementedError

    def assembler(self, call: SSECall) -> Assembler:
        raise NotImplementedError

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        call = self.call(request)
        assembler = self.assembler(call)
        with closing(self._transport.events(call)) as events:
            for event in events:
                yield from assembler.feed(event)
                if assembler.done:
                    break
        yield assembler.finish()  # only now, with the response closed

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        call = self.call(request)
        assembler = self.assembler(call)
        async with aclosing(self._transport.aevents(call)) as events:
            async for event in events:
                for item in assembler.feed(event):
                    yield item
                if assembler.done:
                    break
        yield assembler.finish()

    def close(self) -> None:
        self._transport.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class SSETransport:
    """Sends :class:`SSECall`\\ s and yields their server-sent events, retrying when it may."""

    def __init__(self, settings: ProviderSettings) -> None:
        self.settings = settings
        self.policy = RetryPolicy(max_retries=settings.max_retries, base=settings.backoff_base)
        self.timeout = httpx.Timeout(
            connect=settings.connect_timeout,
            read=settings.read_timeout,
            write=settings.read_timeout,
            pool=settings.connect_timeout,
        )
        self._client: httpx.Client | None = None  # kept for connection reuse between turns
        self._warned: set[str] = set()

    def events(self, call: SSECall) -> Generator[ServerSentEvent, None, None]:
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout)
        attempt = 0
        while True:
            started = [False]  # set once the reply begins: later failures are interruptions
            with (
                self._failures(call, started),
                self._client.stream("POST", call.url, json=call.body, headers=self._headers(call)) as response,
            ):
                if not response.is_error:
                    started[0] = True
                    yield from _event_source(call, response).iter_sse()
                    return
                response.read()
                failure, wait = self._after_error(call, response, attempt)
            if wait is None:
                raise failure
            time.sleep(wait)  # outside the block above: the failed response is closed by now
            attempt += 1

    async def aevents(self, call: SSECall) -> AsyncGenerator[ServerSentEvent, None]:
        # A client per call: an AsyncClient's connections belong to the event loop that made
        # them, and notebooks and tests run turns on different loops.
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            attempt = 0
            while True:
                started = [False]
                with self._failures(call, started):
                    async with client.stream("POST", call.url, json=call.body, headers=self._headers(call)) as response:
                        if not response.is_error:
                            started[0] = True
                            async with aclosing(_event_source(call, response).aiter_sse()) as events:
                                async for event in events:
                                    yield event
                            return
                        await response.aread()
                        failure, wait = self._after_error(call, response, attempt)
                if wait is None:
                    raise failure
                await asyncio.sleep(wait)
                attempt += 1

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _headers(self, call: SSECall) -> dict[str, str]:
        headers = {"user-agent": USER_AGENT, "accept": "text/event-stream", **call.headers}
        basic = call.endpoint.basic_auth
        if basic is not None:
            if "authorization" in {name.lower() for name in call.headers}:
                self._warn_once(
                    call,
                    f"{call.label}: the base URL carries credentials and an API key is set; both would be the "
                    f"Authorization header, so the URL's credentials are sent (HTTP Basic) and the key is not",
                )
                headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
            headers["authorization"] = basic
        return headers

    def _warn_once(self, call: SSECall, message: str) -> None:
        if call.url not in self._warned:
            self._warned.add(call.url)
            logger.warning("%s", message)

    # -- failures ----------------------------------------------------------------------------

    def _after_error(self, call: SSECall, response: httpx.Response, attempt: int) -> tuple[ProviderError, float | None]:
        """The error to raise for an error response, and how long to wait before retrying
        instead (None: do not retry)."""
        status = response.status_code
        retry_after = retry_after_seconds(response.headers)
        error_type, detail = _error_detail(response, call.endpoint.secrets)
        reason = self.policy.gives_up(status, attempt, retry_after)
        what = f"HTTP {status}" + (f" {error_type}" if error_type else "")
        verb = "failed" if status >= 500 else "refused the request"
        message = f"{call.label} {verb} ({what}): {detail}"
        if reason is not None and is_retryable(status):  # say why retrying stopped
            message += f"; {reason}"
        cls = RateLimited if status == 429 else ProviderHTTPError
        failure = cls(message, status=status, error_type=error_type)
        if reason is not None:
            return failure, None
        wait = self.policy.delay(attempt, retry_after)
        logger.info("%s: %s, retry %d of %d in %.2f s", call.label, what, attempt + 1, self.policy.max_retries, wait)
        return failure, wait

    @contextmanager
    def _failures(self, call: SSECall, started: list[bool]) -> Iterator[None]:
        """Turn httpx's exceptions into ours; ``started`` says whether the reply had begun."""
        label = call.label
        try:
            yield
        except httpx.ConnectTimeout:
            raise ProviderTimeout(
                f"{label}: no connection within {self.settings.connect_timeout:g} s "
                f"(connect_timeout); is the server up and reachable?"
            ) from None
        except httpx.ReadTimeout:
            where = "in the middle of the reply" if started[0] else "waiting for the reply to start"
            raise ProviderTimeout(
                f"{label}: no data for {self.settings.read_timeout:g} s {where} (read_timeout); "
                f"raise read_timeout for slow models"
            ) from None
        except httpx.TimeoutException:
            raise ProviderTimeout(f"{label}: timed out sending the request") from None
        except httpx.ConnectError:
            raise ProviderConnectionError(
                f"{label}: cannot connect to {call.endpoint.display_url}; is the server running and the URL right?"
            ) from None
        except (httpx.RemoteProtocolError, httpx.ReadError):
            if started[0]:
                raise StreamInterrupted(
                    f"{label}: the connection dropped before the reply was complete; the partial reply was discarded"
                ) from None
            raise ProviderConnectionError(f"{label}: the server closed the connection without answering") from None
        except httpx.HTTPError as exc:
            # Only the class name: an httpx message may quote the request.
            raise ProviderConnectionError(f"{label}: the request failed ({type(exc).__name__})") from None


def _event_source(call: SSECall, response: httpx.Response) -> EventSource:
    content_type = response.headers.get("content-type", "").partition(";")[0].strip()
    if content_type != "text/event-stream":
        raise MalformedReply(
            f"{call.label} answered HTTP {response.status_code} with {content_type or 'no content type'}, "
            f"not an event stream; check the base URL"
        )
    return EventSource(response)


def _error_detail(response: httpx.Response, secrets: tuple[str, ...]) -> tuple[str | None, str]:
    """(the API's error type, its message) from an error response, as safe one-line text.

    Understands OpenAI's ``{"error": {"message", "type", "code"}}``, Anthropic's
    ``{"type": "error", "error": {"type", "message"}}`` and Ollama's ``{"error": "..."}``.
    """
    text = response.text
    error_type: str | None = None
    detail = text
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            # OpenAI's "code" (invalid_api_key) says more than its "type" (invalid_request_error)
            code = error.get("code")
            error_type = code if isinstance(code, str) else error.get("type")
            detail = str(error.get("message") or error.get("detail") or text)
        elif isinstance(error, str):
            detail = error
    if not isinstance(error_type, str):
        error_type = None
    return error_type, one_line(detail, secrets) or response.reason_phrase or "no details"


def stream_error(label: str, error: Any, secrets: tuple[str, ...]) -> ProviderHTTPError:
    """An error event inside a reply stream (both APIs send ``{"error": {"type", "message"}}``)."""
    error_type = error.get("type") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return ProviderHTTPError(
        f"{label} reported an error in the middle of the reply"
        f"{f' ({error_type})' if isinstance(error_type, str) else ''}: "
        f"{one_line(str(message), secrets) or 'no details'}; the partial reply was discarded",
        error_type=error_type if isinstance(error_type, str) else None,
    )


def parse_event_json(label: str, event: ServerSentEvent) -> Any:
    try:
        return json.loads(event.data)
    except ValueError as exc:
        raise MalformedReply(
            f"{label}: an event in the reply is not valid JSON ({exc}); the partial reply was discarded"
        ) from None


def one_line(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` on one line, at most ``MAX_DETAIL`` characters, with every secret redacted."""
    text = re.sub(r"\s+", " ", text[: 4 * MAX_DETAIL]).strip()
    for secret in secrets:
        text = redact(text, secret)
    if len(text) > MAX_DETAIL:
        text = text[: MAX_DETAIL - 1].rstrip() + "…"
    return text


REDACT_WINDOW = 12  # a run this long of a key's characters counts as (part of) the key


def redact(text: str, secret: str) -> str:
    """``text`` with ``secret`` replaced, and every word holding a long piece of it too (a
    server that echoes part of a key, or text cut in the middle of one)."""
    if not secret:
        return text
    text = text.replace(secret, "[redacted]")
    if len(secret) < REDACT_WINDOW:
        return text
    pieces = {secret[i : i + REDACT_WINDOW] for i in range(len(secret) - REDACT_WINDOW + 1)}
    return re.sub(r"\S+", lambda m: "[redacted]" if any(p in m[0] for p in pieces) else m[0], text)
