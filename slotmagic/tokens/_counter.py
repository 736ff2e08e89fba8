"""Counting the tokens of messages, tool definitions and whole requests for one model.

OpenAI models are counted exactly with their own encoding; every other model (Anthropic,
Ollama, servers of unknown models, ``echo``) gets the character estimate of
:mod:`slotmagic._core.tokens`, which a :class:`~slotmagic.tokens._calibration.Calibration` scales
to what the provider reports.

How OpenAI's chat completions turn a request into prompt tokens (checked against the
``prompt_tokens`` of real responses in ``tests/tokens/openai_prompt_tokens.json``):

- every message costs 3 tokens of framing (``<|im_start|>``, ``<|im_sep|>``, ``<|im_end|>``)
  plus its role, its content and, when set, ``name`` and 1 more token;
- the reply is primed with 3 tokens (``<|im_start|>assistant<|im_sep|>``) on the gpt-4o /
  gpt-4.1 / gpt-4 / gpt-3.5 chat format, 2 on the format of the reasoning models (o1, o3,
  o4-mini, gpt-5), which end the prompt with ``<|start|>assistant``;
- tool definitions are rendered as a TypeScript namespace (``namespace functions { type
  get_weather = (_: { location: string, }) => any; }``) under ``# Tools`` / ``## functions``
  headings in the system message, or in a system message of their own when the request has
  none;
- an assistant tool call is a message addressed ``to=functions.NAME`` whose content is the
  arguments JSON, and its result a message from ``functions.NAME``; call ids are not shown to
  the model and cost nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from .._core.budget import BudgetReport, ContextBudget
from .._core.messages import Message
from .._core.request import ChatRequest, ToolSpec
from .._core.tokens import estimate_message_tokens, estimate_text_tokens
from .._core.vision import OPENAI_DEFAULT_RULE, image_rule, takes_images
from ._calibration import Calibration
from ._encodings import get_encoding
from ._fast import fast_counter
from ._images import image_tokens

__all__ = ["ESTIMATE", "RequestTokens", "TokenCounter", "encoding_for_model", "render_tools"]

ESTIMATE = "estimate"  # the encoding key of counts that are character estimates

# Models named with these prefixes (after any "openai/" vendor prefix, as OpenRouter writes
# them) use o200k_base; the rest of OpenAI's chat and embedding models use cl100k_base. Names
# that match neither (a llama.cpp or vLLM server behind openai:) are estimated.
_O200K_PREFIXES = ("gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "codex-mini")
_CL100K_PREFIXES = ("gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada-002")
# The reasoning models' chat format primes the reply with 2 tokens, not 3.
_HARMONY_PREFIXES = ("gpt-5", "o1", "o3", "o4", "codex-mini")


def _model_name(model: str) -> tuple[str, str]:
    """(provider, bare model name) of ``provider:model``; OpenRouter's ``openai/`` is dropped."""
    provider, sep, name = model.partition(":")
    if not sep:
        provider, name = "", model
    name = name.lower()
    if name.startswith("openai/"):
        name = name[len("openai/") :]
    return provider, name


def _starts_with(name: str, prefixes: Sequence[str]) -> bool:
    # "o1" matches "o1" and "o1-mini" but not "o1x"; "gpt-5" matches "gpt-5.1" too
    return any(name == p or name.startswith((p + "-", p + ".")) for p in prefixes)


# Providers whose model names are OpenAI's, counted exactly with OpenAI's encodings: what their
# registrations say (``ProviderSpec.exact_count``; the registry tells this module, which sits
# below the providers). "" is a bare model name, "gpt-4o".
_EXACT_PROVIDERS: set[str] = {""}


def count_exactly(provider: str) -> None:
    """Count the models of ``provider`` exactly, by their names, as OpenAI's models are."""
    _EXACT_PROVIDERS.add(provider)


