"""The topology's graph: a layered layout, drawn as SVG (no browser script needed) or DOT.

Spouts sit in the first column, every bolt one column right of its furthest input (edges that
close a cycle are drawn back, under the nodes). Each node is one component, labelled with its
kind, executors and tasks; each edge one subscription, labelled ``stream · grouping``.

>>> # svg = topology_graph(topology).to_svg()      # squall visualize MODULE:FUNCTION
>>> # dot = topology_graph(topology).to_dot()      # dot -Tpng graph.dot -o graph.png

The SVG marks each node ``<g class="node" data-component="ID">`` with an empty
``<text class="node-stat">`` that the web UI fills with live rates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from html import escape

from .._model.topology import StormTopology

__all__ = ["GraphEdge", "GraphNode", "TopologyGraph", "topology_graph"]

NODE_WIDTH = 176
NODE_HEIGHT = 64
#: Room between columns (edges and their labels) and between the nodes of a column.
COLUMN_GAP = 150
ROW_GAP = 40
MARGIN = 24


@dataclass(frozen=True)
class GraphNode:
    """One component: its place in the layout (``column``; ``x``, ``y`` of its top left
    corner) and what its label says."""

    id: str
    kind: str  # "spout" or "bolt"
    executors: int
    tasks: int
    column: int
    x: float
    y: float

    @property
    def label(self) -> str:
        """``spout · 2 exec · 4 tasks``: the kind and the parallelism, under the id."""
        return f"{self.kind} · {self.executors} exec · {self.tasks} task{'s' * (self.tasks != 1)}"


@dataclass(frozen=True)
class GraphEdge:
    """One subscription: tuples of ``source``'s ``stream`` reach ``target`` by
    ``grouping``."""

    source: str
    target: str
    stream: str
    grouping: str  # e.g. "shuffle", "fields(word)"
    back: bool  # closes a cycle: drawn under the nodes, right to left

    @property
    def label(self) -> str:
        """``stream · grouping``, drawn along the edge."""
        return f"{self.stream} · {self.grouping}"


def _grouping_label(grouping: object) -> str:
    kind = getattr(grouping, "kind", None)
    name = getattr(kind, "value", str(grouping))
    fields = getattr(grouping, "fields", None)
    return f"{name}({', '.join(fields)})" if fields is not None else name


@dataclass(frozen=True)
class TopologyGraph:
    """A laid-out topology, made by ``topology_graph``: draw it with ``to_svg`` or
    ``to_dot``, or hand ``to_json`` to a browser.

    >>> from engine import TopologyBuilder
    >>> from engine.testing import BasicPassBolt, FiniteSpout
    >>> from engine.ui import topology_graph
    >>> builder = TopologyBuilder()
    >>> builder.set_spout("numbers", FiniteSpout(10))
    SpoutDeclarer('numbers')
    >>> builder.set_bolt("pass", BasicPassBolt(), 2).fields_grouping("numbers", ["key"])
    BoltDeclarer('pass')
    >>> graph = topology_graph(builder.create_topology())
    >>> [(n.id, n.column, n.label) for n in graph.nodes]
    [('numbers', 0, 'spout · 1 exec · 1 task'), ('pass', 1, 'bolt · 2 exec · 2 tasks')]
    >>> graph.edges[0].label
    'default · fields(key)'
    """

    nodes: tuple[GraphNode, ...]
    edges: tuple[GraphEdge, ...]
    width: float
    height: float

    def node(self, component_id: str) -> GraphNode:
        """The node of ``component_id`` (``KeyError`` if there is none)."""
        for n in self.nodes:
            if n.id == component_id:
                return n
        raise KeyError(component_id)

    def to_json(self) -> dict[str, object]:
        """The layout as plain data (the web UI's ``/api/v1/topology/{id}/visualization``
        answer), for a client that draws the graph itself."""
        return {
            "width": self.width,
            "height": self.height,
            "nodes": [
                {
                    "id": n.id,
                    "type": n.kind,
                    "executors": n.executors,
                    "tasks": n.tasks,
                    "x": n.x,
                    "y": n.y,
                }
                for n in self.nodes
            ],
            "edges": [
                {
                    "source": e.source,
                    "target": e.target,
                    "stream": e.stream,
                    "grouping": e.grouping,
                }
                for e in self.edges
            ],
        }

    def to_dot(self, name: str = "topology") -> str:
        """Graphviz DOT, left to right: spouts as boxes with a double border."""

        def q(s: str) -> str:
            return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

        lines = [
            f"digraph {q(name)} {{",
            "  rankdir=LR;",
            '  node [shape=box, style="rounded,filled", fontname="Helvetica"];',
            '  edge [fontname="Helvetica", fontsize=10];',
        ]
        for n in self.nodes:
            color = "#d9f2ec" if n.kind == "spout" else "#e3e7fb"
            extra = ", peripheries=2" if n.kind == "spout" else ""
            lines.append(
                f"  {q(n.id)} [label={q(n.id + chr(10) + n.label)}, fillcolor={q(color)}{extra}];"
            )
        for e in self.edges:
            lines.append(f"  {q(e.source)} -> {q(e.target)} [label={q(e.label)}];")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def to_svg(self, title: str | None = None) -> str:
        """A standalone SVG (inline styles, no fonts or scripts fetched)."""
        w, h = self.width, self.height
        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" class="topology-graph" '
            f'width="{w:.0f}" height="{h:.0f}" viewBox="0 0 {w:.0f} {h:.0f}" '
            f'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif">',
        ]
        if title:
            out.append(f"<title>{escape(title)}</title>")
        out.append(
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" '
            'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
            '<path d="M 0 0 L 10 5 L 0 10 z" fill="#7a8194"/></marker></defs>'
        )
        by_id = {n.id: n for n in self.nodes}
        # Edges first, so nodes are drawn over them.
        for e in self.edges:
            s, t = by_id[e.source], by_id[e.target]
            if e.back or s.id == t.id:
                x1, y1 = s.x + NODE_WIDTH / 2, s.y + NODE_HEIGHT
                x2, y2 = t.x + NODE_WIDTH / 2, t.y + NODE_HEIGHT
                dip = max(y1, y2) + 36
                path = f"M {x1:.1f} {y1:.1f} C {x1:.1f} {dip:.1f}, {x2:.1f} {dip:.1f}, {x2:.1f} {y2:.1f}"
                lx, ly = (x1 + x2) / 2, dip - 6
            else:
                x1, y1 = s.x + NODE_WIDTH, s.y + NODE_HEIGHT / 2
                x2, y2 = t.x, t.y + NODE_HEIGHT / 2
                mid = (x1 + x2) / 2
                path = f"M {x1:.1f} {y1:.1f} C {mid:.1f} {y1:.1f}, {mid:.1f} {y2:.1f}, {x2:.1f} {y2:.1f}"
                lx, ly = mid, (y1 + y2) / 2 - 6
            out.append(
                f'<g class="edge" data-source="{escape(e.source)}" data-target="{escape(e.target)}"'
                f' data-stream="{escape(e.stream)}">'
                f'<path d="{path}" fill="none" stroke="#7a8194" stroke-width="1.6" '
                f'marker-end="url(#arrow)"/>'
                f'<text x="{lx:.1f}" y="{ly:.1f}" text-anchor="middle" font-size="11" '
                f'fill="#4b5163" paint-order="stroke" stroke="#ffffff" stroke-width="4">'
                f"{escape(e.label)}</text></g>"
            )
        for n in self.nodes:
            fill, stroke = ("#d9f2ec", "#1f8a70") if n.kind == "spout" else ("#e3e7fb", "#4257b2")
            rx = 18 if n.kind == "spout" else 6
            cx = n.x + NODE_WIDTH / 2
            out.append(
                f'<g class="node {n.kind}" data-component="{escape(n.id)}">'
                f"<title>{escape(n.id)}: {escape(n.label)}</title>"
                f'<rect x="{n.x:.1f}" y="{n.y:.1f}" width="{NODE_WIDTH}" height="{NODE_HEIGHT}" '
                f'rx="{rx}" fill="{fill}" stroke="{stroke}" stroke-width="2"/>'
                f'<text x="{cx:.1f}" y="{n.y + 22:.1f}" text-anchor="middle" font-size="14" '
                f'font-weight="600" fill="#1d2433">{escape(_clip(n.id, 22))}</text>'
                f'<text x="{cx:.1f}" y="{n.y + 39:.1f}" text-anchor="middle" font-size="11" '
                f'fill="#4b5163">{escape(n.label)}</text>'
                f'<text class="node-stat" x="{cx:.1f}" y="{n.y + 55:.1f}" text-anchor="middle" '
                f'font-size="11" fill="{stroke}"></text></g>'
            )
        out.append("</svg>")
        return "\n".join(out) + "\n"


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _columns(topology: StormTopology) -> tuple[dict[str, int], set[tuple[str, str]]]:
    """Column of each component (longest path from a spout) and the edges that close a
    cycle, found by a depth-first walk from the spouts in declaration order."""
    children: dict[str, list[str]] = {cid: [] for cid in topology.components}
    for bolt in topology.bolts.values():
        for sub in bolt.inputs:
            if sub.component in children and bolt.id not in children[sub.component]:
                children[sub.component].append(bolt.id)
    back: set[tuple[str, str]] = set()
    state: dict[str, int] = {}  # 1: on the walk's stack, 2: done
    order: list[str] = []

    def walk(start: str) -> None:
        stack = [(start, iter(children[start]))]
        state[start] = 1
        while stack:
            node, it = stack[-1]
            child = next(it, None)
            if child is None:
                state[node] = 2
                order.append(node)
                stack.pop()
            elif state.get(child) == 1:
                back.add((node, child))
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(children[child])))

    for cid in [*topology.spouts, *topology.bolts]:  # bolts only reachable through a cycle
        if cid not in state:
            walk(cid)
    column = {cid: 0 for cid in topology.components}
    for node in reversed(order):  # a topological order of the graph less its back edges
        for child in children[node]:
            if (node, child) not in back:
                column[child] = max(column[child], column[node] + 1)
    for cid in topology.bolts:  # a bolt is never in the spouts' column
        column[cid] = max(column[cid], 1)
    return column, back


def topology_graph(
    topology: StormTopology, executors: Mapping[str, int] | None = None
) -> TopologyGraph:
    """Lay ``topology`` out: one node per component, one edge per subscription.

    ``executors`` overrides the declared executor counts (a rebalanced running topology).
    """
    if not isinstance(topology, StormTopology):
        raise TypeError(
            f"topology_graph needs a StormTopology (TopologyBuilder.create_topology()), "
            f"got {type(topology).__name__}"
        )
    column, back = _columns(topology)
    by_column: dict[int, list[str]] = {}
    for cid in topology.components:  # declaration order first
        by_column.setdefault(column[cid], []).append(cid)
    # One barycenter pass: order each column by the mean row of its inputs.
    row: dict[str, float] = {}
    for c in sorted(by_column):
        ids = by_column[c]
        if c > 0:
            declared = {cid: i for i, cid in enumerate(ids)}

            def key(cid: str, declared: dict[str, int] = declared) -> tuple[float, int]:
                inputs = topology.components[cid].inputs
                parents = [row[s.component] for s in inputs if s.component in row]
                return (sum(parents) / len(parents) if parents else 1e9, declared[cid])

            ids.sort(key=key)
        for i, cid in enumerate(ids):
            row[cid] = i
    tallest = max(len(ids) for ids in by_column.values())
    height = MARGIN * 2 + tallest * NODE_HEIGHT + (tallest - 1) * ROW_GAP + 40  # + back edges
    ncols = max(by_column) + 1
    width = MARGIN * 2 + ncols * NODE_WIDTH + (ncols - 1) * COLUMN_GAP
    nodes = []
    for c in sorted(by_column):
        ids = by_column[c]
        span = len(ids) * NODE_HEIGHT + (len(ids) - 1) * ROW_GAP
        top = MARGIN + (tallest * NODE_HEIGHT + (tallest - 1) * ROW_GAP - span) / 2
        for i, cid in enumerate(ids):
            spec = topology.components[cid]
            nodes.append(
                GraphNode(
                    id=cid,
                    kind="spout" if spec.is_spout else "bolt",
                    executors=(executors or {}).get(cid, spec.num_executors),
                    tasks=spec.num_tasks,
                    column=c,
                    x=MARGIN + c * (NODE_WIDTH + COLUMN_GAP),
                    y=top + i * (NODE_HEIGHT + ROW_GAP),
                )
            )
    edges = [
        GraphEdge(
            source=sub.component,
            target=bolt.id,
            stream=sub.stream,
            grouping=_grouping_label(sub.grouping),
            back=(sub.component, bolt.id) in back or sub.component == bolt.id,
        )
        for bolt in topology.bolts.values()
        for sub in bolt.inputs
        if sub.component in topology.components
    ]
    return TopologyGraph(tuple(nodes), tuple(edges), float(width), float(height))
