"""Workflows (seed T4): a DAG of steps with statuses and a current step, and what the model is
told about it.

A workflow is written as an edge list, one edge per line::

    intake -> research
    research -> draft [if the facts are clear]
    research -> more-facts [if something is missing]
    more-facts -> draft
    draft                      # a step on its own line is allowed too

``#`` starts a comment (outside a ``[label]``). A step's name is one word: letters, digits,
``-``, ``_`` or ``.``. A self-loop, a cycle, a repeated edge, two spellings of one name
(``Draft`` and ``draft``) and any line that is not one of the forms above are refused with
the line quoted, in one ``ConfigError`` line.

Each step has a status (pending, in progress, done, blocked) and may be attached to the slot
where it is explored; one step is current. The block injected into the system side of
requests (:meth:`Workflow.block`) says the workflow's name, how many steps are done, the path
from the root to the current step with statuses, the current step, the next steps up to two
levels ahead with their edge labels, and the blocked steps.

Everything here is pure: parsing, checks, changes (each returns a new ``Workflow``), text and
the graph for a widget (:meth:`Workflow.to_graph`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .._errors import ConfigError, closest
from .checks import check_text
from .context import STEP_STATUSES, StepStatus
from .sidebar_protocol import WorkflowInfo

_NAME = re.compile(r"[\w.-]{1,64}\Z")  # a step's or a workflow's name (\w: letters of any script)
_LABELED = re.compile(r"(?P<target>.*?)\s*\[(?P<label>[^\[\]]*)\]\s*\Z", re.DOTALL)
_RANK: dict[str, int] = {"done": 0, "in_progress": 1, "blocked": 2, "pending": 3}
MAX_LEVELS = 2  # how far ahead the block looks


@dataclass(frozen=True, slots=True)
class WorkflowNode:
    id: str
    status: StepStatus = "pending"
    slot: str | None = None  # the slot where this step is explored


@dataclass(frozen=True, slots=True)
class WorkflowEdge:
    source: str
    target: str
    label: str | None = None


def check_workflow_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"invalid workflow name {name!r}: use 1-64 letters, digits, '-', '_' or '.'")
    return name


def no_workflow(name: str, names: Sequence[str]) -> ConfigError:
    """The error for a workflow that is not there, with the closest name or the known ones."""
    close = closest(name, names)
    if close:
        hint = f"did you mean {close!r}?"
    elif names:
        hint = f"its workflows are {', '.join(names)}"
    else:
        hint = "define one with %%workflow NAME (session.workflows.define(name, edges) in Python)"
    return ConfigError(f"no workflow {name!r} in this session; {hint}")


def _strip_comment(line: str) -> str:
    """The line without its ``#`` comment (a ``#`` inside ``[...]`` is part of the label)."""
    depth = 0
    for i, char in enumerate(line):
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        elif char == "#" and depth == 0:
            return line[:i]
    return line


