"""Streaming a reply over HTTP: POST a JSON request, read server-sent events back.

Both wire protocols share this: timeouts, retries (see :mod:`.retry`), the limits on one
reply, and turning every HTTP or network failure into a one-line ``ProviderError``. Those
messages are built here from the status, the API's error body and our own words, never from
an httpx exception's text or the request (which carries the key in its headers), and any
secret the server echoes back is redacted.

Limits on one reply, whatever the server does:

- ``read_timeout``: the longest silence, before or within the reply;
- ``turn_timeout``: the whole reply, retries included. A server that keeps the connection
  alive with an SSE comment every second is still cut off. Sync reads are woken at the
  deadline by a timer that shuts the socket down; async reads are awaited with
  ``asyncio.timeout``;
- ``max_reply_bytes``: the bytes read for the reply, counted as they arrive, so even one
  giant SSE line cannot hold more than that in memory (:class:`~._sse.SSEReader` splits
  lines itself and feeds them to httpx-sse's decoder; an error body is read up to 64 KiB).

Credentials in a base URL never reach httpx: the request goes to the bare URL and they are
sent as a Basic ``Authorization`` header set here (see :mod:`.endpoint`).

A protocol module supplies the request (:class:`SSECall`) and an :class:`Assembler` that turns
events into text deltas and a final ``Completion``; :class:`HTTPProvider` drives the two, sync
or async. Closing the stream early (``break``, an exception, ``KeyboardInterrupt``, task
cancellation) closes the HTTP response at once.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Generator, Iterator, Mapping
from contextlib import aclosing, closing, contextmanager, suppress
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol, TypeVar

import httpx
from httpx_sse import ServerSentEvent

from .._core.request import ChatRequest
from .._errors import (
    MalformedReply,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeout,
    RateLimited,
    StreamInterrupted,
)
from . import _pacing as pacing
from ._base import Completion, StreamEvent
from ._endpoint import Endpoint
from ._registry import REGISTRY, Registry
from ._retry import RetryPolicy, is_retryable, retry_after_seconds
from ._settings import ProviderSettings
from ._sse import SSEReader, error_detail, one_line

logger = logging.getLogger(__name__.rpartition(".")[0])  # "slotmagic.providers"

USER_AGENT = "slotmagic"
# The error types (OpenAI's "code") of a 429 that is the account's quota or credit, not a rate.
OUT_OF_QUOTA = frozenset({"insufficient_quota", "billing_hard_limit_reached", "billing_not_active"})
MAX_ERROR_BODY = 64 * 1024  # bytes of an error response read for its message
DEADLINE_SLACK = 0.05  # a timeout this close to the turn deadline was the deadline's


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


# -- the turn deadline -------------------------------------------------------------------------------


class Deadline:
    """When one reply must be complete (``turn_timeout``), or never."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds or None
        self._at = time.monotonic() + seconds if seconds else None

    def remaining(self) -> float | None:
        """Seconds left (0 once passed), or None without a deadline."""
        return None if self._at is None else max(0.0, self._at - time.monotonic())

    def passed(self, slack: float = 0.0) -> bool:
        return self._at is not None and time.monotonic() >= self._at - slack


class _Watchdog:
    """Shuts a sync response's socket down at the deadline, waking a read blocked in it.

    ``cancel`` returns only once the timer can no longer touch the socket, so a connection
    handed back to the pool is never shut behind its next user's back.
    """

    def __init__(self, deadline: Deadline, response: httpx.Response) -> None:
        self._response = response
        self._lock = threading.Lock()
        self._done = False
        self.fired = False
        remaining = deadline.remaining()
        self._timer = None if remaining is None else threading.Timer(remaining, self._fire)
        if self._timer is not None:
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.fired = True
            stream = self._response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if isinstance(sock, socket.socket):
                with suppress(OSError):  # closed already
                    sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        with self._lock:
            self._done = True
        if self._timer is not None:
            self._timer.cancel()


# -- the transport -----------------------------------------------------------------------------------

