"""The tool loop: model → tool calls → results → model, until a reply without calls.

One :class:`ToolRounds` follows a turn's rounds: after each complete reply it runs the calls
the reply asked for (all of them, in parallel when async), keeps large results aside in the
namespace store, and makes the next request. The turn ends on a reply without calls, or at the
round limit, where the calls left are answered "not run" so the stored turn is whole and a
real API accepts it later. A tool that raises, arguments that do not match the schema, or an
unknown tool become error results the model reads; the turn goes on. An interrupt or a
cancelled task ends the turn and nothing is stored: everything here lives in memory until
the engine commits the turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from ..._core.checks import deeper_than
from ..._core.messages import Message, ToolCall
from ..._core.request import ChatRequest
from ..._core.usage import Usage
from ..._errors import MalformedReply
from ..._namespace import Namespace, has_reference
from ...providers._base import Completion
from ...tools import McpTool, Tool, ToolRegistry, ToolResult
from .fit import RequestFit
from .reading import READERS, PageRoom
from .structured import answered

_STEP_PREVIEW = 200


@dataclass(frozen=True, slots=True)
class ToolStep:
    """One tool call of a turn and what came back, for showing (a one-line result, expandable)."""

    name: str
    arguments: str
    result: str
    is_error: bool = False

    @property
    def summary(self) -> str:
        line = " ".join(self.result.split())
        return line if len(line) <= _STEP_PREVIEW else line[: _STEP_PREVIEW - 1] + "…"

    def describe(self) -> str:
        flag = "error: " if self.is_error and not self.result.startswith("error") else ""
        return f"{self.name}({self.arguments}) → {flag}{self.summary}"


def steps_of(messages: list[Message]) -> tuple[ToolStep, ...]:
    """The tool steps in a turn's stored messages (its calls, matched with their results, and
    the provider's server tools with what they found)."""
    calls = {c.id: c for m in messages if m.role == "assistant" for c in m.tool_calls}
    steps: list[ToolStep] = []
    for m in messages:
        if m.role == "assistant":
            steps.extend(server_steps(m))
        if m.role == "tool" and m.tool_call_id in calls:
            call = calls[m.tool_call_id]
            steps.append(ToolStep(call.name, _compact(call.arguments), m.content, m.is_error))
    return tuple(steps)


def server_steps(message: Message) -> list[ToolStep]:
    """The server tools a provider ran within a reply (Anthropic's web search …), each with
    what it found (a search's titles and links), from the blocks kept on the message."""
    uses: dict[str, tuple[str, str]] = {}  # server tool use id -> (name, arguments)
    steps: list[ToolStep] = []
    for kept in message.thinking:
        block = kept.block()
        if block is None:
            continue
        if block.get("type") == "server_tool_use":
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            uses[str(block.get("id"))] = (str(block.get("name") or "server tool"), _compact(arguments))
        elif str(block.get("type", "")).endswith("_tool_result"):
            name, arguments = uses.pop(str(block.get("tool_use_id")), (str(block["type"]), ""))
            content = block.get("content")
            failed = isinstance(content, dict) and bool(content.get("error_code"))
            result = kept.text.partition("\n")[2] or kept.text
            steps.append(ToolStep(name, arguments, result, failed))
    return steps


def checked(completion: Completion, model: str, taken: Iterable[str] = ()) -> Completion:
    """A complete reply as a turn may run and store it: each tool call with an id no other call
    of the turn has (a server that repeats ids, or sends none, gets them renamed ``id_2`` …, so
    each result answers one call); ``MalformedReply`` for a call without a tool name or usage
    below zero (nothing of the turn is stored: a nameless call would be sent back to the API
    with every later request of the slot, and refused)."""
    usage = completion.usage
    if min(usage.input_tokens, usage.output_tokens, usage.cached_tokens) < 0:
        raise MalformedReply(
            f"the reply from {model} reported a negative token count ({usage.input_tokens} in, "
            f"{usage.output_tokens} out, {usage.cached_tokens} cached); nothing was stored, run the turn again"
        )
    calls = completion.message.tool_calls
    if not calls:
        return completion
    if any(not c.name.strip() for c in calls):
        raise MalformedReply(
            f"the reply from {model} called a tool without naming it; nothing was stored, run the turn again"
        )
    seen, fixed = set(taken), []
    for n, call in enumerate(calls, 1):
        base = call.id if call.id.strip() else f"call_{n}"
        new, more = base, 1
        while new in seen:
            more += 1
            new = f"{base}_{more}"
        seen.add(new)
        fixed.append(call if new == call.id else replace(call, id=new))
    if all(a is b for a, b in zip(fixed, calls, strict=True)):
        return completion
    return replace(completion, message=replace(completion.message, tool_calls=tuple(fixed)))


