"""The JupyterLab sidebar's comm protocol: every message the kernel sends and receives.

``labextension/src/protocol.ts`` is the front end's copy: an interface there for each
``TypedDict`` here, under the names ``tests/test_protocol.py`` pairs them by, which checks their
fields (and ``TARGET`` and ``PROTOCOL``) against each other, and the messages a real session's
sidebar sends against these. The comm's life and when the kernel sends what are
``slotmagic/_magics/sidebar.py``'s (its docstring). Plain values, in core: ``_snapshot.py``
builds the ``state`` message and ``_magics/sidebar.py`` sends it.
"""

# No ``from __future__ import annotations``: a TypedDict reads ``NotRequired`` from its
# annotations when the class is made, and a string annotation would hide it.
from typing import Final, Literal, NotRequired, TypedDict

__all__ = [
    "PROTOCOL",
    "TARGET",
    "Action",
    "BudgetInfo",
    "BudgetPart",
    "DeleteAction",
    "DeriveAction",
    "ErrorMessage",
    "KernelMessage",
    "RefreshAction",
    "RenameAction",
    "SlotInfo",
    "StateMessage",
    "SwitchAction",
    "WorkflowInfo",
]

# The comm target, in the kernel (both sides name it).
TARGET: Final = "slotmagic.sidebar"
# Sent in every state; a panel of another version says what to install instead of guessing.
PROTOCOL: Final = 1

# -- kernel -> front end ----------------------------------------------------------------------------


class SlotInfo(TypedDict):
    """One slot of the session (``ISlotInfo``)."""

    id: str
    parent: str | None  # the nearest live ancestor; None for a root slot
    mode: str  # "full" | "focused" | "readonly"
    source: str  # "new" | "derived" | "static"
    messages: int
    tokens: int
    turns: int
    current: bool
    last_user: str | None  # the first words (at most 80 characters, one line) of its last user message


class BudgetPart(TypedDict):
    """One part of the budget: system, history, tools, tool_results, reserve ... (``IBudgetPart``)."""

    used: int
    limit: int


class BudgetInfo(TypedDict):
    """The current slot's next request against its budget (``IBudget``; the panel turns
    ``parts``, keyed by name here, into a list)."""

    window: int
    total: int  # the slot's own budget (--budget), else the model's window
    used: int
    parts: dict[str, BudgetPart]
    threshold: int  # where compaction starts: history and tool results past this many tokens


class WorkflowInfo(TypedDict):
    """The session's active workflow (``IWorkflow``)."""

    name: str
    current: str | None
    completed: int
    total: int
    next: list[str]


class StateMessage(TypedDict):
    """The whole state, after every change (``IStateMessage``)."""

    type: Literal["state"]
    protocol: int
    session: str
    current: str
    model: str
    slots: list[SlotInfo]  # in creation order: a parent before its children
    budget: BudgetInfo | None
    workflow: WorkflowInfo | None  # None when no workflow is active
    request: NotRequired[int]  # the ``request`` of the action this answers


class ErrorMessage(TypedDict):
    """An action failed, or the session cannot be read (``IErrorMessage``)."""

    type: Literal["error"]
    message: str  # one line, for the user
    kind: NotRequired[str]  # the error's class name, e.g. "SlotNotEmpty"
    request: NotRequired[int]


KernelMessage = StateMessage | ErrorMessage

# -- front end -> kernel: each answered with a state (to every comm) or an error (to the asker) -----


class RefreshAction(TypedDict):
    """``IRefreshAction``."""

    type: Literal["refresh"]
    request: NotRequired[int]  # echoed in the answer


class SwitchAction(TypedDict):
    """``ISwitchAction``."""

    type: Literal["switch"]
    slot: str
    request: NotRequired[int]


class DeriveAction(TypedDict):
    """``IDeriveAction``: derive ``new`` from ``slot`` and switch to it, as ``%slot derive`` does."""

    type: Literal["derive"]
    slot: str
    new: str
    request: NotRequired[int]


class RenameAction(TypedDict):
    """``IRenameAction``."""

    type: Literal["rename"]
    slot: str
    new: str
    request: NotRequired[int]


class DeleteAction(TypedDict):
    """``IDeleteAction``: ``force`` deletes a slot holding turns no other slot shares."""

    type: Literal["delete"]
    slot: str
    force: bool
    request: NotRequired[int]


Action = RefreshAction | SwitchAction | DeriveAction | RenameAction | DeleteAction
