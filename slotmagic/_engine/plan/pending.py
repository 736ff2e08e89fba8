"""A turn before it is sent: its checked options, and everything decided before the model is
called (nothing of it is stored until the reply is complete)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..._core.attachments import Attached
from ..._core.checks import (
    check_json_mapping,
    check_names,
    check_number,
    check_optional_text,
    check_text,
    check_whole,
)
from ..._core.compaction import Compaction
from ..._core.messages import Message, count_in_place
from ..._core.records import TurnInfo, TurnRecord
from ..._core.request import ChatRequest
from ..._core.schema import ResponseSchema
from ..._core.slots import validate_slot_id
from ..._core.tokens import estimate_message_tokens
from ..._core.vision import takes_images
from ..._errors import ConfigError, ProviderError
from ..._store.base import History, Tip
from ...providers import REGISTRY, parse_model
from ...providers._base import Completion, Provider
from ...providers._image_limits import refusal as image_refusal
from ...tools import Tool, ToolRegistry
from ..compaction.compactor import Fold
from ..run.fit import RequestFit
from ..run.reading import RECALL, PageRoom, recall_spec
from ..view.inputs import Counting
from ..view.view import View


def counted(message: Message) -> Message:
    """``message`` with its estimated token count, unless it has one."""
    return message if message.tokens else message.with_tokens(estimate_message_tokens(message))


def counted_own(message: Message) -> Message:
    """:func:`counted` for a message this turn made, or a provider's reply: counted in place,
    as the count is the estimate of its own content (a copy costs every field again)."""
    return message if message.tokens else count_in_place(message, estimate_message_tokens(message))


@dataclass(frozen=True)
class TurnOptions:
    """A turn's options, checked when made: nothing malformed reaches a request or the store."""

    slot: str | None = None
    model: str | None = None
    system: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)
    cell_id: str | None = None
    rerun: bool = False
    tools: tuple[str, ...] | None = None  # this turn's tools by name; () none; None the slot's
    attachments: tuple[Attached, ...] = ()  # objects sent after the text (see slotmagic._attach)
    read_variables: bool = False  # offer the opt-in read_variable tool (a kernel's variables)
    schema: Any = None  # the reply's schema: a pydantic model class, a JSON schema dict (made a ResponseSchema)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.slot is not None:
            validate_slot_id(self.slot)
        if self.model is not None:
            parse_model(check_text(self.model, "model"))
        set_(self, "system", check_optional_text(self.system, "system"))
        if self.temperature is not None:
            set_(self, "temperature", check_number(self.temperature, "temperature"))
        if self.max_tokens is not None:
            check_whole(self.max_tokens, "max_tokens", minimum=1)
        set_(self, "params", check_json_mapping(self.params if self.params is not None else {}, "params"))
        set_(self, "info", check_json_mapping(self.info if self.info is not None else {}, "info"))
        if self.cell_id is not None:
            check_text(self.cell_id, "cell_id", empty_ok=False)
        if not isinstance(self.rerun, bool):
            raise ConfigError(f"rerun must be True or False, not {self.rerun!r:.60}")
        if self.tools is not None:
            set_(self, "tools", check_names(self.tools, "tools"))
        if not isinstance(self.read_variables, bool):
            raise ConfigError(f"read_variables must be True or False, not {self.read_variables!r:.60}")
        set_(self, "attachments", tuple(self.attachments or ()))
        if self.schema is not None:
            set_(self, "schema", ResponseSchema.of(self.schema))
        if not all(isinstance(a, Attached) for a in self.attachments):
            raise ConfigError("attachments= takes a dict of label -> object, or a list of objects")

    def cell_options(self) -> dict[str, Any]:
        """The request options a cell sets itself: changing one of them is editing the cell."""
        chosen = {"model": self.model, "system": self.system, "temperature": self.temperature,
                  "max_tokens": self.max_tokens, "params": dict(self.params) or None,
                  "tools": list(self.tools) if self.tools is not None else None,
                  "attachments": [a.digest() for a in self.attachments] or None,
                  "read_variables": self.read_variables or None,
                  "schema": self.schema.digest() if self.schema is not None else None}  # fmt: skip
        return {k: v for k, v in chosen.items() if v is not None}


