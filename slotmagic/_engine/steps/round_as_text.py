"""A step of the view pipeline: with thinking on, a last tool round made without it goes as text.

Anthropic's API, with extended thinking on, refuses a request that ends in a tool round whose
assistant message does not open with thinking ("Expected thinking or redacted_thinking, but
found tool_use"): calls another provider made, or a round made while thinking was off, carry
none, and no signature can be made up. It takes the same calls and results told as text
(:func:`~slotmagic.providers._anthropic_plan.round_as_text`). Whether thinking is on is the turn's
``params`` (``ViewInputs.params``), so a preview made with them (``Session.preview(params=…)``)
shows and counts the round as the turn sends it: ``told`` entries at the round's positions.

It runs after ``tool_pairs`` (the round is the repaired one the wire sends) and before
``bare_tools`` (a round told as text needs no tool definitions), and counts what it changes.
The wire module makes the same rewrite for a request made without the pipeline; on a view
this step mended it changes nothing.
"""

from __future__ import annotations

from ...providers._anthropic_plan import request_plan
from ...providers._anthropic_plan import round_as_text as told
from ..view.view import ViewBuild, ViewEntry
from . import step


@step("wire", "params", "counting")
def round_as_text(build: ViewBuild) -> None:
    if build.wire != "anthropic" or not build.params.value:
        return
    plan = request_plan(build.counting.model, build.params.value)
    entries = build.conversation
    messages = told([e.message for e in entries], plan)
    count = build.counting.count
    for index, (entry, message) in enumerate(zip(entries, messages, strict=True)):
        if message is not entry.message:
            entries[index] = ViewEntry(message, "told", entry.position, count(message))
