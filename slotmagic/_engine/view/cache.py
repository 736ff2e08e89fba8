"""Previews kept until anything they were made from may have changed.

Widgets, the sidebar and ``%slot preview`` ask for the same slot's view again and again. A view
is kept under its :class:`~slotmagic._engine.view.inputs.ViewInputs`, which hold everything the
pipeline reads (the history as of the store's generation, which any write moves on): a view
asked for with equal inputs is the one made before. Only previews are kept (see
``ViewInputs.preview``): a turn's view holds its new message and is made once. The session's
active workflow, one of those inputs, is kept alike, per generation: it is read for every view,
kept preview or not.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..._core.workflow import Workflow
from .inputs import ViewInputs
from .view import View

# The least recently made go first, past this many views or entries in all (a full slot's view
# holds an entry per message); the newest always stays. Read at each put (tests lower them).
KEPT_VIEWS = 8
KEPT_ENTRIES = 50_000


class ViewCache:
    """Two kept previews per slot, the newest with tools and without (a preview is made without
    its tools first, then with the tools that view offers: see ``next_view.py``); safe to use from
    several threads (widgets following other kernels ask from a background thread)."""

    def __init__(self) -> None:
        self._views: dict[tuple[str, bool], tuple[ViewInputs, View]] = {}
        self._workflow: tuple[int, Workflow | None] | None = None  # (store generation, active workflow)
        self._lock = threading.Lock()

    def workflow(self, generation: int, read: Callable[[], Workflow | None]) -> Workflow | None:
        """The active workflow at the store's ``generation``: ``read()`` once per generation
        (any write moves it on, so what was read at one generation stands while it does)."""
        kept = self._workflow
        if kept is not None and kept[0] == generation:
            return kept[1]
        workflow = read()
        self._workflow = (generation, workflow)
        return workflow

    def get(self, inputs: ViewInputs) -> View | None:
        """The view made before from equal inputs, if it is kept."""
        if not inputs.preview:
            return None
        with self._lock:
            kept = self._views.get((inputs.slot, bool(inputs.tools)))
        return kept[1] if kept is not None and kept[0] == inputs else None

    def put(self, inputs: ViewInputs, view: View) -> None:
        """Keep ``view`` (made from ``inputs``) when it is a preview."""
        if not inputs.preview:
            return
        with self._lock:
            views = self._views
            key = (inputs.slot, bool(inputs.tools))
            views.pop(key, None)
            views[key] = (inputs, view)
            while len(views) > 1 and (
                len(views) > KEPT_VIEWS or sum(len(v.entries) for _, v in views.values()) > KEPT_ENTRIES
            ):
                del views[next(iter(views))]

    def clear(self) -> None:
        """Forget every kept view (what a new kernel starts with)."""
        with self._lock:
            self._views.clear()