@dataclass
class ToolRounds:
    """A turn's tool rounds so far. ``added`` holds what the rounds put after the user
    message (assistant calls and tool results), ``usage`` the whole turn's."""

    tools: ToolRegistry | None
    namespace: Namespace
    max_rounds: int
    request: ChatRequest
    added: list[Message] = field(default_factory=list)
    steps: list[ToolStep] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    rounds: int = 0
    note: str | None = None
    on_step: Callable[[ToolStep], None] | None = None
    shelved: list[Message] = field(default_factory=list)  # results kept aside: stored again with the turn
    last: Completion | None = None  # the latest reply
    sent: ChatRequest | None = None  # the latest request, which ``last`` answers (None: ``request``)
    final: Message | None = None  # the reply that ended the turn without calls
    fit: RequestFit | None = None  # keeps every next request within the window
    room: PageRoom = field(default_factory=PageRoom)  # what a page read in this round may take
    reader: Tool[..., str] | None = None  # read_namespace, offered once a result is kept aside

    def calls(self, completion: Completion) -> tuple[ToolCall, ...] | None:
        """The calls to run after this reply; None when the turn is over."""
        completion = answered(completion, self.request.schema)  # a forced tool's call is the answer
        self.usage = self.usage + completion.usage
        self.last = completion
        for step in server_steps(completion.message):  # what the provider's own tools found
            self.steps.append(step)
            if self.on_step is not None:
                self.on_step(step)
        calls = completion.message.tool_calls
        if not calls:
            self.final = completion.message
            return None
        if self.tools is None or self.rounds >= self.max_rounds:
            why = "no tools were offered in this turn" if self.tools is None else (
                f"the turn reached its limit of {self.max_rounds} tool rounds"
            )  # fmt: skip
            if self.tools is not None:
                self.note = f"stopped: {why} (%config SlotMagic.max_tool_rounds); the partial work is stored"
            results = [ToolResult(c.id, c.name, f"error: the call was not run: {why}", True) for c in calls]
            self._record(completion.message, results)
            return None
        if self.fit is not None:
            pending = replace(self.request, messages=(*self.request.messages, *self.added, completion.message))
            readers = sum(1 for c in calls if c.name in READERS)
            self.room.tokens = self.fit.room_per_page(pending, readers, len(calls) - readers)
        return calls

    def call_ids(self) -> set[str]:
        """The ids of the calls made so far in this turn."""
        return {c.id for m in self.added if m.role == "assistant" for c in m.tool_calls}

    def next_request(self, completion: Completion, results: list[ToolResult]) -> ChatRequest | None:
        """The request that sends the results back; None when it cannot be made to fit the
        window (the turn ends there, its work stored, and the footer says so)."""
        self._record(completion.message, results)
        self.rounds += 1
        request = replace(self.request, messages=(*self.request.messages, *self.added))
        fitted = request if self.fit is None else self.fit.fit(request)
        # A result kept aside just now, or shortened to fit, or a page naming one: readable at once.
        if fitted is not None and self._offer_reader(fitted.messages):
            request = replace(request, tools=self.request.tools)
            fitted = request if self.fit is None else self.fit.fit(request)
        if fitted is not None:
            self.sent = fitted
        if fitted is None:
            assert self.fit is not None
            self.note = (
                f"stopped: the next request would need {self.fit.tokens(request):,} tokens, more than the "
                f"{self.fit.limit:,} the window leaves even with every tool result shortened; the partial work is "
                "stored, and the next turn compacts"
            )
        return fitted

    def _offer_reader(self, messages: Sequence[Message]) -> bool:
        """Add ``read_namespace`` to the turn's tools when ``messages`` hold a reference and it
        is not offered yet; whether it was added."""
        reader, tools = self.reader, self.tools
        if tools is None or reader is None or reader.name in tools or not has_reference(messages):
            return False
        self.tools = ToolRegistry([*tools.tools(), reader], label=tools.label)
        self.request = replace(self.request, tools=tuple(self.tools.specs()))
        return True

    def run_sync(self, calls: tuple[ToolCall, ...]) -> list[ToolResult]:
        assert self.tools is not None
        tools = self.tools
        if len(calls) > 1 and all(isinstance(tools.get(c.name), McpTool) for c in calls if c.name in tools):
            from concurrent.futures import ThreadPoolExecutor  # calls to MCP servers run side by side

            with ThreadPoolExecutor(len(calls), thread_name_prefix="slotmagic-mcp-call") as pool:
                return list(pool.map(tools.run_sync, calls))
        return [tools.run_sync(call) for call in calls]

    async def run(self, calls: tuple[ToolCall, ...]) -> list[ToolResult]:
        import asyncio  # here: `import slotmagic` stays free of it

        assert self.tools is not None
        tools = self.tools
        return list(await asyncio.gather(*(tools.run(call) for call in calls)))

    def _record(self, assistant: Message, results: list[ToolResult]) -> None:
        self.added.append(assistant)
        for result in results:
            message = result.to_message()
            shelved = message if result.name in READERS else self.namespace.shelve(message)
            if shelved is not message:
                self.shelved.append(message)
            self.added.append(shelved)
            arguments = _compact(_arguments(assistant, result.call_id))
            step = ToolStep(result.name, arguments, result.content, result.is_error)
            self.steps.append(step)
            if self.on_step is not None:
                self.on_step(step)


def _arguments(assistant: Message, call_id: str) -> str:
    return next((c.arguments for c in assistant.tool_calls if c.id == call_id), "{}")


def _compact(arguments: str) -> str:
    """Arguments as ``city="Oslo", days=3`` when they are a JSON object, else as sent."""
    try:
        data = json.loads(arguments or "{}")
    except (ValueError, RecursionError):
        return arguments
    if not isinstance(data, dict) or deeper_than(data, 100):
        return arguments
    return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in data.items())
