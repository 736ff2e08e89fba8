"""A step of the view pipeline: every tool call answered right after it, every result after its call.

Both APIs refuse a request otherwise (see :mod:`slotmagic._core.repair`), and a stored history
can break it: a turn cut between a call and its result, a focused view starting after a call.
Repaired here, the preview, the budget and the request hold the same messages: a call no result
answers gets a "not run" result (a ``not_run`` entry, counted like any other), a result without
its call becomes a user message saying so, clashing call ids are told apart, and a stored "not
run" answer that a result supplied by hand follows gives way to it (left out as ``replaced``).

It runs after ``counted`` and counts what it changes or adds itself: a changed message is not
the stored one its position's count is kept for. The wire modules still repair what they are
sent, for requests made without the pipeline (a tool round, a summary, a provider called
directly); on a list repaired here that changes nothing.
"""

from __future__ import annotations

from ..._core.repair import repair_plan
from ..view.view import Omitted, ViewBuild, ViewEntry
from . import step


@step("counting")
def tool_pairs(build: ViewBuild) -> None:
    entries = build.conversation
    for entry in entries:  # a loop, not any(): most views hold no tool exchange to repair
        if entry.message.tool_calls or entry.message.role == "tool":
            break
    else:
        return
    plan = repair_plan([e.message for e in entries])
    if plan is None:
        return
    count = build.counting.count
    out: list[ViewEntry] = []
    call_at: int | None = None  # the stored position of the latest assistant message that called tools
    for message, index in plan:
        if index is None:
            out.append(ViewEntry(message, "not_run", call_at, count(message)))
            continue
        entry = entries[index]
        if message.tool_calls:
            call_at = entry.position
        out.append(
            entry if message is entry.message else ViewEntry(message, entry.kind, entry.position, count(message))
        )
    kept = {index for _, index in plan}
    for index, entry in enumerate(entries):  # a "not run" answer a result supplied later took the place of
        if index not in kept and entry.position is not None:
            build.omitted.append(Omitted(entry.position, entry.position + 1, "replaced"))
    entries[:] = out
