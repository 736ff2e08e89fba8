"""A real HTTP server on 127.0.0.1 that answers each request with scripted wire bytes.

Each request takes the next script from the queue: a list of steps, each raw ``bytes`` to send,
a ``Pause``, an ``Until`` (wait for an event, not a time), a ``Repeat`` (one HTTP chunk sent
many times, so a 50 MB body costs the server no memory), ``DROP`` (close the socket without
finishing the response) or ``HOLD`` (wait until the client closes the connection, and record
when). A send that fails because the client hung up
sets ``send_failed``. ``most_in_flight`` is the most requests ever answered at once (one counts
from when it is read until its response's last step). Responses are sent with chunked
transfer encoding, one HTTP chunk per piece, so a test decides exactly where the client's
reads are split: inside an SSE line, a JSON object or a multi-byte UTF-8 character.

The builders below produce the wire formats of OpenAI chat completions and Anthropic
Messages streams, with shapes as their API references publish them.
"""

from __future__ import annotations

import itertools
import json
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .wire_rules import check

Step = Any  # bytes | Pause | Until | Repeat | DROP | HOLD


@dataclass(frozen=True)
class Pause:
    seconds: float


@dataclass(frozen=True)
class Until:
    """Hold the response until ``ready()`` is true (asked every 10 ms), at most ``timeout``
    seconds: a test waits for what it needs to have happened, however busy the machine."""

    ready: Callable[[], bool]
    timeout: float = 60.0


@dataclass(frozen=True)
class Repeat:
    """``data`` sent ``times`` times as HTTP chunks, with ``pause`` seconds between them."""

    data: bytes
    times: int
    pause: float = 0.0


DROP = object()
HOLD = object()


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)  # when it was read

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class WireServer:
    requests: list[Request] = field(default_factory=list)
    api_requests: list[Request] = field(default_factory=list)  # /api/... and GETs (a window asked)
    # the wire rules each request body broke (tests/providers/wire_rules.py); the ``wire``
    # fixture fails a test that leaves any here, unless it sent a broken body on purpose
    violations: list[tuple[str, list[str]]] = field(default_factory=list)
    closed_at: list[float] = field(default_factory=list)  # when a HOLD saw the client close
    in_flight: int = 0  # requests read whose response's last step has not begun
    most_in_flight: int = 0  # the most there ever were at once

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._scripts: queue.Queue[list[Step]] = queue.Queue()
        self._routes: dict[bytes, queue.Queue[list[Step]]] = {}
        self._api: dict[str, queue.Queue[list[Step]]] = {}
        self._stop = threading.Event()
        self.client_closed = threading.Event()
        self.send_failed = threading.Event()  # the client hung up while a response was being sent
        self._threads: list[threading.Thread] = []
        self._counting = threading.Lock()
        self._accepting = threading.Thread(target=self._serve, daemon=True)
        self._accepting.start()

    def script(self, *responses: Sequence[Step]) -> None:
        """Queue one response (a list of steps) per coming request, in order."""
        for steps in responses:
            self._scripts.put(list(steps))

    def route(self, marker: str, *responses: Sequence[Step]) -> None:
        """Queue responses for the requests whose body holds ``marker`` (concurrent requests
        arrive in any order: a test tells them apart by what they carry), ahead of ``script``."""
        found = self._routes.setdefault(marker.encode(), queue.Queue())
        for steps in responses:
            found.put(list(steps))

    def ollama_api(self, path: str, *responses: Sequence[Step]) -> None:
        """Queue responses for Ollama's own API (``/api/ps``, ``/api/show``), which the model
        window asks; unscripted, those answer 404 like a server that is not Ollama."""
        found = self._api.setdefault(path, queue.Queue())
        for steps in responses:
            found.put(list(steps))

    def served(self, path: str, *responses: Sequence[Step]) -> None:
        """Queue responses for a GET the model window asks (vLLM's ``/v1/models``, llama.cpp's
        ``/props``); unscripted, those answer 404 like a server that does not say."""
        self.ollama_api(path, *responses)

    def pending(self) -> int:
        """How many scripted responses no request has taken yet."""
        return self._scripts.qsize()

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        for thread in self._threads:
            thread.join(timeout=2)

    # -- serving -------------------------------------------------------------------------

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.settimeout(5)
            try:
                request = self._read_request(conn)
            except OSError:
                return
            if request is None:
                return
            if request.path.startswith("/api/") or request.method == "GET":  # a server asked what it serves
                self.api_requests.append(request)
                try:
                    steps = self._api.get(request.path, queue.Queue()).get_nowait()
                except queue.Empty:
                    steps = json_response(404, {"error": "404 page not found"})
                for step in steps:
                    conn.sendall(step)
                return
            self.requests.append(request)
            with self._counting:
                self.in_flight += 1
                self.most_in_flight = max(self.most_in_flight, self.in_flight)
            try:
                broken = check(request.path, request.json())
            except ValueError:
                broken = ["the body is not JSON"]
            if broken:
                self.violations.append((request.path, broken))
            routed = next((q for marker, q in self._routes.items() if marker in request.body and not q.empty()), None)
            try:
                steps = (routed or self._scripts).get_nowait()
            except queue.Empty:
                steps = json_response(599, {"error": {"message": "the test scripted no response"}})
            answered = False
            try:
                for index, step in enumerate(steps):
                    if index == len(steps) - 1:  # the client may ask again once it has this
                        answered = self._answered()
                    if isinstance(step, bytes):
                        conn.sendall(step)
                    elif isinstance(step, Pause):
                        if self._stop.wait(step.seconds):
                            return
                    elif isinstance(step, Until):
                        deadline = time.monotonic() + step.timeout
                        while not step.ready() and time.monotonic() < deadline:
                            if self._stop.wait(0.01):
                                return
                    elif isinstance(step, Repeat):
                        framed = chunk(step.data)
                        for _ in range(step.times):
                            conn.sendall(framed)
                            if step.pause and self._stop.wait(step.pause):
                                return
                    elif step is DROP:
                        conn.shutdown(socket.SHUT_RDWR)
                        return
                    elif step is HOLD:
                        self._hold(conn)
                        return
            except OSError:
                self.send_failed.set()
                return  # the client went away; that is some tests' point
            finally:
                if not answered:
                    self._answered()

    def _answered(self) -> bool:
        with self._counting:
            self.in_flight -= 1
        return True

    def _hold(self, conn: socket.socket) -> None:
        conn.settimeout(0.05)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not self._stop.is_set():
            try:
                data = conn.recv(1024)
            except TimeoutError:
                continue
            except OSError:
                data = b""
            if not data:
                self.closed_at.append(time.monotonic())
                self.client_closed.set()
                return

    def _read_request(self, conn: socket.socket) -> Request | None:
        data = b""
        while b"\r\n\r\n" not in data:
            piece = conn.recv(65536)
            if not piece:
                return None
            data += piece
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", 0))
        while len(body) < length:
            piece = conn.recv(65536)
            if not piece:
                break
            body += piece
        return Request(method, path, headers, body)


