"""A step of the view pipeline: the working-context block.

It goes on the system side of the request, after the system prompt, a compaction's summary,
whatever the slot's mode keeps there and the workflow block (``steps/workflow.py``), so it
counts in the budget's system share and lowers the compaction threshold (seed T1). It adds one
system message, or nothing: the slot's working context as of the history the request is made
from (:meth:`WorkingContext.injection`): the current step always, the other kinds when they
changed within the last ``context_turns`` turns, and everything in the first request after a
compaction (the history has not grown since it was made). When it adds nothing the request is
exactly what it was without it.
"""

from __future__ import annotations

from ..._core.messages import Message
from ..._errors import ConfigError, DamagedRecord
from ..._store.base import History
from ..steps import step
from .view import ViewBuild


def next_turn(history: History) -> int:
    """The number of the turn a request on ``history`` is for. A history cut short (a cell
    edited, forking before a later turn) counts the turns it holds, not its slot's."""
    slot = history.slot
    if slot is not None and len(history) < slot.meta.message_count:
        return max((t.number for t in history.turns()), default=0) + 1
    return history.tip.turns + 1


@step("context_turns", "config", "source")
def context_block(build: ViewBuild) -> None:
    if build.context_turns is None or not build.config.working_context:  # switched off (%ctx off)
        return
    history = build.history
    try:
        context = history.context()
    except (DamagedRecord, ConfigError, KeyError) as exc:  # a change this version cannot read or apply
        slot = history.slot.id if history.slot is not None else "this slot"
        build.problems.append(
            f"the working context of slot {slot} cannot be read ({' '.join(str(exc).split())[:120]}): requests go "
            f"without it; %ctx off --slot {slot} leaves it out for good"
        )
        return
    if context.empty:
        return
    compaction = build.compaction
    first_after_compaction = compaction is not None and compaction.at >= len(history)
    text = context.injection(next_turn(history), build.context_turns, everything=first_after_compaction)
    if text is not None:
        build.system.append(build.inject(Message.system(text), "context"))
