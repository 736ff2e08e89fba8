"""A session's branch tree as plain data: what ``session.tree()`` returns and ``%slot tree`` draws.

    tree = session.tree()
    print(tree)                      # the text form
    tree.node("court").children      # ("short",)

Built from the store's plain listing of the slots (``Store.tree_slots``: a few values of each
slot row, in tree order) and the first words of each slot's last user message, read for every
slot at once (``Store.last_messages``: one statement, and a walk back for the rare branch
forked before its parent's last question). A tree made again after a change keeps the nodes
of the slots that did not change, and the last questions of those whose history did not.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple, Protocol

from ._render import plural, thousands
from ._snapshot import last_user_text
from ._store.base import TreeSlot, TreeStore

__all__ = ["SlotTree", "TreeNode", "TreeSource", "build_tree"]


class TreeNode(NamedTuple):
    """One slot in the tree. ``fork_at`` is how many of its parent's messages it shares.
    For drawing connector lines: ``last`` says whether it is its parent's last child, and
    ``guides`` (one per ancestor below the root) whether that ancestor's line goes on past
    this row, i.e. the ancestor has siblings still to come. A tuple: a tree of 10,000 slots
    makes 10,000 of them."""

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
        out = self._asdict()
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
        known = {name: value[name] for name in kinds}
        return cls(**known, children=tuple(children), guides=tuple(guides))

    def describe(self) -> str:
        """One line: mode, counts, fork point and last question."""
        fork_at = None if self.parent is None else self.fork_at
        text = _counts(self.mode, self.source, self.messages, self.tokens, self.turns, fork_at)
        return f"{text} · “{self.last_user}”" if self.last_user else text


@lru_cache(maxsize=4_096)  # a tree of 10,000 slots shows a few distinct ones, each made once
def _counts(mode: str, source: str, messages: int, tokens: int, turns: int, fork_at: int | None) -> str:
    """A node's mode, counts and fork point (None: a root), as its line says them."""
    text = (
        f"{mode if source != 'static' else f'{mode}, static'} · {plural(turns, 'turn')}, "
        f"{plural(messages, 'message')}, {thousands(tokens)} tokens"
    )
    return text if fork_at is None else f"{text} · forked at {plural(fork_at, 'message')}"


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
        # A line is its lead (the mark and connectors), its id and its words: leads are made once
        # for the siblings sharing them and counts once for the slots sharing them (a tree of
        # 10,000 slots is 10,000 lines, each one format).
        leads: dict[tuple[int, tuple[bool, ...], bool, bool], str] = {}
        for node in self.nodes:
            slot, parent, mode, source, messages, tokens, turns, fork_at, current, asked, depth, _, last, guides = node
            lead = leads.get((depth, guides, last, current))
            if lead is None:
                drawn = "".join("│  " if on else "   " for on in guides) + (("└─ " if last else "├─ ") if depth else "")
                lead = leads[depth, guides, last, current] = ("* " if current else "  ") + drawn
            said = _counts(mode, source, messages, tokens, turns, None if parent is None else fork_at)
            lines.append(f"{lead}{slot}  ({said} · “{asked}”)" if asked else f"{lead}{slot}  ({said})")
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


