"""The topology graph: one node per component, one edge per subscription, SVG and DOT."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from engine import Fields, TopologyBuilder
from engine.ui import topology_graph

from ..topologies import ListSpout
from .paced import Count, PacedSpout, Split

SVG = "{http://www.w3.org/2000/svg}"


def diamond() -> object:
    builder = TopologyBuilder()
    builder.set_spout("src", ListSpout([[1, "a"]]), 2)
    builder.set_bolt("left", Split(), 3).shuffle_grouping("src")
    builder.set_bolt("right", Split()).all_grouping("src")
    builder.set_bolt("join", Count(), 2).set_num_tasks(4).fields_grouping(
        "left", Fields("word")
    ).global_grouping("right")
    return builder.create_topology()


def test_one_node_per_component_in_columns_by_depth() -> None:
    graph = topology_graph(diamond())
    columns = {n.id: n.column for n in graph.nodes}
    assert columns == {"src": 0, "left": 1, "right": 1, "join": 2}
    join = graph.node("join")
    assert (join.kind, join.executors, join.tasks) == ("bolt", 2, 4)
    assert graph.node("src").kind == "spout"
    labels = sorted((e.source, e.target, e.label) for e in graph.edges)
    assert labels == [
        ("left", "join", "default · fields(word)"),
        ("right", "join", "default · global"),
        ("src", "left", "default · shuffle"),
        ("src", "right", "default · all"),
    ]
    # Nodes never overlap.
    boxes = [(n.x, n.y) for n in graph.nodes]
    assert len(set(boxes)) == len(boxes)


def test_svg_is_well_formed_with_a_group_per_component() -> None:
    svg = topology_graph(diamond()).to_svg(title="diamond")
    root = ET.fromstring(svg)
    nodes = [g for g in root.iter(f"{SVG}g") if "node" in g.get("class", "").split()]
    assert sorted(g.get("data-component") for g in nodes) == ["join", "left", "right", "src"]
    edges = [g for g in root.iter(f"{SVG}g") if g.get("class") == "edge"]
    assert len(edges) == 4
    assert "http" not in svg.replace("http://www.w3.org/2000/svg", "")  # nothing fetched


def test_dot_names_every_node_and_edge() -> None:
    dot = topology_graph(diamond()).to_dot("diamond")
    assert dot.startswith('digraph "diamond" {\n  rankdir=LR;')
    for cid in ("src", "left", "right", "join"):
        assert f'  "{cid}" [label="{cid}\n' in dot
    assert '  "left" -> "join" [label="default · fields(word)"];' in dot


def test_a_cycle_is_drawn_back_and_does_not_hang() -> None:
    builder = TopologyBuilder()
    builder.set_spout("sentences", PacedSpout())
    builder.set_bolt("split", Split()).shuffle_grouping("sentences").shuffle_grouping("count")
    builder.set_bolt("count", Split()).fields_grouping("split", Fields("word"))
    graph = topology_graph(builder.create_topology())
    assert {n.id: n.column for n in graph.nodes} == {"sentences": 0, "split": 1, "count": 2}
    back = [(e.source, e.target) for e in graph.edges if e.back]
    assert back == [("count", "split")]
    ET.fromstring(graph.to_svg())


def test_executors_override_shows_a_rebalance() -> None:
    graph = topology_graph(diamond(), executors={"join": 4})
    assert graph.node("join").executors == 4
    assert "4 exec · 4 tasks" in graph.to_svg()


def test_not_a_topology_is_refused_by_name() -> None:
    with pytest.raises(TypeError) as excinfo:
        topology_graph(TopologyBuilder())  # type: ignore[arg-type]
    assert str(excinfo.value) == (
        "topology_graph needs a StormTopology (TopologyBuilder.create_topology()), "
        "got TopologyBuilder"
    )
