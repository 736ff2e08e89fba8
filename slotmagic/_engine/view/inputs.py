"""What a view is made from, in one frozen, hashable value: :class:`ViewInputs`.

Built once per view (``TurnEngine.view``) and handed to every step of the pipeline; each step
declares the fields it reads (:mod:`..steps`). Two equal inputs make the same view, so the inputs
*are* the key a preview is kept under (:mod:`.cache`): there is no second list of what a
view depends on to keep in step with the first.

The history is the one input that is not a value: it is read lazily from the store. It takes
part as a :class:`Source`, equal to another when both were read from the store at the same
generation (which moves on with every write, ours or another connection's) and the same tip,
else only to itself.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from ..._core.budget import ContextBudget
from ..._core.compaction import Compaction
from ..._core.context import DEFAULT_RECENT_TURNS
from ..._core.messages import Message
from ..._core.request import ToolSpec
from ..._core.slots import SlotConfig
from ..._core.workflow import Workflow

if TYPE_CHECKING:  # named in annotations only: importing this module loads no store, provider or tokenizer
    from ..._core.request import ToolSpec
    from ..._store.base import History
    from ...tokens import TokenCounter


@dataclass(frozen=True, slots=True)
class Counting:
    """How a view's tokens are counted: the model's counter, and for models counted by an
    estimate, the factor that calibrates it. Two countings for the same model and factor are
    equal (a counter is made from its model alone)."""

    counter: TokenCounter = field(compare=False)
    factor: float = 1.0
    model: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", self.counter.model)

    @property
    def encoding(self) -> str:
        return self.counter.encoding

    @property
    def counts_key(self) -> str:
        """What the store keeps this counting's counts under (see ``TokenCounter.counts_key``)."""
        return self.counter.counts_key

    def scale(self, estimate: int) -> int:
        return estimate if self.factor == 1.0 else math.ceil(estimate * self.factor - 1e-9)

    def count(self, message: Message) -> int:
        if self.counter.exact:
            return self.counter.count_message(message)
        if message.images:  # an image costs what its provider's rule says: it is not scaled
            images = self.counter.count_images(message)
            return self.scale(self.counter.count_message(message) - images) + images
        tokens = message.tokens or self.counter.count_message(message)
        return tokens if self.factor == 1.0 else self.scale(tokens)  # (scale inlined: once per message)

    def count_all(self, messages: Sequence[Message]) -> list[int]:
        """``count`` of each message, in one call: a view's messages are counted together."""
        if self.counter.exact or self.factor != 1.0:
            return [self.count(m) for m in messages]
        count = self.counter.count_message
        # an estimate, not scaled: a message's stored count, or the estimate (images as ``count``)
        return [self.count(m) if m.images else m.tokens or count(m) for m in messages]


@dataclass(frozen=True, slots=True, eq=False)
class Source:
    """The history a view is made from. ``stands``: it was read from the store at the
    generation the store is still at, so everything read from it lazily (marks, compactions,
    the working context) is what it was then; such sources are equal when their generation,
    tip and slot are. Any other is equal only to a source of the very same history object."""

    history: History
    stands: bool = False

    def _key(self) -> object:
        history = self.history
        return (history.generation, history.tip, history.slot) if self.stands else history

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Source):
            return NotImplemented
        return self.stands == other.stands and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


@dataclass(frozen=True, slots=True)
class Params:
    """A request's provider parameters (a turn's ``params=``: extended thinking, server tools …),
    equal to another and hashed by their JSON (``key``), as a view's inputs must be."""

    key: str = "{}"
    value: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def of(cls, params: Mapping[str, Any] | None) -> Params:
        if not params:
            return NO_PARAMS
        return cls(json.dumps(params, sort_keys=True, separators=(",", ":")), dict(params))


NO_PARAMS = Params()


@dataclass(frozen=True, slots=True)
class ViewInputs:
    """Everything the view pipeline reads, and nothing else. ``slot`` is the slot's id,
    ``source`` its history; ``prompt`` the system prompt in effect; ``reserve`` what the reply
    may take; ``compaction`` one made for a turn and not stored yet (None: the history's own);
    ``new`` the turn's new message (None for a preview); ``tools`` the definitions the request
    carries; ``workflow`` the session's active one; ``context_turns`` how long a working-context
    change is sent (None: off); ``wire`` the request format the model's provider speaks
    (``ProviderSpec.wire``: "openai", "anthropic", None for one of its own), for the steps that
    mend what that format requires; ``params`` the turn's provider parameters, for the steps whose
    mending depends on them (with thinking on, Anthropic's API takes a last tool round made without
    it only as text). A step reads only the fields it declares (see :mod:`..steps`)."""

    slot: str
    config: SlotConfig
    source: Source
    prompt: str | None
    counting: Counting
    budget: ContextBudget
    reserve: int = 0
    compaction: Compaction | None = None
    new: Message | None = None
    tools: tuple[ToolSpec, ...] = field(default=(), hash=False)  # compared, not hashed: schemas are dicts
    workflow: Workflow | None = None
    context_turns: int | None = DEFAULT_RECENT_TURNS
    wire: str | None = None
    params: Params = NO_PARAMS

    @property
    def preview(self) -> bool:
        """Whether these inputs make a preview of the store as it stands (what is worth keeping):
        no new message, no compaction of a turn's, a history that stands (the tools a turn would
        offer counted or not: see ``next_view.py``)."""
        return self.source.stands and self.new is None and self.compaction is None


# The names a step may declare it reads: every field of the inputs, each one part of the key.
INPUTS = frozenset(f.name for f in fields(ViewInputs) if f.compare)
