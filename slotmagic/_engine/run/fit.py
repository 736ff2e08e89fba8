"""Every request of a turn fits its window: the tool loop's later requests are counted before
they leave, and shortened when they would not fit.

The first request of a turn fits by the budget (the view pipeline, then compaction). The tool
loop adds the model's calls and their results round after round; :class:`RequestFit` counts
each next request as the view counts it (messages, tool definitions, the reply's priming) and,
past the limit (the budget less the reply's reserve), shortens tool results to their namespace
reference and a one-line preview, oldest first, keeping aside first what is not yet so that
every reference reads. Pages read by ``read_namespace`` and ``recall`` are cut to fit when they
are read and never shortened. When nothing more can go, the loop ends the turn there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..._core.request import ChatRequest
from ..._namespace import Namespace
from ..view.inputs import Counting
from ..view.tool_results import kept_aside_by, shortened
from .reading import READERS

_PER_RESULT = 10  # tokens a tool result message costs besides its text (role, id, framing)
_SHORT_RESULT = 80  # what a result shortened to its reference costs, about
_MARGIN = 32  # for what may join the next request's tool definitions (read_namespace)


@dataclass
class RequestFit:
    """Counts a turn's requests and keeps each within ``limit`` tokens."""

    counting: Counting
    limit: int
    namespace: Namespace

    def tokens(self, request: ChatRequest) -> int:
        """Every prompt token of ``request``, as the view counts them."""
        counter = self.counting.counter
        first = next((m.content for m in request.messages if m.role == "system"), None)
        tools = self.counting.scale(counter.count_tools_after(request.tools, first))
        return sum(self.counting.count(m) for m in request.messages) + tools + counter.priming

    def room_per_page(self, pending: ChatRequest, readers: int, others: int) -> int:
        """Tokens each of ``readers`` pages may take once ``pending`` (the request so far with
        the reply that asked for them) is sent again with every result of the round: what is
        left, and what shortening its tool results would free."""
        left = self.limit - self.tokens(pending) + self.spare(pending) - _MARGIN
        left -= others * (_SHORT_RESULT + _PER_RESULT) + readers * _PER_RESULT
        return max(0, left // max(1, readers))

    def spare(self, request: ChatRequest) -> int:
        """Tokens that shortening every tool result of ``request`` (pages read aside) would free."""
        freed = 0
        for message in request.messages:
            if message.role == "tool" and message.name not in READERS:
                short = shortened(message)
                if short is not None:
                    freed += max(0, self.counting.count(message) - self.counting.count(short))
        return freed

    def fit(self, request: ChatRequest) -> ChatRequest | None:
        """``request`` as it is when it fits; else with tool results shortened, oldest first,
        until it does (pages read in this turn last); None when even that is not enough."""
        total = self.tokens(request)
        if total <= self.limit:
            return request
        messages = list(request.messages)
        results = [i for i, m in enumerate(messages) if m.role == "tool"]
        pages_last = [i for i in results if messages[i].name not in READERS] + [
            i for i in results if messages[i].name in READERS
        ]
        for i in pages_last:
            message = messages[i]
            short = shortened(message)
            if short is None:
                continue
            saved = self.counting.count(message) - self.counting.count(short)
            if saved <= 0:
                continue
            if kept_aside_by(short, message):
                self.namespace.keep(message.name or "tool", message.content)
            messages[i] = short
            total -= saved
            if total <= self.limit:
                return replace(request, messages=tuple(messages))
        return None
