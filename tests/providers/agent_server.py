"""A real HTTP server on 127.0.0.1 that plays an agent model over the OpenAI and Anthropic wire
formats, deciding every reply from the request alone, and keeps every request it receives.

The model is the edge of the world; everything on slotmagic's side (the budget, compaction,
the namespace store, the tool loop, HTTP, SSE parsing, the store) is real. What it does:

- a compaction request (the compaction marker in its system prompt): a valid summary card and a
  short *rolling* summary that carries the previous summary forward, as a good model does;
- a user message ``fetch N`` calls ``fetch(size=N)``; ``recall WORD`` calls ``recall``;
  anything else is answered ``noted: …``;
- a result kept aside (``namespace://…``) is read back with ``read_namespace``, a second page
  too when the first says more are left; a ``recall`` search is followed by reading the first
  hit whole (``recall(position=N)``), and the message read is quoted in the reply.

Each request is turned back into slotmagic's own values (:func:`as_request`), so a test counts
its tokens with the tokenizer the model's requests are counted with.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from slotmagic._core.compaction import COMPACTION_MARKER
from slotmagic._core.messages import Message, ToolCall
from slotmagic._core.request import ChatRequest, ToolSpec
from slotmagic.providers import ProviderSettings

from .wire_rules import check
from .wire_server import an_start, an_stop, an_text_block, an_tool_block, oa_text_stream, oa_tool_stream

Wire = Literal["openai", "anthropic"]
REFERENCE = re.compile(r"namespace://[A-Za-z0-9_-]{1,64}/[0-9a-f]{16}")


@dataclass
class Received:
    """One request: which API, its body, and what the agent did."""

    wire: Wire
    body: dict[str, Any]
    request: ChatRequest  # the same, as slotmagic's values
    compaction: bool
    action: str = ""


@dataclass
class AgentServer:
    requests: list[Received] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # what the agent could not do (a missing tool ...)
    violations: list[list[str]] = field(default_factory=list)  # the wire rules (wire_rules.py) a body broke

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                wire: Wire = "anthropic" if self.path.endswith("/messages") else "openai"
                broken = check(self.path, body)
                if broken:
                    server.violations.append(broken)
                events = server._answer(wire, body)
                data = "".join(events).encode()
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def settings(self) -> ProviderSettings:
        return ProviderSettings(
            openai_api_key="sk-test-agent",
            openai_base_url=self.url + "/v1",
            anthropic_api_key="sk-ant-test-agent",
            anthropic_base_url=self.url,
            read_timeout=10.0,
        )

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def __enter__(self) -> AgentServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        if exc[0] is None:
            assert not self.violations, f"requests broke the wire rules: {self.violations[:3]}"

    # -- the agent ---------------------------------------------------------------------------

    def _answer(self, wire: Wire, body: dict[str, Any]) -> list[str]:
        request = as_request(wire, body)
        system = "\n".join(m.content for m in request.messages if m.role in ("system", "developer"))
        received = Received(wire, body, request, COMPACTION_MARKER in system)
        with self._lock:
            self.requests.append(received)
            self._ids += 1
            call_id = f"call_{self._ids}"
        if received.compaction:
            received.action = "summary"
            return _text(wire, _summary(request))
        offered = {t.name for t in request.tools}
        last = request.messages[-1]
        if last.role == "user":
            words = last.content.split()
            if words[:1] == ["fetch"]:
                return self._call(received, wire, call_id, "fetch", {"size": int(words[1])}, offered)
            if words[:1] == ["recall"]:
                return self._call(received, wire, call_id, "recall", {"query": words[1]}, offered)
            received.action = "reply"
            return _text(wire, f"noted: {last.content[:80]}")
        assert last.role == "tool", last
        call = _call_of(request.messages, last.tool_call_id)
        if call is not None and call.name == "fetch" and REFERENCE.match(last.content):
            ref = REFERENCE.match(last.content)
            assert ref is not None
            return self._call(received, wire, call_id, "read_namespace", {"ref": ref[0]}, offered)
        if call is not None and call.name == "read_namespace":
            more = re.search(r"more pages?\) from offset (\d+)", last.content)
            pages = sum(1 for m in request.messages if m.role == "tool" and m.name == "read_namespace")
            if last.content.startswith("error"):
                self.problems.append(f"read_namespace failed: {last.content[:200]}")
            elif more and pages < 2:
                ref = json.loads(call.arguments)["ref"]
                args = {"ref": ref, "offset": int(more[1])}
                return self._call(received, wire, call_id, "read_namespace", args, offered)
        if call is not None and call.name == "recall":
            found = re.search(r"\[message (\d+),", last.content)
            if json.loads(call.arguments).get("query") and found:
                return self._call(received, wire, call_id, "recall", {"position": int(found[1])}, offered)
            received.action = "reply"
            return _text(wire, f"recalled: {last.content[:300]}")
        received.action = "reply"
        return _text(wire, "done")

    def _call(
        self, received: Received, wire: Wire, call_id: str, name: str, arguments: dict[str, Any], offered: set[str]
    ) -> list[str]:
        if name not in offered:
            self.problems.append(f"request {len(self.requests)}: the agent wanted {name} but it was not offered")
            received.action = "reply"
            return _text(wire, f"I could not call {name}")
        received.action = name
        text = json.dumps(arguments)
        if wire == "openai":
            return oa_tool_stream([(call_id, name, [text])])
        return [an_start(0), *an_tool_block(0, "toolu_" + call_id, name, text), *an_stop("tool_use")]


def _text(wire: Wire, text: str) -> list[str]:
    if wire == "openai":
        return oa_text_stream(text, usage=(0, 5, 0))
    return [an_start(0), *an_text_block(0, text), *an_stop("end_turn")]


def _summary(request: ChatRequest) -> str:
    """A rolling summary: the previous one's first sentences carried forward, then one new."""
    body = request.messages[-1].content
    earlier = re.search(r"^\[earlier summary\] (.*)$", body, re.M)
    before = " ".join(earlier[1].split()[:25]) if earlier else "The user asked the agent to fetch documents."
    asks = re.findall(r"^\[user\] (.*)$", body, re.M)
    last = " ".join(asks[-1].split()[:6]) if asks else "none"
    card = {"topics": ["fetching documents"], "decisions": [], "open_questions": [], "facts": [f"last ask: {last}"]}
    return f"<card>{json.dumps(card)}</card><summary>{before} Then {len(asks)} more asks, the last {last}.</summary>"