def parse_edges(name: str, body: str) -> tuple[tuple[str, ...], tuple[WorkflowEdge, ...]]:
    """The steps (in the order they first appear) and edges of a workflow's body; every
    mistake is one ``ConfigError`` quoting its line."""
    check_text(body, f"the body of workflow {name!r}")
    nodes: dict[str, tuple[str, int]] = {}  # casefolded name -> (name as written, line number)
    edges: list[tuple[WorkflowEdge, int, str]] = []  # edge, line number, line text
    lines = body.splitlines()

    def where(number: int) -> str:
        return f'workflow {name!r}, line {number} "{lines[number - 1].strip()}"'

    def node(word: str, number: int) -> str:
        if not _NAME.match(word):
            what = "a step's name is missing" if not word else f"step name {word!r} is not one word"
            raise ConfigError(
                f"{where(number)}: {what}; write `step -> next [label]` or a step's name alone "
                "(names: letters, digits, '-', '_' or '.')"
            )
        seen = nodes.get(word.casefold())
        if seen is None:
            nodes[word.casefold()] = (word, number)
        elif seen[0] != word:
            raise ConfigError(
                f"{where(number)}: step {word!r} is named {seen[0]!r} on line {seen[1]}; "
                "spell a step the same way every time"
            )
        return word

    for number, raw in enumerate(lines, 1):
        line = _strip_comment(raw).strip()
        if not line:
            continue
        if "->" not in line:
            if "[" in line or "]" in line:
                raise ConfigError(f"{where(number)}: a label belongs to an edge: `step -> next [label]`")
            node(line, number)
            continue
        source, _, rest = line.partition("->")
        if "->" in rest:
            raise ConfigError(f"{where(number)}: one edge per line (`a -> b`, then `b -> c` on the next line)")
        label: str | None = None
        labeled = _LABELED.match(rest.strip())
        if labeled is not None:
            rest, label = labeled["target"], " ".join(labeled["label"].split())
            if not label:
                raise ConfigError(f"{where(number)}: the label is empty; write it between the brackets or drop them")
        elif "[" in rest or "]" in rest:
            raise ConfigError(f"{where(number)}: a label is one [bracketed text] at the end of the line")
        a, b = node(source.strip(), number), node(rest.strip(), number)
        if a == b:
            raise ConfigError(f"{where(number)}: {a!r} leads to itself; a step cannot be its own next step")
        for earlier, at, _ in edges:
            if (earlier.source, earlier.target) == (a, b):
                raise ConfigError(f"{where(number)}: repeats the edge {a} -> {b} of line {at}; keep one of them")
        cycle = _path(b, a, [e for e, _, _ in edges])
        if cycle is not None:
            loop = " -> ".join([a, *cycle])
            raise ConfigError(f"{where(number)}: closes a cycle {loop}; a workflow cannot lead back to a step")
        edges.append((WorkflowEdge(a, b, label), number, line))
    if not nodes:
        raise ConfigError(f"workflow {name!r} has no steps: write one edge per line, e.g. `intake -> research`")
    return tuple(n for n, _ in nodes.values()), tuple(e for e, _, _ in edges)


def _path(start: str, goal: str, edges: Sequence[WorkflowEdge]) -> list[str] | None:
    """A path from ``start`` to ``goal`` along ``edges`` (both ends included), or None."""
    children: dict[str, list[str]] = {}
    for e in edges:
        children.setdefault(e.source, []).append(e.target)
    stack, parent = [start], {start: start}
    while stack:
        here = stack.pop()
        if here == goal:
            out = [here]
            while out[-1] != start:
                out.append(parent[out[-1]])
            return out[::-1]
        for child in children.get(here, []):
            if child not in parent:
                parent[child] = here
                stack.append(child)
    return None


