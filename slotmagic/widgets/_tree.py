"""``%slot tree``: the session's branch tree, live. Click a slot to make it current; its menu
(right click, or the ⋯ button) derives, renames or deletes it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from traitlets import Dict, List, Unicode

from .._errors import SlotNotEmpty
from ._base import SessionSource, SessionWidget, asset, text_of

if TYPE_CHECKING:
    from .._tree import SlotTree
    from ..session import Session
    from ._live import LiveWidgets

__all__ = ["COLLAPSE_OVER", "SlotTreeWidget"]

COLLAPSE_OVER = 40  # a tree larger than this starts with the subtrees off the current path collapsed
PATCH_MAX = 64  # more changed slots than this (or a changed shape) sends the whole tree again


class SlotTreeWidget(SessionWidget):
    """The slot tree (:meth:`Session.tree`) as a widget: ``nodes`` in tree order, the current
    slot, and which subtrees the user collapsed."""

    _esm = asset("static.js", "tree.js")
    _css = asset("common.css", "tree.css")

    session_id = Unicode().tag(sync=True)
    current = Unicode().tag(sync=True)
    nodes = List(Dict(), help="TreeNode.to_dict() of each slot, parents first, as last sent whole").tag(sync=True)
    changed = Dict(
        help="slot id -> TreeNode.to_dict() of the slots changed since `nodes` was sent (a turn changes one "
        "slot's counts: only that slot travels); the view shows `nodes` with these in their place"
    ).tag(sync=True)
    collapsed = List(Unicode(), help="slots whose subtree is folded away (set by the front end)").tag(sync=True)

    def __init__(self, session: Session | SessionSource, *, live: LiveWidgets | None = None, **kwargs: Any) -> None:
        self._tree: SlotTree | None = None
        super().__init__(session, live=live, **kwargs)
        assert self._tree is not None
        if len(self._tree) > COLLAPSE_OVER:
            on_path = _ancestors(self._tree, self._tree.current)
            self.collapsed = [n.id for n in self._tree.nodes if n.children and n.depth >= 1 and n.id not in on_path]

    @property
    def tree(self) -> SlotTree:
        assert self._tree is not None
        return self._tree

    def _update(self, session: Session) -> None:
        tree = session.tree()
        previous, self._tree = self._tree, tree
        if tree is previous:  # nothing changed since the last refresh (the session keeps it)
            return
        self.session_id = tree.session
        self.current = tree.current
        if previous is not None and _shape(previous) == _shape(tree):
            # the same slots in the same places: send only the ones whose counts changed
            changed = dict(self.changed)
            for old, new in zip(previous.nodes, tree.nodes, strict=True):
                if old != new:
                    changed[new.id] = new.to_dict()
            if len(changed) <= PATCH_MAX:
                if changed != self.changed:
                    self.changed = changed
                return
        with self.hold_sync():
            self.nodes = [n.to_dict() for n in tree.nodes]
            self.changed = {}
        ids = {n.id for n in tree.nodes}
        if any(c not in ids for c in self.collapsed):
            self.collapsed = [c for c in self.collapsed if c in ids]

    @staticmethod
    def rebuilt(state: Mapping[str, Any]) -> dict[str, Any]:
        """A stored state, each node checked as a :class:`~slotmagic._tree.TreeNode` (a
        ValueError names what is wrong: the record is then skipped)."""
        from .._tree import TreeNode

        out = dict(state)
        out["nodes"] = [TreeNode.from_dict(n).to_dict() for n in out.get("nodes") or []]
        out["changed"] = {k: TreeNode.from_dict(n).to_dict() for k, n in (out.get("changed") or {}).items()}
        return out

    def shown(self) -> list[dict[str, Any]]:
        """The nodes as the view shows them: ``nodes`` with the ``changed`` ones in their place."""
        changed = self.changed
        return [changed.get(n["id"], n) for n in self.nodes]

    def to_text(self) -> str:
        # made when asked (the static form, at display), not at every refresh: 5,000 lines
        return self.tree.to_text()

    def to_html(self) -> str:
        return self.tree._repr_html_()

    def _act(self, session: Session, content: Mapping[str, Any]) -> str:
        action = content.get("type")
        slot = text_of(content, "slot")
        if action == "switch":
            session.switch_slot(slot)
            return f"switched to slot {slot}"
        if action == "derive":
            new = text_of(content, "new")
            made = session.derive_slot(new, parent=slot)
            session.switch_slot(made.id)  # as %slot derive does
            return f"slot {made.id} derived from {slot}; switched to it"
        if action == "rename":
            new = text_of(content, "new")
            session.rename_slot(slot, new)
            return f"renamed slot {slot} to {new}"
        if action == "delete":
            was_current = session.current_slot == slot
            try:
                session.delete_slot(slot, force=content.get("force") is True)
            except SlotNotEmpty as exc:  # the view asks again: say it without the --force advice
                turns = f"{exc.turns} turn{'' if exc.turns == 1 else 's'}"
                setattr(exc, "widget_text", f"Slot {slot} holds {turns} that no other slot has.")  # noqa: B010
                raise
            after = f"; current slot is now {session.current_slot}" if was_current else ""
            return f"deleted slot {slot}{after}"
        raise ValueError(f"the tree widget sent an unknown action {action!r}")


def _shape(tree: SlotTree) -> list[tuple[Any, ...]]:
    """What places the slots: ids, parents and connector lines (not counts, questions or the current mark)."""
    return [(n.id, n.parent, n.depth, n.children, n.last, n.guides) for n in tree.nodes]


def _ancestors(tree: SlotTree, slot: str) -> set[str]:
    parents = {n.id: n.parent for n in tree.nodes}
    found: set[str] = set()
    node: str | None = slot
    while node is not None and node not in found:
        found.add(node)
        node = parents.get(node)
    return found