_T = TypeVar("_T")


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
            self._client = httpx.Client(timeout=self.timeout, verify=_tls_context())  # one TLS setup a process
        deadline = Deadline(self.settings.turn_timeout)
        attempt = 0
        while True:
            started = [False]  # set once the reply begins: later failures are interruptions
            with self._failures(call, started, deadline):
                request = self._request(self._client, call, deadline, started)
                response = self._client.send(request, stream=True)
                watchdog = _Watchdog(deadline, response)
                try:
                    if not response.is_error:
                        started[0] = True
                        _check_event_stream(call, response)
                        reader = SSEReader(self.settings.max_reply_bytes, call.label)
                        for data in response.iter_bytes():
                            if deadline.passed():
                                raise self._deadline_error(call, started)
                            yield from reader.feed(data)
                        yield from reader.close()
                        if watchdog.fired:  # the body "ended" because the socket was shut
                            raise self._deadline_error(call, started)
                        return
                    text = _error_text(response)
                finally:
                    watchdog.cancel()
                    response.close()
                failure, wait = self._after_error(call, response, text, attempt, deadline)
            if wait is None:
                raise failure
            time.sleep(wait)  # outside the block above: the failed response is closed by now
            attempt += 1

    async def aevents(self, call: SSECall) -> AsyncGenerator[ServerSentEvent, None]:
        # A client per call: an AsyncClient's connections belong to the event loop that made
        # them, and notebooks and tests run turns on different loops.
        deadline = Deadline(self.settings.turn_timeout)
        async with httpx.AsyncClient(timeout=self.timeout, verify=_tls_context()) as client:
            attempt = 0
            while True:
                started = [False]
                with self._failures(call, started, deadline):
                    await pacing.ready(call.label)  # a fan-out: this provider may be backing off
                    request = self._request(client, call, deadline, started)
                    response = await self._within(deadline, call, started, client.send(request, stream=True))
                    try:
                        if not response.is_error:
                            started[0] = True
                            _check_event_stream(call, response)
                            reader = SSEReader(self.settings.max_reply_bytes, call.label)
                            chunks = response.aiter_bytes()
                            try:
                                while (data := await self._within(deadline, call, started, _anext(chunks))) is not None:
                                    for event in reader.feed(data):
                                        yield event
                            finally:
                                await _aclose(chunks)
                            for event in reader.close():
                                yield event
                            return
                        text = await self._within(deadline, call, started, _aerror_text(response))
                    finally:
                        await response.aclose()
                    failure, wait = self._after_error(call, response, text, attempt, deadline)
                if wait is None:
                    raise failure
                await pacing.backoff(call.label, wait)
                attempt += 1

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- requests ------------------------------------------------------------------------------

    def _request(
        self, client: httpx.Client | httpx.AsyncClient, call: SSECall, deadline: Deadline, started: list[bool]
    ) -> httpx.Request:
        """The request for one attempt, with timeouts cut to what is left of the turn."""
        remaining = deadline.remaining()
        timeout = self.timeout
        if remaining is not None:
            if remaining <= 0:
                raise self._deadline_error(call, started)
            timeout = httpx.Timeout(
                connect=min(self.settings.connect_timeout, remaining),
                read=min(self.settings.read_timeout, remaining),
                write=min(self.settings.read_timeout, remaining),
                pool=min(self.settings.connect_timeout, remaining),
            )
        return client.build_request("POST", call.url, json=call.body, headers=self._headers(call), timeout=timeout)

    def _headers(self, call: SSECall) -> dict[str, str]:
        headers = {
            "user-agent": USER_AGENT,
            "accept": "text/event-stream",
            "accept-encoding": "identity",  # max_reply_bytes counts what is held, not compressed
            **call.headers,
        }
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

    async def _within(self, deadline: Deadline, call: SSECall, started: list[bool], awaitable: Awaitable[_T]) -> _T:
        """``await awaitable``, but no later than the deadline (async reads need no watchdog)."""
        remaining = deadline.remaining()
        if remaining is None:
            return await awaitable
        try:
            # Not wait_for: until 3.12 it swallows a cancellation that arrives as the read
            # completes, and a cancelled turn would go on streaming.
            async with asyncio.timeout(remaining):
                return await awaitable
        except TimeoutError:
            raise self._deadline_error(call, started) from None

    # -- failures ----------------------------------------------------------------------------

    def _deadline_error(self, call: SSECall, started: list[bool]) -> ProviderTimeout:
        where = "; the partial reply was discarded" if started[0] else ""
        return ProviderTimeout(
            f"{call.label}: no complete reply within {self.settings.turn_timeout:g} s (turn_timeout){where}; "
            f"raise turn_timeout for very long replies (0 turns the limit off)"
        )

    def _after_error(
        self, call: SSECall, response: httpx.Response, text: str, attempt: int, deadline: Deadline
    ) -> tuple[ProviderError, float | None]:
        """The error to raise for an error response, and how long to wait before retrying
        instead (None: do not retry)."""
        status = response.status_code
        retry_after = retry_after_seconds(response.headers)
        error_type, detail = error_detail(text, response.reason_phrase, call.endpoint.secrets)
        reason = self.policy.gives_up(status, attempt, retry_after)
        if status == 429 and error_type in OUT_OF_QUOTA:  # billing, not a rate: waiting does not help
            reason = "not retried: the account has no quota or credit left; check its plan and billing"
        wait = None if reason is not None else self.policy.delay(attempt, retry_after)
        remaining = deadline.remaining()
        if wait is not None and remaining is not None and wait >= remaining:
            reason = (
                f"not retried: waiting {wait:.1f} s would pass the turn_timeout of {self.settings.turn_timeout:g} s"
            )
            wait = None
        what = f"HTTP {status}" + (f" {error_type}" if error_type else "")
        verb = "failed" if status >= 500 else "refused the request"
        message = f"{call.label} {verb} ({what}): {detail}"
        if reason is not None and is_retryable(status):  # say why retrying stopped
            message += f"; {reason}"
        cls = RateLimited if status == 429 else ProviderHTTPError
        failure = cls(message, status=status, error_type=error_type)
        if wait is not None:
            logger.info(
                "%s: %s, retry %d of %d in %.2f s", call.label, what, attempt + 1, self.policy.max_retries, wait
            )
        return failure, wait

    @contextmanager
    def _failures(self, call: SSECall, started: list[bool], deadline: Deadline) -> Iterator[None]:
        """Turn httpx's exceptions into ours; ``started`` says whether the reply had begun."""
        label = call.label
        try:
            yield
        except httpx.HTTPError as exc:
            # Timeouts are cut to the turn's deadline, and the sync watchdog ends a read at it
            # by shutting the socket: at the deadline, any failure is the deadline's.
            if deadline.passed(DEADLINE_SLACK):
                raise self._deadline_error(call, started) from None
            raise self._failure(exc, label, call, started) from None

    def _failure(self, exc: httpx.HTTPError, label: str, call: SSECall, started: list[bool]) -> ProviderError:
        if isinstance(exc, httpx.ConnectTimeout):
            return ProviderTimeout(
                f"{label}: no connection within {self.settings.connect_timeout:g} s "
                f"(connect_timeout); is the server up and reachable?"
            )
        if isinstance(exc, httpx.ReadTimeout):
            where = "in the middle of the reply" if started[0] else "waiting for the reply to start"
            return ProviderTimeout(
                f"{label}: no data for {self.settings.read_timeout:g} s {where} (read_timeout); "
                f"raise read_timeout for slow models"
            )
        if isinstance(exc, httpx.TimeoutException):
            return ProviderTimeout(f"{label}: timed out sending the request")
        if isinstance(exc, httpx.ConnectError):
            return ProviderConnectionError(
                f"{label}: cannot connect to {call.endpoint.display_url}; is the server running and the URL right?"
            )
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
            if started[0]:
                return StreamInterrupted(
                    f"{label}: the connection dropped before the reply was complete; the partial reply was discarded"
                )
            return ProviderConnectionError(f"{label}: the server closed the connection without answering")
        # Only the class name: an httpx message may quote the request.
        return ProviderConnectionError(f"{label}: the request failed ({type(exc).__name__})")


