"""The table graph: which table reads which, in what order the tables run.

Edges point upstream → downstream. A table's `source.table` and its
`join_streams` are streaming edges; tables its SQL reads besides those are
static edges (stream–static joins read their latest snapshot). Both order the
tables: the table read statically must exist before its reader runs.

`order` is a topological order with ties broken by layer, then name, so the same
project always plans the same way. Cycles are found, not assumed away: `cycles`
lists each as a path that starts and ends on the same table.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from warehouse.spec.table import LAYERS, TableDefinition, TableSource

EdgeKind = Literal["source", "join", "static"]


@dataclass(frozen=True)
class Edge:
    upstream: str
    downstream: str
    kind: EdgeKind = "source"

    @property
    def static(self) -> bool:
        return self.kind == "static"


@dataclass
class TableGraph:
    """Nodes are table names; `definitions` maps them to their `TableDefinition`."""

    definitions: dict[str, TableDefinition]
    edges: list[Edge]
    order: list[str]
    cycles: list[list[str]] = field(default_factory=list)
    missing: list[Edge] = field(default_factory=list)
    """Edges whose upstream is not a table of the project (reported by the loader)."""

    @property
    def nodes(self) -> list[str]:
        return list(self.order)

    def upstream(self, name: str, *, static: bool | None = None) -> list[str]:
        """Direct upstream tables of `name` (`static=False`: streaming only)."""
        return _unique(
            e.upstream
            for e in self.edges
            if e.downstream == name and (static is None or e.static == static)
        )

    def downstream(self, name: str, *, static: bool | None = None) -> list[str]:
        return _unique(
            e.downstream
            for e in self.edges
            if e.upstream == name and (static is None or e.static == static)
        )

    def layers(self, layer: str | None = None) -> list[str]:
        """Tables of one layer in run order (all tables when `layer` is None or `all`)."""
        if layer in (None, "all"):
            return list(self.order)
        return [n for n in self.order if self.definitions[n].layer == layer]

    def stream_readers(self, name: str) -> list[str]:
        """Every table that reads `name` as a stream, directly or through others, in run
        order: the tables whose checkpoints hold positions in it (a snapshot reader's
        holds none)."""
        seen: set[str] = set()
        stack = [name]
        while stack:
            for down in self.downstream(stack.pop(), static=False):
                if down not in seen:
                    seen.add(down)
                    stack.append(down)
        return [n for n in self.order if n in seen]

    def ancestors(self, name: str) -> list[str]:
        """Every table `name` depends on, transitively, in run order."""
        seen: set[str] = set()
        stack = [name]
        while stack:
            for up in self.upstream(stack.pop()):
                if up not in seen and up in self.definitions:
                    seen.add(up)
                    stack.append(up)
        return [n for n in self.order if n in seen]

    def to_dict(self) -> dict[str, Any]:
        return {
            "order": list(self.order),
            "nodes": [
                {"table": n, "layer": self.definitions[n].layer, "path": self.definitions[n].path}
                for n in self.order
            ],
            "edges": [
                {"upstream": e.upstream, "downstream": e.downstream, "kind": e.kind}
                for e in self.edges
            ],
            "cycles": [list(c) for c in self.cycles],
        }


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _edges_of(definition: TableDefinition) -> list[Edge]:
    name, src = definition.name, definition.spec.source
    edges = []
    if isinstance(src, TableSource):
        edges.append(Edge(src.table, name, "source"))
        edges += [Edge(j.table, name, "join") for j in src.join_streams]
    streamed = {e.upstream for e in edges}
    edges += [Edge(t, name, "static") for t in definition.static_tables if t not in streamed]
    return edges


def build_graph(tables: Mapping[str, TableDefinition] | Iterable[TableDefinition]) -> TableGraph:
    """Build the graph of `tables` (a name → definition mapping or definitions)."""
    defs = dict(tables) if isinstance(tables, Mapping) else {d.name: d for d in tables}
    edges: list[Edge] = []
    missing: list[Edge] = []
    for definition in defs.values():
        for edge in _edges_of(definition):
            (edges if edge.upstream in defs else missing).append(edge)

    def rank(n: str) -> tuple[int, str]:
        layer = defs[n].layer
        return (LAYERS.index(layer) if layer in LAYERS else len(LAYERS), n)

    indegree = {n: 0 for n in defs}
    children: dict[str, list[str]] = {n: [] for n in defs}
    for e in _dedupe_pairs(edges):
        indegree[e.downstream] += 1
        children[e.upstream].append(e.downstream)
    ready = [(rank(n), n) for n, d in indegree.items() if d == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        _, n = heapq.heappop(ready)
        order.append(n)
        for child in children[n]:
            indegree[child] -= 1
            if indegree[child] == 0:
                heapq.heappush(ready, (rank(child), child))
    stuck = sorted((n for n in defs if n not in set(order)), key=rank)
    cycles = find_cycles(stuck, children, rank) if stuck else []
    return TableGraph(defs, edges, order + stuck, cycles=cycles, missing=missing)


def _dedupe_pairs(edges: list[Edge]) -> list[Edge]:
    seen: set[tuple[str, str]] = set()
    out = []
    for e in edges:
        if (e.upstream, e.downstream) not in seen:
            seen.add((e.upstream, e.downstream))
            out.append(e)
    return out


def find_cycles(nodes: list[str], children: Mapping[str, list[str]], rank: Any) -> list[list[str]]:
    """One cycle per strongly connected component among `nodes`, each closed (`a, b, a`)."""
    cycles = []
    for comp in _components(nodes, children, rank):
        start = min(comp, key=rank)
        if len(comp) == 1 and start not in children.get(start, []):
            continue
        cycles.append(_path_back(start, set(comp), children, rank))
    return sorted(cycles, key=lambda c: rank(c[0]))


def _components(nodes: list[str], children: Mapping[str, list[str]], rank: Any) -> list[list[str]]:
    """The strongly connected components among `nodes` (Tarjan's algorithm)."""
    members = set(nodes)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0

    def connect(v: str) -> None:  # projects are small, recursion depth is fine
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(children.get(v, []), key=rank):
            if w not in members:
                continue
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            components.append(comp)

    for v in nodes:
        if v not in index:
            connect(v)
    return components


def _path_back(
    start: str, inside: set[str], children: Mapping[str, list[str]], rank: Any
) -> list[str]:
    """Shortest path from `start` back to itself inside one component (breadth first)."""
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(children.get(v, []), key=rank):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [*reversed(path), start]
                if w in inside and w not in parents and w != start:
                    parents[w] = v
                    nxt.append(w)
        frontier = nxt
    return [start, start]
