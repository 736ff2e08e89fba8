"""A small layered layout for a workflow DAG, drawn left to right (plain Python).

The classic steps (Sugiyama), kept small: edges that close a cycle are turned around for the
layering; each node goes in the layer after its longest chain of predecessors; an edge that
spans several layers gets a waypoint in each layer between, so lines run between nodes, not
through them; and within each layer the nodes are ordered by the mean position of their
neighbours (a few sweeps each way), which untangles most crossings. The front end only turns
(layer, order) into pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

__all__ = ["layered_layout"]

SWEEPS = 4


def layered_layout(nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """``{"layers": [[id or waypoint, ...], ...], "nodes": {id: [layer, order]},
    "edges": [{"index": i, "points": [[layer, order], ...], "back": bool}]}``; waypoints are
    named ``"~<edge index>.<k>"``. ``points`` run from the edge's first node to its second,
    waypoints included; ``back`` marks an edge that closes a cycle (drawn against the flow)."""
    order = list(dict.fromkeys(nodes))
    known = set(order)
    forward: list[tuple[int, str, str, bool]] = []  # (edge index, from, to, back) in layering direction
    back_edges = _cycle_closing(order, [(a, b) for a, b in edges if a in known and b in known])
    for index, (a, b) in enumerate(edges):
        if a not in known or b not in known or a == b:
            continue
        if (a, b) in back_edges:
            forward.append((index, b, a, True))
        else:
            forward.append((index, a, b, False))

    layer = {n: 0 for n in order}
    successors: dict[str, list[str]] = {n: [] for n in order}
    indegree = {n: 0 for n in order}
    for _, a, b, _ in forward:
        successors[a].append(b)
        indegree[b] += 1
    ready = [n for n in order if indegree[n] == 0]
    while ready:  # Kahn's order: each node after all its predecessors
        node = ready.pop(0)
        for nxt in successors[node]:
            layer[nxt] = max(layer[nxt], layer[node] + 1)
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                ready.append(nxt)

    depth = max(layer.values(), default=-1) + 1
    layers: list[list[str]] = [[] for _ in range(depth)]
    for node in order:
        layers[layer[node]].append(node)
    chains: list[tuple[int, list[str], bool]] = []  # edge index, its nodes from first to last, back
    for index, a, b, back in forward:
        chain = [a]
        for k, between in enumerate(range(layer[a] + 1, layer[b])):
            waypoint = f"~{index}.{k}"
            layers[between].append(waypoint)
            layer[waypoint] = between
            chain.append(waypoint)
        chain.append(b)
        chains.append((index, chain, back))

    above: dict[str, list[str]] = {n: [] for row in layers for n in row}
    below: dict[str, list[str]] = {n: [] for row in layers for n in row}
    for _, chain, _ in chains:
        for a, b in pairwise(chain):
            below[a].append(b)
            above[b].append(a)
    for sweep in range(SWEEPS):
        if sweep % 2 == 0:
            for i in range(1, depth):
                _by_barycentre(layers[i], layers[i - 1], above)
        else:
            for i in range(depth - 2, -1, -1):
                _by_barycentre(layers[i], layers[i + 1], below)

    place = {n: [layer[n], i] for row in layers for i, n in enumerate(row)}
    out_edges = []
    for index, chain, back in chains:
        points = [place[n] for n in chain]
        out_edges.append({"index": index, "points": points[::-1] if back else points, "back": back})
    return {
        "layers": layers,
        "nodes": {n: place[n] for n in order},
        "edges": sorted(out_edges, key=lambda e: e["index"]),
    }


def _cycle_closing(order: list[str], edges: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """Edges that close a cycle in a depth-first walk from each node in order."""
    successors: dict[str, list[str]] = {n: [] for n in order}
    for a, b in edges:
        if a != b:
            successors[a].append(b)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    closing: set[tuple[str, str]] = set()
    for start in order:
        if start in state:
            continue
        stack = [(start, iter(successors[start]))]
        state[start] = 1
        while stack:
            node, rest = stack[-1]
            nxt = next(rest, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                closing.add((node, nxt))
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(successors[nxt])))
    return closing


def _by_barycentre(row: list[str], fixed: list[str], neighbours: dict[str, list[str]]) -> None:
    position = {n: i for i, n in enumerate(fixed)}
    current = {n: i for i, n in enumerate(row)}

    def key(node: str) -> float:
        near = [position[m] for m in neighbours[node] if m in position]
        return sum(near) / len(near) if near else float(current[node])

    row.sort(key=lambda n: (key(n), current[n]))
