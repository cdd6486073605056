"""``Tuple``: values by index and by field name, its source, its place in the tuple tree."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from engine import SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, Fields, Tuple, is_tick_tuple
from engine._model.tuple import Source

SPLIT = Source("split", "words", 3, Fields("word", "count"))


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


def make(
    values: Sequence[Any] = ("storm", 3), src: Source = SPLIT, root: Any = None, edge: int = 0
) -> Tuple:
    return Tuple(values, src, root, edge)


def test_access_by_index() -> None:
    t = make()
    assert (t[0], t[1], t[-1]) == ("storm", 3, 3)
    assert t.get_value(1) == 3
    assert len(t) == 2
    assert list(t) == ["storm", 3]


def test_access_by_field_name() -> None:
    t = make()
    assert (t["word"], t["count"]) == ("storm", 3)
    assert t.get_value_by_field("count") == 3
    assert t.select(Fields("count", "word")) == [3, "storm"]
    assert t.contains("word")
    assert not t.contains("ts")


def test_fields() -> None:
    t = make()
    assert t.fields == Fields("word", "count")
    assert t.get_fields() is t.fields


def test_get_values_is_a_fresh_list() -> None:
    t = make(("storm", 3))
    values = t.get_values()
    assert values == ["storm", 3]
    values.append("extra")
    assert t.get_values() == ["storm", 3]


@pytest.mark.parametrize("access", ["item", "get_value_by_field", "select"])
def test_unknown_field_names_the_known_ones(access: str) -> None:
    t = make()
    with pytest.raises(
        ValueError, match=exactly("unknown field 'ts'; known fields: ['word', 'count']")
    ):
        if access == "item":
            t["ts"]
        elif access == "get_value_by_field":
            t.get_value_by_field("ts")
        else:
            t.select(Fields("ts"))


def test_index_out_of_range() -> None:
    with pytest.raises(IndexError):
        make()[2]


def test_numpy_integer_index() -> None:
    assert make()[np.int64(1)] == 3


@pytest.mark.parametrize("values", [("storm", 3), np.array([7, 3])], ids=["tuple", "numpy"])
def test_indexes_slices_and_field_names_over_any_values(values: Any) -> None:
    """Indexing tries ``values`` first; a name falls back to the fields (numpy values
    refuse a name with IndexError, lists and tuples with TypeError)."""
    t = make(values)
    assert t["count"] == t[1] == t[-1] == 3
    assert list(t[:1]) == [values[0]]
    with pytest.raises(IndexError):
        t[5]
    with pytest.raises(TypeError if isinstance(values, tuple) else IndexError):
        t[1.5]
    with pytest.raises(ValueError, match=r"^unknown field 'ts'"):
        t["ts"]


def test_source_properties() -> None:
    t = make()
    assert t.source_component == "split"
    assert t.source_stream == "words"
    assert t.source_task == 3
    assert t.source_global_stream_id == ("split", "words")


def test_repr() -> None:
    assert repr(make()) == "Tuple(['storm', 3], source='split':'words'@3)"
    assert repr(SPLIT) == "Source('split', 'words', task=3)"


def test_unanchored_tuple_has_no_anchors() -> None:
    t = make(root=None, edge=0)
    assert t.anchors_to_ids == {}
    assert t.root_ids == frozenset()


def test_one_root() -> None:
    t = make(root=11, edge=222)
    assert t.anchors_to_ids == {11: 222}
    assert t.root_ids == frozenset({11})


def test_several_roots() -> None:
    roots = {11: 1, 12: 2, 13: 3}
    t = make(root=roots, edge=0)
    ids = t.anchors_to_ids
    assert ids == {11: 1, 12: 2, 13: 3}
    ids[99] = 9  # a copy: the tuple's tree is not changed through it
    assert t.anchors_to_ids == {11: 1, 12: 2, 13: 3}
    assert t.root_ids == frozenset({11, 12, 13})


def test_a_new_tuple_is_not_completed() -> None:
    assert not make().completed


@pytest.mark.parametrize(
    ("component", "stream", "tick"),
    [
        (SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, True),
        (SYSTEM_COMPONENT_ID, "default", False),
        ("split", SYSTEM_TICK_STREAM_ID, False),
        ("split", "default", False),
    ],
)
def test_is_tick_tuple(component: str, stream: str, tick: bool) -> None:
    t = make([1], Source(component, stream, 1, Fields("rate_secs")))
    assert is_tick_tuple(t) is tick


def test_system_ids_are_storms() -> None:
    assert (SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID) == ("__system", "__tick")