@dataclass(frozen=True)
class Workflow:
    """A named DAG of steps with statuses, the current step, and which is the active workflow."""

    name: str
    body: str
    nodes: tuple[WorkflowNode, ...]
    edges: tuple[WorkflowEdge, ...]
    current: str | None = None
    active: bool = False  # the session's active workflow (set by the store when read)

    @classmethod
    def define(cls, name: str, body: str) -> Workflow:
        """A new workflow from its edge list; its first root is the current step."""
        check_workflow_name(name)
        ids, edges = parse_edges(name, body)
        made = cls(name, body, tuple(WorkflowNode(i) for i in ids), edges)
        return replace(made, current=made.roots()[0])

    def redefine(self, body: str) -> Workflow:
        """This workflow with a new body: steps that still exist keep their status and slot,
        and the current step stays unless it is gone (then the first root is current)."""
        ids, edges = parse_edges(self.name, body)
        old = {n.id: n for n in self.nodes}
        nodes = tuple(old.get(i, WorkflowNode(i)) for i in ids)
        made = replace(self, body=body, nodes=nodes, edges=edges)
        return made if made.current in ids else replace(made, current=made.roots()[0])

    def same_definition(self, body: str) -> bool:
        """Whether ``body`` defines exactly these steps and edges."""
        ids, edges = parse_edges(self.name, body)
        return ids == tuple(n.id for n in self.nodes) and edges == self.edges

    def replace(self, **changes: Any) -> Workflow:
        return replace(self, **changes)

    # -- reading ---------------------------------------------------------------------------

    def node(self, node_id: object) -> WorkflowNode:
        found = next((n for n in self.nodes if n.id == node_id), None)
        if found is None:
            ids = [n.id for n in self.nodes]
            close = closest(str(node_id), ids)
            hint = f"did you mean {close!r}?" if close else f"its steps are {', '.join(ids)}"
            raise ConfigError(f"workflow {self.name!r} has no step {node_id!r}; {hint}")
        return found

    def roots(self) -> list[str]:
        targets = {e.target for e in self.edges}
        return [n.id for n in self.nodes if n.id not in targets]

    def children(self, node_id: str) -> list[WorkflowEdge]:
        return [e for e in self.edges if e.source == node_id]

    def parents(self, node_id: str) -> list[WorkflowEdge]:
        return [e for e in self.edges if e.target == node_id]

    @property
    def completed(self) -> int:
        return sum(1 for n in self.nodes if n.status == "done")

    @property
    def total(self) -> int:
        return len(self.nodes)

    def ordered(self) -> list[WorkflowNode]:
        """The steps in an order where every step comes after the steps leading to it (ties
        in the order they were written)."""
        pending = {n.id: len(self.parents(n.id)) for n in self.nodes}
        out: list[WorkflowNode] = []
        ready = [n for n in self.nodes if pending[n.id] == 0]
        while ready:
            here = ready.pop(0)
            out.append(here)
            for e in self.children(here.id):
                pending[e.target] -= 1
                if pending[e.target] == 0:
                    ready.append(self.node(e.target))
            ready.sort(key=lambda n: self.nodes.index(n))
        return out

    def path(self) -> list[tuple[WorkflowNode, str | None]]:
        """The steps from a root to the current step, each with the label of the edge that
        led to it. Where several steps lead to one, the path goes through the one furthest
        along (done, then in progress, blocked, pending), then the first written."""
        if self.current is None:
            return []
        out: list[tuple[WorkflowNode, str | None]] = []
        here: str | None = self.current
        while here is not None:
            parents = self.parents(here)
            best = min(parents, key=lambda e: (_RANK[self.node(e.source).status], self.edges.index(e)), default=None)
            out.append((self.node(here), best.label if best is not None else None))
            here = best.source if best is not None else None
        return out[::-1]

    def next_steps(self, levels: int = MAX_LEVELS) -> list[tuple[int, WorkflowEdge]]:
        """The edges out of the current step and, below each, the edges out of its target, up
        to ``levels`` deep: (depth, edge) in reading order."""
        out: list[tuple[int, WorkflowEdge]] = []

        def walk(node_id: str, depth: int) -> None:
            if depth > levels:
                return
            for edge in self.children(node_id):
                out.append((depth, edge))
                walk(edge.target, depth + 1)

        if self.current is not None:
            walk(self.current, 1)
        return out

    def blocked(self) -> list[WorkflowNode]:
        return [n for n in self.nodes if n.status == "blocked"]

    # -- changes (each a new Workflow) ------------------------------------------------------

    def with_status(self, node_id: str, status: object) -> Workflow:
        if status not in STEP_STATUSES:
            raise ConfigError(f"a step's status is one of {', '.join(STEP_STATUSES)}, not {status!r}")
        found = self.node(node_id)
        nodes = tuple(replace(n, status=status) if n is found else n for n in self.nodes)
        return replace(self, nodes=nodes)

    def with_current(self, node_id: str) -> Workflow:
        return replace(self, current=self.node(node_id).id)

    def with_slot(self, node_id: str, slot: str | None) -> Workflow:
        found = self.node(node_id)
        return replace(self, nodes=tuple(replace(n, slot=slot) if n is found else n for n in self.nodes))

    # -- what the model is sent -------------------------------------------------------------

    def block(self) -> str:
        """The block on the system side of requests while this workflow is active."""
        lines = [f"Workflow {self.name}: {self.completed} of {self.total} steps done."]
        path = self.path()
        if path:
            shown = [(f"[{label}] " if label else "") + f"{node.id} ({_status(node.status)})" for node, label in path]
            lines.append("Path: " + " -> ".join(shown))
            current = path[-1][0]
            where = f"; explored in slot {current.slot}" if current.slot else ""
            lines.append(f"Current step: {current.id} ({_status(current.status)}{where})")
        steps = self.next_steps()
        if steps:
            lines.append("Next steps:")
            lines += [f"{'  ' * (depth - 1)}- {self._edge_text(edge)}" for depth, edge in steps]
        blocked = self.blocked()
        if blocked:
            lines.append("Blocked: " + ", ".join(n.id for n in blocked))
        return "\n".join(lines)

    def _edge_text(self, edge: WorkflowEdge) -> str:
        status = self.node(edge.target).status
        text = edge.target + (f" [{edge.label}]" if edge.label else "")
        return text + ("" if status == "pending" else f" ({_status(status)})")

    # -- for people and widgets -------------------------------------------------------------

    def to_text(self) -> str:
        """Every step with its status, slot and next steps; ``*`` marks the current one."""
        active = " (active)" if self.active else ""
        head = f"workflow {self.name}{active} · {self.completed} of {self.total} done · current: {self.current or '-'}"
        nodes = self.ordered()
        width = max(len(n.id) for n in nodes)
        lines = [head]
        for n in nodes:
            marker = "*" if n.id == self.current else " "
            after = ", ".join(e.target + (f" [{e.label}]" if e.label else "") for e in self.children(n.id))
            slot = f"  slot: {n.slot}" if n.slot else ""
            arrow = f"  -> {after}" if after else ""
            lines.append(f"{marker} {n.id:<{width}}  {n.status:<11}{arrow}{slot}".rstrip())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def to_graph(self) -> dict[str, Any]:
        """The workflow as plain data for a widget."""
        return {
            "name": self.name,
            "current": self.current,
            "nodes": [{"id": n.id, "status": n.status, "slot": n.slot} for n in self.nodes],
            "edges": [{"from": e.source, "to": e.target, "label": e.label} for e in self.edges],
        }

    def summary(self) -> WorkflowInfo:
        """What the JupyterLab sidebar shows (its ``workflow`` field)."""
        nxt = [e.target for depth, e in self.next_steps(1)]
        return {
            "name": self.name,
            "current": self.current,
            "completed": self.completed,
            "total": self.total,
            "next": nxt,
        }

    # -- stored form ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": 1,
            "body": self.body,
            "current": self.current,
            "status": {n.id: n.status for n in self.nodes if n.status != "pending"},
            "slots": {n.id: n.slot for n in self.nodes if n.slot},
        }

    @classmethod
    def from_dict(cls, name: str, data: Mapping[str, Any], *, active: bool = False) -> Workflow:
        """A stored workflow: its body parsed again, statuses and slots put back."""
        ids, edges = parse_edges(name, str(data.get("body", "")))
        status: Mapping[str, Any] = data.get("status") or {}
        slots: Mapping[str, Any] = data.get("slots") or {}
        nodes = tuple(
            WorkflowNode(
                i,
                status[i] if status.get(i) in STEP_STATUSES else "pending",
                str(slots[i]) if slots.get(i) else None,
            )
            for i in ids
        )
        current = data.get("current")
        return cls(name, str(data["body"]), nodes, edges, current if current in ids else None, active)


def _status(status: str) -> str:
    return status.replace("_", " ")
