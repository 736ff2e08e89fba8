"""A step of the view pipeline: a server tool's blocks a request cannot take back go as text.

A Claude reply can hold blocks besides its text and tool calls: a server tool's call and
results (web search), a server-side compaction. They are kept with the message and sent back
whole only to a request that offers that server tool (``params={"tools": [...]}``) or asks for
server-side compaction (``context_management``); any other request is sent what they say, as
text in the message where they came (:func:`~slotmagic.providers._anthropic_plan.blocks_as_text`).
That text is what the model reads, so here, for models whose provider speaks Anthropic's format,
it is put in the view's message and counted, and a preview shows it. A block sent whole is not
text of the message, but the API reads it as input (a search's results, a compaction's summary:
unlike thinking, which it drops from earlier turns), so the message's count adds the block's JSON,
counted as text.

It runs after ``counted`` and counts what it changes (the stored count is of the message
without the blocks' text); a message of nothing but a block whose text is blank sends nothing
and is left out as ``blank``. The wire module makes the same rewrite for a request made without
the pipeline; on a view this step mended it changes nothing.
"""

from __future__ import annotations

from ..._core.messages import Message
from ...providers._anthropic_plan import blocks_as_text as told
from ...providers._anthropic_plan import request_plan
from ...providers._wire import sends_nothing
from ..view.view import Omitted, ViewBuild, ViewEntry
from . import step


@step("wire", "params", "counting")
def blocks_as_text(build: ViewBuild) -> None:
    if build.wire != "anthropic":
        return
    plan = None
    count = build.counting.count
    out: list[ViewEntry] = []
    for entry in build.conversation:
        message = entry.message
        if not any(t.kind == "block" for t in message.thinking):
            out.append(entry)
            continue
        plan = plan or request_plan(build.counting.model, build.params.value)
        message = told(message, plan)
        if message is not entry.message and sends_nothing(message, build.wire):
            if entry.position is not None:
                build.omitted.append(Omitted(entry.position, entry.position + 1, "blank"))
            continue
        tokens = entry.tokens if message is entry.message else count(message)
        out.append(ViewEntry(message, entry.kind, entry.position, tokens + _whole(message, build)))
    build.conversation[:] = out


def _whole(message: Message, build: ViewBuild) -> int:
    """What the blocks ``message`` sends back whole cost: their JSON, counted as text."""
    counting = build.counting
    sent = [t.data for t in message.thinking if t.kind == "block" and t.provider == "anthropic" and t.data]
    return sum(counting.scale(counting.counter.count_text(data)) for data in sent)