@cache
def _tls_context() -> ssl.SSLContext:
    """The TLS settings httpx makes for each client by default, made once: building them
    costs ~50 ms, and an async turn makes a client per call (a fan-out, one per column, on its
    one event loop, where it would hold up the others)."""
    return httpx.create_ssl_context()


async def _anext(chunks: AsyncIterator[bytes]) -> bytes | None:
    try:
        return await chunks.__anext__()
    except StopAsyncIteration:
        return None


async def _aclose(chunks: AsyncIterator[bytes]) -> None:
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        await aclose()


def _check_event_stream(call: SSECall, response: httpx.Response) -> None:
    content_type = response.headers.get("content-type", "").partition(";")[0].strip()
    if content_type != "text/event-stream":
        shown = one_line(content_type, call.endpoint.secrets)  # a server's words: redacted like its body
        raise MalformedReply(
            f"{call.label} answered HTTP {response.status_code} with {shown or 'no content type'}, "
            f"not an event stream; check the base URL"
        )


def _error_text(response: httpx.Response) -> str:
    """An error response's body as text, read up to ``MAX_ERROR_BODY`` bytes."""
    body = bytearray()
    for data in response.iter_bytes():
        body += data[: MAX_ERROR_BODY - len(body)]
        if len(body) >= MAX_ERROR_BODY:
            break
    return bytes(body).decode(response.encoding or "utf-8", "replace")


async def _aerror_text(response: httpx.Response) -> str:
    body = bytearray()
    chunks = response.aiter_bytes()
    try:
        async for data in chunks:
            body += data[: MAX_ERROR_BODY - len(body)]
            if len(body) >= MAX_ERROR_BODY:
                break
    finally:
        await _aclose(chunks)
    return bytes(body).decode(response.encoding or "utf-8", "replace")
