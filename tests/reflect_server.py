"""A real OpenAI-compatible server on 127.0.0.1 whose replies say what it was sent.

Each reply to ``POST /v1/chat/completions`` is streamed as server-sent events, after an
optional delay, and reads ``seen N: LAST`` where N is how many messages the request held and
LAST the last user message. So a test can check, from the stored reply alone, that a turn was
stored on exactly the history its request was made from. The model is the edge of the world
here; everything on slotmagic's side (HTTP, SSE parsing, the store) is real.

    with ReflectServer(delay=0.05) as server:
        session = Session.open(..., model="openai:reflect", settings=server.settings())
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from providers.wire_rules import check

from slotmagic.providers import ProviderSettings


def reflection(messages: list[dict[str, Any]]) -> str:
    last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    return f"seen {len(messages)}: {last_user}"


def parse_reflection(text: str) -> tuple[int, str]:
    count, _, last = text.partition(": ")
    return int(count.removeprefix("seen ")), last


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-reply (killed, cancelled) is expected, not an error."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, BrokenPipeError)):
            super().handle_error(request, client_address)


class ReflectServer:
    """``chunks`` > 1 sends the reply's text in that many events, ``chunk_delay`` apart, so a
    client can be stopped in the middle of a stream."""

    def __init__(self, delay: float = 0.0, jitter: float = 0.0, chunks: int = 1, chunk_delay: float = 0.0) -> None:
        self.delay, self.jitter = delay, jitter
        self.chunks, self.chunk_delay = chunks, chunk_delay
        self.requests = 0
        self.bodies: list[dict[str, Any]] = []  # every request body received, in order
        self.raw_bodies: list[bytes] = []  # the same, as the bytes that came over the wire
        self.violations: list[list[str]] = []  # the wire rules (providers/wire_rules.py) a body broke
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                body = json.loads(raw)
                with server._lock:
                    server.requests += 1
                    server.bodies.append(body)
                    server.raw_bodies.append(raw)
                    broken = check(self.path, body)
                    if broken:
                        server.violations.append(broken)
                time.sleep(server.delay + random.uniform(0, server.jitter))
                text = reflection(body["messages"])
                size = -(-len(text) // max(1, server.chunks))
                parts = [text[i : i + size] for i in range(0, len(text), size)] or [""]
                events = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": parts[0]}}]}]
                events += [{"choices": [{"index": 0, "delta": {"content": part}}]} for part in parts[1:]]
                events += [
                    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                    {"choices": [], "usage": {"prompt_tokens": len(body["messages"]), "completion_tokens": 1}},
                ]
                blocks = [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(sum(len(b) for b in blocks)))
                self.end_headers()
                for n, block in enumerate(blocks):
                    if n and n < len(parts) and server.chunk_delay:
                        self.wfile.flush()
                        time.sleep(server.chunk_delay)
                    self.wfile.write(block)

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def settings(self) -> ProviderSettings:
        return ProviderSettings(openai_base_url=self.url, read_timeout=30, connect_timeout=5)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> ReflectServer:
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        self.close()
        if kind is None:  # every request a test's turns sent kept the documented wire rules
            assert not self.violations, f"requests broke the wire rules: {self.violations}"