class TreeSource(Protocol):
    """What a tree is made from: a :class:`~slotmagic.Session` is one."""

    @property
    def session_id(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def current_slot(self) -> str: ...

    @property
    def store(self) -> TreeStore: ...


def build_tree(
    session: TreeSource,
    listing: tuple[list[TreeSlot], list[str | None]] | None = None,
    previous: tuple[list[TreeSlot], SlotTree] | None = None,
) -> SlotTree:
    """The session's tree now, from ``listing`` (``Store.tree_slots``, read with the last
    questions when not given). With ``previous`` (the listing and the tree made from it last
    time), the nodes of slots that did not change are kept, and so are the last questions of
    slots whose history did not (a turn changes one slot: a tree of 5,000 slots is not made
    again after each), and the listing need not hold the questions."""
    slots, read = listing if listing is not None else session.store.tree_slots(session.session_id, questions=True)
    current = next((s.id for s in slots if s.current), None) or session.current_slot
    if previous is not None:
        updated = _updated(session, slots, current, previous)
        if updated is not None:
            return updated
    if read:
        questions = _shortened(read)
    else:
        kept = {} if previous is None else _kept(previous[0], previous[1].nodes, range(len(previous[0])))
        questions = _questions(session, slots, kept)
    children: dict[str | None, list[str]] = {}
    for slot in slots:
        children.setdefault(slot.parent, []).append(slot.id)
    # The store lists the slots depth first (each after its parent, a parent's subtree before
    # its next sibling): one pass places each below its parent.
    placed: dict[str | None, tuple[int, tuple[bool, ...], list[str]]] = {None: (0, (), children.get(None, []))}
    nodes = []
    new = tuple.__new__  # a node made as a tuple is (TreeNode(...) is a Python call, 3x the time)
    for (slot_id, parent, mode, source, messages, tokens, turns, fork_at, is_current, _), question in zip(
        slots, questions, strict=True
    ):
        depth, guides, siblings = placed[parent]  # its depth, guides and siblings, as its parent placed them
        last = siblings[-1] == slot_id
        kids = children.get(slot_id)
        if kids is not None:
            placed[slot_id] = (depth + 1, (*guides, not last) if depth else (), kids)
        nodes.append(
            new(
                TreeNode, (slot_id, parent, mode, source, messages, tokens, turns, fork_at, is_current, question, depth,
                () if kids is None else tuple(kids), last, guides),
            )
        )  # fmt: skip
    return SlotTree(session.session_id, current, session.model, tuple(nodes))


def _updated(
    session: TreeSource, slots: list[TreeSlot], current: str, previous: tuple[list[TreeSlot], SlotTree]
) -> SlotTree | None:
    """The previous tree with the nodes of changed slots made again, or None when a slot was
    added, removed, renamed or moved (the tree is then made whole)."""
    old_slots, old_tree = previous
    if len(old_slots) != len(slots):
        return None
    changed = []
    for i, (old, new) in enumerate(zip(old_slots, slots, strict=True)):
        if old != new:
            if (old.id, old.parent, old.fork_at) != (new.id, new.parent, new.fork_at):
                return None
            changed.append(i)
    nodes = list(old_tree.nodes)
    questions = _questions(session, [slots[i] for i in changed], _kept(old_slots, nodes, changed))
    for i, question in zip(changed, questions, strict=True):
        new = slots[i]
        nodes[i] = nodes[i]._replace(
            mode=new.mode, source=new.source, messages=new.messages, tokens=new.tokens, turns=new.turns,
            current=new.current, last_user=question,
        )  # fmt: skip
    return SlotTree(session.session_id, current, session.model, tuple(nodes))


def _kept(
    slots: Sequence[TreeSlot], nodes: Sequence[TreeNode], at: Iterable[int]
) -> dict[str, tuple[float, int, str | None]]:
    """Slot id -> (its row's creation, its length, its last question), of a tree made before."""
    return {slots[i].id: (slots[i].created_at, slots[i].messages, nodes[i].last_user) for i in at}


def _questions(
    session: TreeSource, slots: Sequence[TreeSlot], kept: dict[str, tuple[float, int, str | None]]
) -> list[str | None]:
    """Each slot's last question: the one ``kept`` for the same history (the same row, as
    long: histories only grow), else read, those of every such slot at once."""
    out: list[str | None] = []
    missing: dict[str, int] = {}
    for slot in slots:
        was = kept.get(slot.id)
        if was is not None and was[0] == slot.created_at and was[1] == slot.messages:
            out.append(was[2])
        else:
            missing[slot.id] = len(out)
            out.append(None)
    if missing:
        found = session.store.last_messages(session.session_id, missing, "user")
        for i, text in zip(
            missing.values(), _shortened([None if m is None else m.content for m in found.values()]), strict=True
        ):
            out[i] = text
    return out


def _shortened(texts: list[str | None]) -> list[str | None]:
    """Each text's first words on one line; a text branches share is shortened once."""
    done: dict[str, str] = {}
    out: list[str | None] = []
    for text in texts:
        if text is None:
            out.append(None)
            continue
        short = done.get(text)
        if short is None:
            short = done[text] = last_user_text(text)
        out.append(short)
    return out
