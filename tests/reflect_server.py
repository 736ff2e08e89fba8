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
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from slotmagic.providers import ProviderSettings


def reflection(messages: list[dict[str, Any]]) -> str:
    last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    return f"seen {len(messages)}: {last_user}"


def parse_reflection(text: str) -> tuple[int, str]:
    count, _, last = text.partition(": ")
    return int(count.removeprefix("seen ")), last


class ReflectServer:
    def __init__(self, delay: float = 0.0, jitter: float = 0.0) -> None:
        self.delay, self.jitter = delay, jitter
        self.requests = 0
        self.bodies: list[dict[str, Any]] = []  # every request body received, in order
        self.raw_bodies: list[bytes] = []  # the same, as the bytes that came over the wire
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
                time.sleep(server.delay + random.uniform(0, server.jitter))
                text = reflection(body["messages"])
                events = [
                    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
                    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                    {"choices": [], "usage": {"prompt_tokens": len(body["messages"]), "completion_tokens": 1}},
                ]
                payload = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
                data = payload.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
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

    def __exit__(self, *exc: object) -> None:
        self.close()
