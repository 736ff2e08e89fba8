"""``%workflow show``: a workflow's DAG, laid out left to right, coloured by status.

The graph is plain data, as ``workflow.to_graph()`` gives it::

    {"name": str, "current": str | None,
     "nodes": [{"id": str, "status": str, "slot": str | None}],
     "edges": [{"from": str, "to": str, "label": str | None}]}

Statuses ``pending``, ``in_progress``, ``done`` and ``blocked`` have colours; any other is drawn
plainly with its name. Clicking a node with an attached slot makes that slot current.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from traitlets import Dict, Unicode

from .._errors import ConfigError
from ._base import SessionSource, SessionWidget, asset, text_of
from ._layout import layered_layout

if TYPE_CHECKING:
    from ..session import Session
    from ._live import LiveWidgets

__all__ = ["STATUSES", "WorkflowWidget", "check_graph", "workflow_html", "workflow_text", "workflow_widget"]

STATUSES = ("pending", "in_progress", "done", "blocked")
Graph = Mapping[str, Any]
GraphSource = Callable[[], Graph]


def _text(value: object, what: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"a workflow graph's {what} must be a string, not {type(value).__name__}")
    return value


def check_graph(graph: object) -> dict[str, Any]:
    """The graph as plain JSON-ready data, checked: node ids unique, edges between known nodes
    (an edge naming an unknown node is a mistake the graph's maker should hear of)."""
    if not isinstance(graph, Mapping):
        raise ConfigError(f"a workflow graph is a dict (workflow.to_graph()), not {type(graph).__name__}")
    nodes, seen = [], set()
    for node in graph.get("nodes") or []:
        if not isinstance(node, Mapping):
            raise ConfigError("a workflow graph's nodes are dicts with id, status and slot")
        node_id = _text(node.get("id"), "node id")
        if node_id in seen:
            raise ConfigError(f"the workflow graph names node {node_id!r} twice")
        seen.add(node_id)
        nodes.append(
            {
                "id": node_id,
                "status": _text(node.get("status", "pending"), f"status of node {node_id!r}"),
                "slot": _text(node.get("slot"), f"slot of node {node_id!r}", optional=True),
            }
        )
    edges = []
    for edge in graph.get("edges") or []:
        if not isinstance(edge, Mapping):
            raise ConfigError("a workflow graph's edges are dicts with from, to and label")
        a, b = _text(edge.get("from"), "edge's from"), _text(edge.get("to"), "edge's to")
        for end in (a, b):
            if end not in seen:
                raise ConfigError(f"the workflow graph has an edge {a!r} -> {b!r} but no node {end!r}")
        edges.append({"from": a, "to": b, "label": _text(edge.get("label"), "edge label", optional=True)})
    current = _text(graph.get("current"), "current node", optional=True)
    if current is not None and current not in seen:
        raise ConfigError(f"the workflow graph's current node {current!r} is not one of its nodes")
    return {"name": _text(graph.get("name", ""), "name") or "", "current": current, "nodes": nodes, "edges": edges}


def workflow_text(graph: Graph, current_slot: str | None = None) -> str:
    """The graph as text: each node with its status and slot, then its edges."""
    data = check_graph(graph)
    done = sum(1 for n in data["nodes"] if n["status"] == "done")
    lines = [f"workflow {data['name'] or '(unnamed)'} · {done} of {len(data['nodes'])} done"]
    lines[0] += f" · current node {data['current']}" if data["current"] else " · no current node"
    out: dict[str, list[str]] = {}
    for edge in data["edges"]:
        out.setdefault(edge["from"], []).append(edge["to"] + (f" ({edge['label']})" if edge["label"] else ""))
    for node in data["nodes"]:
        mark = "* " if node["id"] == data["current"] else "  "
        slot = ""
        if node["slot"]:
            slot = f" · slot {node['slot']}" + (" (current)" if node["slot"] == current_slot else "")
        after = f" -> {', '.join(out[node['id']])}" if node["id"] in out else ""
        lines.append(f"{mark}{node['id']} [{node['status']}]{slot}{after}")
    return "\n".join(lines)


def workflow_html(graph: Graph, current_slot: str | None = None) -> str:
    """The text form in a ``<pre>``, escaped."""
    return f'<pre class="slotmagic-workflow">{html.escape(workflow_text(graph, current_slot))}</pre>'


class WorkflowWidget(SessionWidget):
    """A workflow's DAG. ``graph`` is a graph dict, or a function returning the current one
    (then the widget follows the workflow after every cell, as it follows the current slot)."""

    _esm = asset("static.js", "workflow.js")
    _css = asset("common.css", "workflow.css")

    graph = Dict().tag(sync=True)
    # Not ``layout``: that is every DOM widget's Layout model, which the front end draws as a
    # child view (a dict there broke every view's setLayout, and a snapshot skipped it).
    placement = Dict(help="layered_layout() of the graph: each node's layer and order").tag(sync=True)
    current_slot = Unicode().tag(sync=True)

    def __init__(
        self,
        session: Session | SessionSource,
        graph: Graph | GraphSource,
        *,
        live: LiveWidgets | None = None,
        **kwargs: Any,
    ) -> None:
        self._graph: GraphSource = graph if callable(graph) else (lambda: graph)
        super().__init__(session, live=live, **kwargs)

    def _update(self, session: Session) -> None:
        graph = check_graph(self._graph())
        current = session.current_slot
        if graph != self.graph:
            self.placement = placement(graph)
            self.graph = graph
        self.current_slot = current
        self._text = workflow_text(graph, current)
        self._html = workflow_html(graph, current)

    @staticmethod
    def rebuilt(state: Mapping[str, Any]) -> dict[str, Any]:
        """A stored state made again from its graph: the graph checked (a ConfigError says
        what is wrong) and its placement laid out anew, as a live widget does (a record's own
        placement is never taken; records written before it was stored have none)."""
        out = dict(state)
        graph = check_graph(out.get("graph") or {})
        out["graph"], out["placement"] = graph, placement(graph)
        return out

    def _act(self, session: Session, content: Mapping[str, Any]) -> str:
        if content.get("type") != "switch":
            raise ValueError(f"the workflow widget sent an unknown action {content.get('type')!r}")
        node = text_of(content, "node")
        found = next((n for n in self.graph.get("nodes", []) if n["id"] == node), None)
        if found is None or not found["slot"]:
            raise ValueError(f"workflow node {node!r} has no slot attached")
        session.switch_slot(found["slot"])
        return f"switched to slot {found['slot']} (workflow node {node})"


def placement(graph: Mapping[str, Any]) -> dict[str, Any]:
    """Where each node of a checked graph goes: :func:`layered_layout` of its nodes and edges."""
    return layered_layout([n["id"] for n in graph["nodes"]], [(e["from"], e["to"]) for e in graph["edges"]])


def workflow_widget(
    session: Session | SessionSource, graph: Graph | GraphSource, *, live: LiveWidgets | None = None
) -> WorkflowWidget:
    """The widget ``%workflow show`` displays: ``graph`` is ``workflow.to_graph()``'s dict, or
    ``workflow.to_graph`` itself to follow the workflow as it changes."""
    return WorkflowWidget(session, graph, live=live)