@dataclass(frozen=True)
class PendingTurn:
    """Everything decided before the model is called; nothing is stored until it answers."""

    slot: str  # the slot whose history the request was made from
    base: Tip  # that history: the turn is stored only on it
    user: Message
    model: str
    provider: Provider
    request: ChatRequest
    info: TurnInfo
    fork_before: TurnRecord | None = None  # an edited cell: run on a sibling forked before this turn
    follow: bool = False  # a turn on the current slot: a fork it makes becomes current
    view: View | None = None  # what the request holds, entry by entry
    history: History | None = None  # what it was made from
    options: TurnOptions | None = None
    fold: Fold | None = None  # over budget: what to compact before the request is sent
    compaction: Compaction | None = None  # made for this turn, stored with it
    notes: tuple[str, ...] = ()  # lines for the footer
    tools: ToolRegistry | None = None  # what the model may call in this turn
    branch: str | None = None  # stored on a new branch of ``slot`` so named (a fan-out's model column)
    room: PageRoom = field(default_factory=PageRoom)  # what a page read in a round may take
    reader: Tool[..., str] | None = None  # this turn's read_namespace, offered once a reference is in view
    fit: RequestFit | None = None  # keeps every request of the tool loop within the window

    def made(
        self,
        *,
        view: View,
        tools: ToolRegistry | None,
        request: ChatRequest,
        room: PageRoom,
        reader: Tool[..., str] | None,
        fit: RequestFit,
        notes: tuple[str, ...],
    ) -> PendingTurn:
        """The turn with its view, tools and request made (what ``TurnEngine._made`` makes of
        it, every turn): copied directly, as ``dataclasses.replace`` takes every field through
        the frozen ``__init__`` again."""
        copy = object.__new__(PendingTurn)
        copy.__dict__.update(
            self.__dict__, view=view, tools=tools, request=request, room=room, reader=reader, fit=fit, notes=notes
        )
        return copy

    def recall_cost(self, counting: Counting) -> int:
        """The tokens ``recall``'s definition adds to the request once the turn is compacted
        (0 when the turn offers no tools, or offers it already), counted by ``counting``."""
        assert self.options is not None and self.history is not None and self.history.slot is not None
        chosen = self.options.tools if self.options.tools is not None else self.history.slot.config.tools
        if chosen == () or (self.tools is not None and RECALL in self.tools):
            return 0
        specs = self.tools.specs() if self.tools is not None else []
        has_system = any(m.role == "system" for m in self.request.messages)
        added = counting.counter.count_tools([*specs, recall_spec()], has_system=True)
        return counting.scale(added - counting.counter.count_tools(specs, has_system=has_system))

    def completion_or_raise(self, completion: Completion | None) -> Completion:
        if completion is None:
            raise ProviderError(
                f"the reply from {self.model} ended before it was complete; "
                f"slot {self.slot!r} is unchanged, run the turn again"
            )
        return completion


def request_for(
    view: View, model: str, options: TurnOptions, tools: ToolRegistry | None, *, prompt_cache: bool
) -> ChatRequest:
    """The request a turn sends: ``view``'s messages with ``options`` and ``tools``."""
    messages = view.messages
    if not takes_images(model) and any(m.images for m in messages):
        # Earlier images stay in the history; a model without eyes reads their labels only.
        messages = tuple(replace(m, images=()) if m.images else m for m in messages)
    images = [i for m in messages for i in m.images]
    refused = image_refusal(images, REGISTRY.wire(model), model) if images else None
    if refused is not None:  # more images than the API takes, or one that could not be downscaled
        raise ConfigError(refused)
    return ChatRequest(
        model=parse_model(model)[1],
        messages=messages,
        tools=tuple(tools.specs()) if tools is not None else (),
        temperature=options.temperature,
        max_tokens=options.max_tokens,
        params=dict(options.params),
        prompt_cache=prompt_cache,
        schema=options.schema,
    )
