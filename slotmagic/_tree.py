"""A session's branch tree as plain data: what ``session.tree()`` returns and ``%slot tree`` draws.

    tree = session.tree()
    print(tree)                      # the text form
    tree.node("court").children      # ("short",)

Built from the slot list (one store query, counts kept by the store) and, for each slot, the
first words of its last user message, read from the end of its history and cached per slot
and history length (:class:`~slotmagic._snapshot.LastUserCache`), so a tree rebuilt after every
cell reads only what changed.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from typing import Any

from ._core.slots import Slot
from ._render import plural
from ._snapshot import LastUserCache, SessionReader

__all__ = ["SlotTree", "TreeNode", "build_tree"]


@dataclass(frozen=True, slots=True)
class TreeNode:
    """One slot in the tree. ``fork_at`` is how many of its parent's messages it shares.
    For drawing connector lines: ``last`` says whether it is its parent's last child, and
    ``guides`` (one per ancestor below the root) whether that ancestor's line goes on past
    this row, i.e. the ancestor has siblings still to come."""

    id: str
    parent: str | None
    mode: str  # full, focused, readonly
    source: str  # new, derived, static
    messages: int
    tokens: int
    turns: int
    fork_at: int
    current: bool
    last_user: str | None
    depth: int
    children: tuple[str, ...]
    last: bool
    guides: tuple[bool, ...]

    def to_dict(self) -> dict[str, Any]:
        # by hand: dataclasses.asdict deep-copies every field, 100 µs a node
        out = {name: getattr(self, name) for name in _FIELDS}
        out["children"], out["guides"] = list(self.children), list(self.guides)
        return out

    @classmethod
    def from_dict(cls, value: Any) -> TreeNode:
        """A node from :meth:`to_dict`'s form, checked field by field (a ValueError says which
        is wrong): a node read back from a store is data of exactly these types."""
        if not isinstance(value, dict):
            raise ValueError("a tree node is an object")
        kinds: dict[str, tuple[type, ...]] = {
            "id": (str,), "parent": (str, type(None)), "mode": (str,), "source": (str,), "messages": (int,),
            "tokens": (int,), "turns": (int,), "fork_at": (int,), "current": (bool,),
            "last_user": (str, type(None)), "depth": (int,), "last": (bool,),
        }  # fmt: skip
        for name, types in kinds.items():
            if not isinstance(value.get(name), types) or (int in types and isinstance(value.get(name), bool)):
                raise ValueError(f"a tree node's {name} is not valid")
        children, guides = value.get("children"), value.get("guides")
        if not isinstance(children, list) or not all(isinstance(c, str) for c in children):
            raise ValueError("a tree node's children are not valid")
        if not isinstance(guides, list) or not all(isinstance(g, bool) for g in guides):
            raise ValueError("a tree node's guides are not valid")
        fields = {name: value[name] for name in kinds}
        return cls(**fields, children=tuple(children), guides=tuple(guides))

    def describe(self) -> str:
        """One line: mode, counts, fork point and last question."""
        parts = [self.mode if self.source != "static" else f"{self.mode}, static"]
        parts.append(f"{plural(self.turns, 'turn')}, {plural(self.messages, 'message')}, {self.tokens:,} tokens")
        if self.parent is not None:
            parts.append(f"forked at {plural(self.fork_at, 'message')}")
        text = " · ".join(parts)
        return f"{text} · “{self.last_user}”" if self.last_user else text


_FIELDS = tuple(f.name for f in fields(TreeNode))


@dataclass(frozen=True)
class SlotTree:
    """The slots of a session, parents before children (depth first, siblings by fork point
    then id, as the store lists them), with the current slot marked."""

    session: str
    current: str
    model: str
    nodes: tuple[TreeNode, ...]

    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, slot: str) -> TreeNode:
        for node in self.nodes:
            if node.id == slot:
                return node
        raise KeyError(slot)

    @property
    def roots(self) -> tuple[TreeNode, ...]:
        return tuple(n for n in self.nodes if n.parent is None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "current": self.current,
            "model": self.model,
            "nodes": [n.to_dict() for n in self.nodes],
        }

    def to_text(self) -> str:
        """The tree drawn with box characters; ``*`` marks the current slot."""
        lines = [f"session {self.session} · {plural(len(self.nodes), 'slot')} · current slot {self.current}"]
        for node in self.nodes:
            lead = "".join("│  " if on else "   " for on in node.guides)
            if node.depth:
                lead += "└─ " if node.last else "├─ "
            mark = "* " if node.current else "  "
            lines.append(f"{mark}{lead}{node.id}  ({node.describe()})")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def _repr_html_(self) -> str:
        return tree_html(self)


def tree_html(tree: SlotTree) -> str:
    """The tree as nested lists, every text escaped: what a notebook shows where widgets are
    not available (GitHub, nbconvert)."""
    import html  # here: the HTML form is for a saved notebook, not every kernel

    e = html.escape
    by_parent: dict[str | None, list[TreeNode]] = {}
    for node in tree.nodes:
        by_parent.setdefault(node.parent, []).append(node)

    def items(parent: str | None) -> str:
        out = []
        for node in by_parent.get(parent, []):
            name = f"<b>{e(node.id)}</b>" + (" <i>(current)</i>" if node.current else "")
            below = f"<ul>{items(node.id)}</ul>" if node.id in by_parent else ""
            out.append(f"<li>{name} <small>{e(node.describe())}</small>{below}</li>")
        return "".join(out)

    head = f"session {e(tree.session)} · {plural(len(tree.nodes), 'slot')} · current slot <b>{e(tree.current)}</b>"
    return f'<div class="slotmagic-tree"><div>{head}</div><ul>{items(None)}</ul></div>'


def build_tree(
    session: SessionReader,
    cache: LastUserCache | None = None,
    previous: tuple[list[Slot], SlotTree] | None = None,
    slots: list[Slot] | None = None,
) -> SlotTree:
    """The session's tree now. Pass the same ``cache`` to later calls so that only slots whose
    history changed are read again, and ``previous`` (the slot list and the tree made from it
    last time) so that, when no slot was added, removed or moved, only the changed slots' nodes
    are made again (a turn changes one: a tree of 5,000 slots is not rebuilt after each).
    ``slots``: the slot list to build from, when the caller has just read it."""
    cache = cache if cache is not None else LastUserCache()
    slots = slots if slots is not None else session.list_slots()
    texts = cache.texts(session, slots)
    current = next((s.id for s in slots if s.current), None) or session.current_slot
    if previous is not None:
        updated = _updated(previous, slots, current, session, cache)
        if updated is not None:
            return updated
    ids = {s.id for s in slots}
    children: dict[str | None, list[str]] = {}
    for slot in slots:  # the store's order within each parent
        parent = slot.meta.parent_id if slot.meta.parent_id in ids else None
        children.setdefault(parent, []).append(slot.id)
    in_order = _in_order(slots, texts, current, ids, children)
    if in_order is not None:
        return SlotTree(session.session_id, current, session.model, tuple(in_order))
    by_id = {s.id: (s, text) for s, text in zip(slots, texts, strict=True)}
    nodes: list[TreeNode] = []
    # Depth first without recursion (a chain of 5,000 derived slots is 5,000 deep): each entry
    # is (slot id, parent, depth, guides, last), pushed in reverse so children come in order.
    stack: list[tuple[str, str | None, int, tuple[bool, ...], bool]] = []
    roots = children.get(None, [])
    tops = [(root, None, 0, (), i == len(roots) - 1) for i, root in enumerate(roots)]
    while True:
        if not stack:
            if tops:
                stack.append(tops.pop(0))
            elif by_id:  # unreachable (a cycle): shown at the top level all the same
                stack.append((next(iter(by_id)), None, 0, (), True))
            else:
                break
        slot_id, parent, depth, guides, last = stack.pop()
        found = by_id.pop(slot_id, None)
        if found is None:  # seen already (never for a store's tree; a guard against cycles)
            continue
        slot, text = found
        kids = children.get(slot_id, [])
        meta = slot.meta
        nodes.append(
            _node(
                slot.id, parent, slot.config.mode.value, slot.config.source.kind, meta.message_count,
                meta.total_tokens, meta.turns, meta.fork_at, slot.id == current, text, depth, tuple(kids), last,
                guides,
            )
        )  # fmt: skip
        below = (*guides, not last) if depth else ()
        end = len(kids) - 1
        stack.extend((kid, slot_id, depth + 1, below, i == end) for i, kid in reversed(list(enumerate(kids))))
    return SlotTree(session.session_id, current, session.model, tuple(nodes))


def _in_order(
    slots: list[Slot], texts: list[str | None], current: str, ids: set[str], children: dict[str | None, list[str]]
) -> list[TreeNode] | None:
    """The nodes in one pass when ``slots`` are depth first already, as the store lists them
    (each after its parent, every slot below a parent before that parent's next sibling, the
    roots and each parent's children in their order): the walk below would visit them in that
    very order. None when they are not (then the walk orders them)."""
    nodes: list[TreeNode] = []
    path: list[str] = []  # the ancestors of the slot at hand, nearest last
    placed: dict[str, tuple[int, tuple[bool, ...]]] = {}  # id -> (depth, its children's guides)
    roots = children.get(None, [])
    next_root = 0
    guides: tuple[bool, ...]
    for slot, text in zip(slots, texts, strict=True):
        meta = slot.meta
        parent = meta.parent_id if meta.parent_id in ids else None
        while path and path[-1] != parent:
            path.pop()
        if parent is None:
            if next_root >= len(roots) or roots[next_root] != slot.id:
                return None
            next_root += 1
            depth, guides, siblings = 0, (), roots
        else:
            if not path or parent not in placed:
                return None  # not below its parent's line: not depth first
            depth, guides = placed[parent][0] + 1, placed[parent][1]
            siblings = children[parent]
        last = siblings[-1] == slot.id
        kids = children.get(slot.id, ())
        nodes.append(
            _node(
                slot.id, parent, slot.config.mode.value, slot.config.source.kind, meta.message_count,
                meta.total_tokens, meta.turns, meta.fork_at, slot.id == current, text, depth, tuple(kids), last,
                guides,
            )
        )  # fmt: skip
        placed[slot.id] = (depth, (*guides, not last) if depth else ())
        path.append(slot.id)
    return nodes if next_root == len(roots) else None


@contextmanager
def gc_deferred() -> Iterator[None]:
    """Python's cycle collector held off while a tree of thousands of slots is made: it makes
    objects by the tens of thousands and no cycle among them, and the collector, run again and
    again as they are made, walked every object of the process each time (~40% of a tree of
    10,000 slots). It runs as usual after (if it was on)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


(
    _ID, _PARENT, _MODE, _SOURCE, _MESSAGES, _TOKENS, _TURNS, _FORK_AT, _CURRENT, _LAST_USER, _DEPTH, _CHILDREN,
    _LAST, _GUIDES,
) = (getattr(TreeNode, name).__set__ for name in _FIELDS)  # fmt: skip


def _node(
    id: str, parent: str | None, mode: str, source: str, messages: int, tokens: int, turns: int, fork_at: int,
    current: bool, last_user: str | None, depth: int, children: tuple[str, ...], last: bool,
    guides: tuple[bool, ...],
) -> TreeNode:  # fmt: skip
    """A TreeNode of its fields' values, set straight into its slots one after the other: the
    frozen dataclass's ``__init__`` sets each through ``object.__setattr__`` (~3x the time),
    and a tree of 10,000 slots makes 10,000 of them."""
    node = object.__new__(TreeNode)
    _ID(node, id)
    _PARENT(node, parent)
    _MODE(node, mode)
    _SOURCE(node, source)
    _MESSAGES(node, messages)
    _TOKENS(node, tokens)
    _TURNS(node, turns)
    _FORK_AT(node, fork_at)
    _CURRENT(node, current)
    _LAST_USER(node, last_user)
    _DEPTH(node, depth)
    _CHILDREN(node, children)
    _LAST(node, last)
    _GUIDES(node, guides)
    return node


def _updated(
    previous: tuple[list[Slot], SlotTree], slots: list[Slot], current: str, session: SessionReader, cache: LastUserCache
) -> SlotTree | None:
    """The previous tree with the nodes of changed slots made again, or None when a slot was
    added, removed or moved (the tree is then built whole). The store hands back the same
    :class:`Slot` object while nothing it shows changed, so most slots cost an identity check."""
    old_slots, old_tree = previous
    if len(old_slots) != len(slots) or len(old_tree.nodes) != len(slots):
        return None
    nodes = list(old_tree.nodes)
    for i, (old, new) in enumerate(zip(old_slots, slots, strict=True)):
        if old is new:
            continue
        node = nodes[i]
        if (old.id, old.meta.parent_id, old.meta.fork_at) != (new.id, new.meta.parent_id, new.meta.fork_at):
            return None
        if node.id != new.id:
            return None
        nodes[i] = replace(
            node,
            mode=new.mode.value,
            source=new.source.kind,
            messages=new.meta.message_count,
            tokens=new.meta.total_tokens,
            turns=new.meta.turns,
            current=new.id == current,
            last_user=cache.get(session, new),
        )
    return SlotTree(session.session_id, current, session.model, tuple(nodes))