# -- HTTP framing ------------------------------------------------------------------------------


def head(
    status: int = 200,
    headers: dict[str, str] | None = None,
    *,
    chunked: bool = True,
    content_type: str = "text/event-stream",
) -> bytes:
    all_headers = {"content-type": content_type, "connection": "close", **(headers or {})}
    if chunked:
        all_headers["transfer-encoding"] = "chunked"
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"]
    lines += [f"{k}: {v}" for k, v in all_headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


END = b"0\r\n\r\n"  # the last chunk: the body is complete

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
    529: "Overloaded",
}


def split_bytes(data: bytes, split: int | Sequence[int] | None) -> list[bytes]:
    """``data`` cut every ``split`` bytes, or at the given offsets."""
    if split is None:
        return [data]
    if isinstance(split, int):
        return [data[i : i + split] for i in range(0, len(data), split)]
    cuts = [0, *sorted(split), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(cuts) if b > a]


def sse_response(
    events: Iterable[str],
    *,
    split: int | Sequence[int] | None = None,
    status: int = 200,
    headers: dict[str, str] | None = None,
    finish: bool = True,
    then: Sequence[Step] = (),
) -> list[Step]:
    """A streamed response. With ``split`` None each event is its own HTTP chunk; else the
    whole body is cut as :func:`split_bytes` says. ``finish=False`` leaves the body open
    for the steps in ``then`` (``DROP``, ``HOLD``, a ``Pause`` ...)."""
    events = list(events)
    pieces = [e.encode() for e in events] if split is None else split_bytes("".join(events).encode(), split)
    steps: list[Step] = [head(status, headers)] + [chunk(p) for p in pieces]
    if finish:
        steps.append(END)
    return steps + list(then)


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> list[Step]:
    data = json.dumps(body).encode()
    return [
        head(
            status,
            {"content-length": str(len(data)), **(headers or {})},
            chunked=False,
            content_type="application/json",
        )
        + data
    ]


# -- OpenAI chat completions stream --------------------------------------------------------------