def encoding_for_model(model: str) -> str:
    """The encoding key for ``model``: ``"o200k_base"``, ``"cl100k_base"`` or ``"estimate"``.

    Only models whose provider registration says they are OpenAI's (``openai:`` names, or
    ``openai/…`` on OpenRouter) are counted exactly; the same key always means the same counts,
    so stored counts can be reused.
    """
    provider, name = _model_name(model)
    if provider not in _EXACT_PROVIDERS:
        return ESTIMATE
    if _starts_with(name, _O200K_PREFIXES):
        return "o200k_base"
    if _starts_with(name, _CL100K_PREFIXES):
        return "cl100k_base"
    return ESTIMATE


@dataclass(frozen=True, slots=True)
class RequestTokens:
    """A request's tokens by budget category. ``history`` is the user and assistant messages
    (tool calls included); ``priming`` the tokens that start the reply."""

    system: int = 0
    history: int = 0
    tools: int = 0
    tool_results: int = 0
    priming: int = 0

    @property
    def total(self) -> int:
        return self.system + self.history + self.tools + self.tool_results + self.priming

    def against(self, budget: ContextBudget, *, reserve: int = 0) -> BudgetReport:
        """This request against ``budget`` (the reply's priming counts as history; ``reserve`` is
        what the reply may take)."""
        return budget.report(
            system=self.system,
            history=self.history + self.priming,
            tools=self.tools,
            tool_results=self.tool_results,
            reserve=reserve,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "system": self.system,
            "history": self.history,
            "tools": self.tools,
            "tool_results": self.tool_results,
            "priming": self.priming,
            "total": self.total,
        }


_MESSAGE_FRAMING = 3  # <|im_start|> role <|im_sep|> content <|im_end|>: 3 tokens besides role and content
_NAME_TOKENS = 1
_CALL_FRAMING = 2  # fitted: a call and its result together cost 5 tokens besides their texts
_TOOLS_HEADING = "# Tools\n\n## functions\n\n"
_TOOLS_IN_NEW_SYSTEM_MESSAGE = 3  # fitted: the tools block opens its own system message
_TOOLS_IN_SYSTEM_MESSAGE = -1  # fitted: the tools block joins the request's system message
_UNKNOWN_TOOL_NAME = "tool"  # a tool result whose call is not in sight