def _call_of(messages: tuple[Message, ...], call_id: str | None) -> ToolCall | None:
    for message in reversed(messages):
        for call in message.tool_calls:
            if call.id == call_id:
                return call
    return None


# -- wire bodies as slotmagic's values ---------------------------------------------------------------


def as_request(wire: Wire, body: dict[str, Any]) -> ChatRequest:
    """The request a body carries, as slotmagic's ``ChatRequest`` (for counting it)."""
    messages = _openai_messages(body) if wire == "openai" else _anthropic_messages(body)
    if wire == "openai":
        tools = [ToolSpec(t["function"]["name"], t["function"].get("description", ""), t["function"]["parameters"])
                 for t in body.get("tools", [])]  # fmt: skip
    else:
        tools = [ToolSpec(t["name"], t.get("description", ""), t["input_schema"]) for t in body.get("tools", [])]
    return ChatRequest(model=body["model"], messages=tuple(messages), tools=tuple(tools))


def _openai_messages(body: dict[str, Any]) -> list[Message]:
    out: list[Message] = []
    names: dict[str, str] = {}
    for m in body["messages"]:
        role = "system" if m["role"] == "developer" else m["role"]
        content = m.get("content") or ""
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content)
        if role == "assistant":
            calls = [
                ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls") or []
            ]
            names.update((c.id, c.name) for c in calls)
            out.append(Message.assistant(content, tool_calls=calls))
        elif role == "tool":
            out.append(Message.tool(m["tool_call_id"], content, names.get(m["tool_call_id"])))
        else:
            out.append(Message(role, content))
    return out


def _anthropic_messages(body: dict[str, Any]) -> list[Message]:
    out: list[Message] = []
    system = body.get("system")
    if isinstance(system, list):
        system = "\n\n".join(b["text"] for b in system)
    if system:
        out.append(Message.system(system))
    names: dict[str, str] = {}
    for m in body["messages"]:
        blocks = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
        if m["role"] == "assistant":
            text = "".join(b.get("text", "") for b in blocks if b["type"] == "text")
            calls = [ToolCall(b["id"], b["name"], json.dumps(b["input"])) for b in blocks if b["type"] == "tool_use"]
            names.update((c.id, c.name) for c in calls)
            out.append(Message.assistant(text, tool_calls=calls))
            continue
        for b in blocks:
            if b["type"] == "tool_result":
                content = b.get("content", "")
                if isinstance(content, list):
                    content = "".join(part.get("text", "") for part in content)
                out.append(Message.tool(b["tool_use_id"], content, names.get(b["tool_use_id"])))
        text = "".join(b.get("text", "") for b in blocks if b["type"] == "text")
        if text or not any(b["type"] == "tool_result" for b in blocks):
            out.append(Message.user(text))
    return out