def oa_chunk(
    delta: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    *,
    usage: dict[str, Any] | None = None,
    choices: bool = True,
    model: str = "gpt-4o-mini-2024-07-18",
) -> str:
    body: dict[str, Any] = {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion.chunk",
        "created": 1741569952,
        "model": model,
        "system_fingerprint": "fp_06737a9306",
        "choices": [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish_reason}]
        if choices
        else [],
    }
    if usage is not None or not choices:
        body["usage"] = usage
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def oa_usage(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


OA_DONE = "data: [DONE]\n\n"


def oa_text_stream(
    *pieces: str, usage: tuple[int, int, int] = (12, 5, 0), done: bool = True, finish_reason: str = "stop"
) -> list[str]:
    events = [oa_chunk({"role": "assistant", "content": "", "refusal": None})]
    events += [oa_chunk({"content": p}) for p in pieces]
    events.append(oa_chunk({}, finish_reason))
    events.append(oa_chunk(choices=False, usage=oa_usage(*usage)))
    if done:
        events.append(OA_DONE)
    return events


def oa_paced_text_stream(*pieces: str, pause: float) -> list[Step]:
    """An OpenAI text stream whose pieces arrive ``pause`` s apart, as a slow model sends them
    (steps: the head, the role chunk, each piece after its pause, the rest)."""
    steps = sse_response(oa_text_stream(*pieces))
    paced = [x for piece in steps[2 : 2 + len(pieces)] for x in (Pause(pause), piece)]
    return steps[:2] + paced + steps[2 + len(pieces) :]


def oa_tool_stream(calls: Sequence[tuple[str, str, Sequence[str]]], text: str = "") -> list[str]:
    """Tool calls streamed as OpenAI does: id, type and name first, then argument pieces."""
    events = [oa_chunk({"role": "assistant", "content": text or None, "refusal": None})]
    for index, (call_id, name, arg_pieces) in enumerate(calls):
        events.append(
            oa_chunk(
                {
                    "tool_calls": [
                        {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
                    ]
                }
            )
        )
        events += [oa_chunk({"tool_calls": [{"index": index, "function": {"arguments": a}}]}) for a in arg_pieces]
    events.append(oa_chunk({}, "tool_calls"))
    events.append(oa_chunk(choices=False, usage=oa_usage(80, 20)))
    events.append(OA_DONE)
    return events


# -- Anthropic Messages stream ---------------------------------------------------------------------


def an_event(kind: str, **fields: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields}, ensure_ascii=False)}\n\n"


def an_start(
    input_tokens: int = 25, cache_read: int = 0, cache_creation: int = 0, model: str = "claude-sonnet-4-5-20250929"
) -> str:
    return an_event(
        "message_start",
        message={
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": model,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "cache_creation_input_tokens": cache_creation,
                "cache_read_input_tokens": cache_read,
                "output_tokens": 1,
            },
        },
    )


def an_stop(stop_reason: str = "end_turn", output_tokens: int = 15) -> list[str]:
    return [
        an_event(
            "message_delta",
            delta={"stop_reason": stop_reason, "stop_sequence": None},
            usage={"output_tokens": output_tokens},
        ),
        an_event("message_stop"),
    ]


def an_text_block(index: int, *pieces: str) -> list[str]:
    return (
        [an_event("content_block_start", index=index, content_block={"type": "text", "text": ""})]
        + [an_event("content_block_delta", index=index, delta={"type": "text_delta", "text": p}) for p in pieces]
        + [an_event("content_block_stop", index=index)]
    )


def an_tool_block(index: int, call_id: str, name: str, *json_pieces: str) -> list[str]:
    return (
        [
            an_event(
                "content_block_start",
                index=index,
                content_block={"type": "tool_use", "id": call_id, "name": name, "input": {}},
            )
        ]
        + [
            an_event("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": p})
            for p in json_pieces
        ]
        + [an_event("content_block_stop", index=index)]
    )


def an_text_stream(
    *pieces: str, input_tokens: int = 25, output_tokens: int = 15, cache_read: int = 0, stop: bool = True
) -> list[str]:
    events = [an_start(input_tokens, cache_read), an_event("ping"), *an_text_block(0, *pieces)]
    if stop:
        events += an_stop("end_turn", output_tokens)
    return events


def padded(event: str) -> str:
    """``event`` with spaces before its data's last brace, as Anthropic's real streams often
    have them (``{"type":"content_block_stop","index":0    }``)."""
    head, sep, tail = event.rpartition("}")
    return f"{head}{' ' * 13}{sep}{tail}"


def an_thinking_block(index: int, *pieces: str, signature: str) -> list[str]:
    """A ``thinking`` block as the API streams it: started with empty ``thinking`` and
    ``signature``, then ``thinking_delta`` pieces, then one ``signature_delta``."""
    return (
        [
            padded(
                an_event(
                    "content_block_start",
                    index=index,
                    content_block={"type": "thinking", "thinking": "", "signature": ""},
                )
            )
        ]
        + [
            padded(an_event("content_block_delta", index=index, delta={"type": "thinking_delta", "thinking": p}))
            for p in pieces
        ]
        + [
            an_event("content_block_delta", index=index, delta={"type": "signature_delta", "signature": signature}),
            padded(an_event("content_block_stop", index=index)),
        ]
    )


def an_redacted_block(index: int, data: str) -> list[str]:
    """A ``redacted_thinking`` block: its opaque ``data`` whole in the start event, no deltas."""
    return [
        an_event("content_block_start", index=index, content_block={"type": "redacted_thinking", "data": data}),
        an_event("content_block_stop", index=index),
    ]