class TokenCounter:
    """Counts tokens for one model: ``TokenCounter.for_model("openai:gpt-4o")``.

    ``encoding`` says what the counts are (``"o200k_base"``, ``"cl100k_base"`` or
    ``"estimate"``): counts with the same key are interchangeable, so a store can keep them per
    message and encoding and recount only when a slot moves to a model with another key.
    ``exact`` is False for estimates, which :meth:`calibrated` scales.
    """

    __slots__ = ("_harmony", "_len", "_tools_counted", "encoding", "exact", "model")

    def __init__(self, model: str, encoding: str, *, harmony: bool = False) -> None:
        self.model = model
        self.encoding = encoding
        self.exact = encoding != ESTIMATE
        self._harmony = harmony
        # the last definitions counted, as (the very sequence, has_system, tokens): a view asks
        # twice for the same ones (the system side and the budget)
        self._tools_counted: tuple[Sequence[ToolSpec], bool, int] | None = None
        self._len: Callable[[str], int] = _text_counter(encoding) if self.exact else estimate_text_tokens

    @classmethod
    def for_model(cls, model: str) -> TokenCounter:
        """The counter for ``model`` (``provider:model``, or ``echo``). The first exact counter of
        an encoding loads it (see :mod:`.encodings`); later ones reuse it."""
        encoding = encoding_for_model(model)
        return cls(
            model, encoding, harmony=encoding != ESTIMATE and _starts_with(_model_name(model)[1], _HARMONY_PREFIXES)
        )

    def __repr__(self) -> str:
        return f"TokenCounter({self.model!r}, encoding={self.encoding!r})"

    # -- counting -----------------------------------------------------------------------------

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` alone, without any message framing."""
        return self._len(text)

    def count_message(self, message: Message) -> int:
        """Tokens ``message`` adds to a request: content, role, name, tool calls and framing.

        A tool result is counted with its ``name`` (the tool it answers); without one, a short
        stand-in name is assumed. :meth:`count_request` looks the name up from the call instead.
        """
        if not self.exact:
            return estimate_message_tokens(message) + self._image_difference(message)
        return self._message(message, message.name)

    @property
    def counts_key(self) -> str:
        """What counts kept in the store are keyed by: the encoding, plus the image rule when it
        is not the usual one for it (gpt-4o-mini's tiles cost more than gpt-4o's, and a model
        without images counts none), so models sharing an encoding never share an image's count."""
        if not self.exact:
            return self.encoding
        if not takes_images(self.model):
            return f"{self.encoding}+no-images"
        rule = image_rule(self.model)
        if rule == OPENAI_DEFAULT_RULE:
            return self.encoding
        return f"{self.encoding}+{rule.kind}:{rule.base}:{rule.per_tile}:{rule.multiplier}"

    def count_images(self, message: Message) -> int:
        """Tokens of ``message``'s images alone, by this model's provider's rule."""
        return sum(image_tokens(self.model, image) for image in message.images)

    def _image_difference(self, message: Message) -> int:
        """This model's rule for the images, less the estimate's (which a stored count holds)."""
        if not message.images:
            return 0
        return self.count_images(message) - sum(image_tokens(None, image) for image in message.images)

    def count_tools(self, tools: Sequence[ToolSpec], *, has_system: bool = True) -> int:
        """Tokens the tool definitions add to a request, as OpenAI renders them; ``has_system``
        says whether the request has a system message for them to join."""
        if not tools:
            return 0
        last = self._tools_counted
        if last is not None and last[0] is tools and last[1] == has_system and isinstance(tools, tuple):
            return last[2]
        rendered = _TOOLS_HEADING + render_tools(tools)
        extra = _TOOLS_IN_SYSTEM_MESSAGE if has_system else _TOOLS_IN_NEW_SYSTEM_MESSAGE
        counted = self._len(rendered) + extra
        self._tools_counted = (tools, has_system, counted)
        return counted

    @property
    def priming(self) -> int:
        """Tokens that start the reply, added once per request."""
        return 2 if self._harmony else 3

    def count_request(self, request: ChatRequest) -> int:
        """Every prompt token of ``request``: messages, tool definitions and reply priming."""
        return self.breakdown(request).total

    def breakdown(self, request: ChatRequest) -> RequestTokens:
        """:meth:`count_request` by budget category."""
        system = history = tool_results = 0
        names: dict[str, str] = {}
        for message in request.messages:
            if message.role == "tool":
                name = message.name or names.get(message.tool_call_id or "")
                tool_results += self._message(message, name) if self.exact else estimate_message_tokens(message)
                continue
            names.update((call.id, call.name) for call in message.tool_calls)
            tokens = self.count_message(message)
            if message.role == "system":
                system += tokens
            else:
                history += tokens
        first_system = next((m.content for m in request.messages if m.role == "system"), None)
        tools = self.count_tools_after(request.tools, first_system)
        return RequestTokens(system, history, tools, tool_results, self.priming)

    def count_tools_after(self, tools: Sequence[ToolSpec], first_system: str | None) -> int:
        """The tool definitions' tokens in a request whose first system message is
        ``first_system`` (None: it has none), as :meth:`count_request` counts them."""
        count = self.count_tools(tools, has_system=first_system is not None)
        if tools and first_system is not None and self.exact:
            # The tools block follows the first system message's text after a newline, which
            # may merge with its last token: "Hello:\n" is 2 tokens like "Hello:", "Hello\n" is
            # one more than "Hello" (a case in tests/tokens/openai_prompt_tokens.json shows it).
            count += self._len(first_system + "\n") - self._len(first_system)
        return count

    def calibrated(self, tokens: int, calibration: Calibration | None) -> int:
        """``tokens`` as the provider will count them: unchanged when exact, else scaled by
        ``calibration`` (a :class:`~slotmagic.tokens._calibration.Calibration`) for this model."""
        if self.exact or calibration is None:
            return tokens
        return calibration.apply(self.model, tokens)

    # -- the chat format ----------------------------------------------------------------------

    def _message(self, message: Message, tool_name: str | None) -> int:
        n = self._len
        if message.role == "tool":
            sender = f"functions.{tool_name or _UNKNOWN_TOOL_NAME} to=assistant"
            return _MESSAGE_FRAMING + n(sender) + n(message.content)
        tokens = 0
        if message.content or not message.tool_calls:
            tokens = _MESSAGE_FRAMING + n(message.role) + n(message.content)
            if message.name:
                tokens += _NAME_TOKENS + n(message.name)
        if message.images:
            tokens += self.count_images(message)
        for call in message.tool_calls:
            tokens += _CALL_FRAMING + n(f"{message.role} to=functions.{call.name}") + n(call.arguments or "{}")
        return tokens


_CACHED_TEXT_CHARS = 16_384  # longer texts are counted every time rather than kept alive by the cache


@cache
def _text_counter(encoding: str) -> Callable[[str], int]:
    """Token counts of texts in ``encoding``, remembered for the last 2,048 texts of up to 16 KB:
    a history is counted again at every turn, mostly from texts already seen."""
    uncached = fast_counter(encoding) or tiktoken_counter(encoding)

    @lru_cache(maxsize=2048)
    def cached(text: str) -> int:
        return uncached(text)

    def count(text: str) -> int:
        if not text:
            return 0
        return cached(text) if len(text) <= _CACHED_TEXT_CHARS else uncached(text)

    return count


def tiktoken_counter(encoding: str) -> Callable[[str], int]:
    """The reference count: the length of tiktoken's encoding of the text as plain text."""
    encode = get_encoding(encoding).encode_ordinary  # text is text: "<|endoftext|>" in a message is not special
    return lambda text: len(encode(text))


# -- tool definitions as the model sees them ----------------------------------------------------


def render_tools(tools: Sequence[ToolSpec]) -> str:
    """The tool definitions as a TypeScript namespace, the form OpenAI's models read them in."""
    blocks = []
    for tool in tools:
        lines = [f"// {line}" for line in tool.description.splitlines()] if tool.description else []
        properties = _properties(tool.parameters)
        if properties:
            lines.append(f"type {tool.name} = (_: {{")
            lines.extend(_property_lines(tool.parameters, 0))
            lines.append("}) => any;")
        else:
            lines.append(f"type {tool.name} = () => any;")
        blocks.append("\n".join(lines))
    return "namespace functions {\n\n" + "\n\n".join(blocks) + "\n\n} // namespace functions"


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    properties = schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _property_lines(schema: Mapping[str, Any], indent: int) -> list[str]:
    required = schema.get("required")
    required_names = set(required) if isinstance(required, list) else set()
    lines: list[str] = []
    for name, prop in _properties(schema).items():
        prop = prop if isinstance(prop, Mapping) else {}
        description = prop.get("description")
        if isinstance(description, str) and description:
            lines.extend(f"// {line}" for line in description.splitlines())
        optional = "" if name in required_names else "?"
        lines.append(f"{name}{optional}: {_type(prop, indent)},")
    return [" " * indent + line for line in lines]


def _type(prop: Mapping[str, Any], indent: int) -> str:
    enum = prop.get("enum")
    if isinstance(enum, list) and enum:
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in enum)
    if "const" in prop:
        return json.dumps(prop["const"], ensure_ascii=False)
    for key in ("anyOf", "oneOf"):
        options = prop.get(key)
        if isinstance(options, list) and options:
            return " | ".join(_type(o if isinstance(o, Mapping) else {}, indent) for o in options)
    kind = prop.get("type")
    if isinstance(kind, list):
        return " | ".join(_type({**prop, "type": k}, indent) for k in kind)
    if kind in ("number", "integer"):
        return "number"
    if kind in ("string", "boolean", "null"):
        return str(kind)
    if kind == "array":
        items = prop.get("items")
        return f"{_type(items, indent)}[]" if isinstance(items, Mapping) and items else "any[]"
    if kind == "object":
        if not _properties(prop):
            return "object"
        return "\n".join(["{", *_property_lines(prop, indent + 2), "}"])
    return "any"
