"""``TupleBatch``, checked against the per-tuple model (its routing: ``test_grouping``)."""

from __future__ import annotations

import numpy as np
import pytest

from engine import Fields
from engine._columnar.batch import TupleBatch, as_columns, take_column
from engine._model.tuple import Source


def _src(*fields: str) -> Source:
    return Source("split", "default", 3, Fields(*fields))


def test_views_carry_values_and_tree() -> None:
    roots = np.array([7, 9], np.uint64)
    edges = np.array([11, 13], np.uint64)
    b = TupleBatch(_src("word", "n"), [["a", "b"], np.array([1, 2])], roots, edges)
    views = b.tuples()
    assert [t.values for t in views] == [("a", 1), ("b", 2)]
    assert [t["n"] for t in views] == [1, 2]
    assert type(views[1]["n"]) is int  # numpy scalars become Python values
    assert views[0].anchors_to_ids == {7: 11}
    assert b[1].anchors_to_ids == {9: 13}
    assert b.rows() == [["a", 1], ["b", 2]]


def test_rows_with_several_roots_or_none_are_csr() -> None:
    # row 0: root 5; row 1: roots 21 and 31; row 2: untracked (no root)
    b = TupleBatch(
        _src("w"),
        [["x", "y", "z"]],
        np.array([5, 21, 31], np.uint64),
        np.array([6, 22, 32], np.uint64),
        np.array([0, 1, 3, 3], np.int64),
    )
    views = b.tuples()
    assert [t.anchors_to_ids for t in views] == [{5: 6}, {21: 22, 31: 32}, {}]
    assert b[1].anchors_to_ids == {21: 22, 31: 32}
    assert sorted(b.root_ids().tolist()) == [5, 21, 31]
    sub = b.take(np.array([1, 2, 0]))
    assert sub.rows() == [["y"], ["z"], ["x"]]
    assert sub.roots.tolist() == [21, 31, 5] and sub.edges.tolist() == [22, 32, 6]
    assert sub.root_offsets.tolist() == [0, 2, 2, 3]


def test_from_tuples_round_trips() -> None:
    b = TupleBatch(
        _src("w", "n"),
        [["a", "b", "c"], [1, 2, 3]],
        np.array([1, 2, 8, 10], np.uint64),
        np.array([4, 5, 9, 11], np.uint64),
        np.array([0, 1, 2, 4], np.int64),
    )
    again = TupleBatch.from_tuples(b.tuples())
    assert again.rows() == b.rows()
    assert again.roots.tolist() == [1, 2, 8, 10] and again.edges.tolist() == [4, 5, 9, 11]
    assert again.root_offsets.tolist() == [0, 1, 2, 4]
    single = TupleBatch.from_tuples(b.take(np.array([1, 0])).tuples())
    assert single.root_offsets is None and single.roots.tolist() == [2, 1]
    untracked = TupleBatch(_src("w", "n"), [["a"], [1]])
    assert TupleBatch.from_tuples(untracked.tuples()).roots is None


def test_a_row_batch_keeps_its_rows_until_columns_are_asked_for() -> None:
    rows = [["a", 1], ["b", 2]]
    b = TupleBatch.from_rows(_src("w", "n"), rows)  # type: ignore[arg-type]
    assert b.row_values() is rows and len(b) == 2
    assert b.column("n") == [1, 2] and b.columns == [["a", "b"], [1, 2]]
    assert b.row_values() is rows
    assert [t["w"] for t in b.take(np.array([1])).tuples()] == ["b"]
    one = TupleBatch.from_rows(_src("w"), [["x"], ["y"]])  # type: ignore[arg-type]
    assert one.column("w") == ["x", "y"]


def test_take_column_keeps_the_kind() -> None:
    rows = np.array([2, 0])
    assert take_column(["a", "b", "c"], rows) == ["c", "a"]
    assert take_column(np.array([1, 2, 3]), rows).tolist() == [3, 1]
    whole = ["a", "b"]
    assert take_column(whole, np.array([0, 1])) is whole


def test_as_columns_errors_name_the_field() -> None:
    f = Fields("word", "n")
    with pytest.raises(ValueError, match=r"2 columns for|1 columns for 2 declared fields"):
        as_columns([["a"]], f, "here")
    with pytest.raises(ValueError, match="column 'n' has 1 rows, column 'word' has 2"):
        as_columns([["a", "b"], [1]], f, "here")
    with pytest.raises(ValueError, match="no column for field 'n'"):
        as_columns({"word": ["a"]}, f, "here")
    cols, n = as_columns({"n": [1], "word": ["a"]}, f, "here")
    assert cols == [["a"], [1]] and n == 1
