"""The Session's old spellings, kept working: each warns once per call site (a
``DeprecationWarning`` naming the new spelling) and forwards to where the name moved.

The table is the record of what moved; ``docs/guide/python-api.md`` lists it for users.
Type checkers see only the new spellings (the forwarding exists at run time only).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

# old name -> where it lives now, from the session
MOVED: dict[str, str] = {
    # settings of turns
    "max_tool_rounds": "options.max_tool_rounds",
    "prompt_cache": "options.prompt_cache",
    "namespace_threshold": "options.namespace_threshold",
    "context_windows": "options.context_windows",
    "auto_compact": "options.auto_compact",
    "compaction_model": "options.compaction_model",
    "max_concurrency": "options.max_concurrency",
    "allow_variables": "options.allow_variables",
    # the working context
    "working_context_turns": "context.turns",
    "context_updates": "context.updates",
    "context_history": "context.history",
    "change_context": "context.change",
    "add_goal": "context.add_goal",
    "complete_goal": "context.complete_goal",
    "cancel_goal": "context.cancel_goal",
    "decide": "context.decide",
    "ask": "context.ask",
    "resolve": "context.resolve",
    "set_step": "context.set_step",
    "clear_context": "context.clear",
    "context_tools": "context.tools",
    # workflows ("workflow" itself: see _workflow)
    "active_workflow": "workflows.active",
    "use_workflow": "workflows.use",
    "set_workflow_status": "workflows.set_status",
    "set_workflow_current": "workflows.set_current",
    "attach_workflow_step": "workflows.attach_step",
    "delete_workflow": "workflows.delete",
    # compactions
    "compact": "compactions.compact",
    "compaction_draft": "compactions.draft",
    # histories
    "turns": "history.turns",
    "last_message": "history.last_message",
    "last_messages": "history.last_messages",
    "unshared_turns": "history.unshared_turns",
    "stored_reply": "history.stored_reply",
    "read_namespace": "history.read_namespace",
    "search": "history.search",
    "diff": "history.diff",
    "compare": "history.compare",
    "export": "history.export",
    "merge": "history.merge",
    "undo": "history.undo",
    "redo": "history.redo",
    "undo_steps": "history.undo_steps",
    "pin": "history.pin",
    "exclude": "history.exclude",
    "unmark": "history.unmark",
    "marks": "history.marks",
    "gc": "history.gc",
}

# The old workflow(name, edges) did two things; it now is two methods.
_WORKFLOW = "workflows.get(name), or session.workflows.define(name, edges)"


def _follow(obj: object, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _warn(owner: str, name: str, new: str) -> None:
    warnings.warn(f"{owner}.{name} has moved: use session.{new}", DeprecationWarning, stacklevel=3)


class MovedNames:
    """Forwards the old names of :data:`MOVED` (and ``workflow``) to their new places."""

    if not TYPE_CHECKING:  # to a type checker an old name is an unknown attribute, as it should be

        def __getattr__(self, name: str) -> Any:
            if name == "workflow":
                _warn(type(self).__name__, name, _WORKFLOW)
                groups = self.workflows

                def workflow(name: str | None = None, edges: str | None = None) -> Any:
                    return groups.get(name) if edges is None else groups.define(name, edges)

                return workflow
            new = MOVED.get(name)
            if new is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            _warn(type(self).__name__, name, new)
            return _follow(self, new)

        def __setattr__(self, name: str, value: Any) -> None:
            new = MOVED.get(name)
            if new is None:
                object.__setattr__(self, name, value)
                return
            _warn(type(self).__name__, name, new)
            owner, _, attr = new.rpartition(".")
            setattr(_follow(self, owner), attr, value)
