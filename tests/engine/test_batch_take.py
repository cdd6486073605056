"""Hypothesis: ``TupleBatch.take`` against the per-row model. Whatever the columns' kind
(lists, numpy, Arrow, or rows kept as emitted) and the rows' trees (none, one root each, or
CSR with untracked and multi-root rows), the batch of ``rows`` has, row for row, the values
and the tree of the rows it was taken from, and so has a take of a take."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Fields
from engine._columnar.batch import TupleBatch, tree_ids_of
from engine._model.tuple import Source

U64_MAX = 2**64 - 1
SOURCE = Source("join", "default", 1, Fields("word", "n"))
try:
    import pyarrow as pa
except ImportError:  # an extra (spark): the other kinds of column still get tested
    pa = None
KINDS = ["list", "numpy", "rows"] + ([] if pa is None else ["arrow", "chunked"])

root_ids = st.sampled_from([0, 1, 2**63, U64_MAX]) | st.integers(0, U64_MAX)


@st.composite
def batches(draw: st.DrawFn) -> tuple[TupleBatch, list[tuple[list[Any], dict[int, int]]]]:
    """A batch and its model: per row, its values and its roots -> edge ids."""
    n = draw(st.integers(0, 12))
    words = [f"w{i}" for i in range(n)]
    numbers = draw(st.lists(st.integers(-(2**62), 2**62), min_size=n, max_size=n))
    trees = draw(st.sampled_from(["none", "single", "csr"]))
    if trees == "single":
        ids = [draw(st.dictionaries(root_ids, root_ids, min_size=1, max_size=1)) for _ in words]
    elif trees == "csr":
        ids = [draw(st.dictionaries(root_ids, root_ids, max_size=3)) for _ in words]
    else:
        ids = [{} for _ in words]
    roots: np.ndarray | None = None
    edges: np.ndarray | None = None
    offsets: np.ndarray | None = None
    if trees != "none":
        roots = np.array([r for row in ids for r in row], np.uint64)
        edges = np.array([e for row in ids for e in row.values()], np.uint64)
        if trees == "csr":
            offsets = np.array([0, *np.cumsum([len(row) for row in ids]).tolist()], np.int64)
    kind = draw(st.sampled_from(KINDS))
    if kind == "rows":
        rows: list[Any] = [(w, k) for w, k in zip(words, numbers, strict=True)]
        batch = TupleBatch.from_rows(SOURCE, rows, roots, edges, offsets)
    else:
        columns: list[Any] = [list(words), list(numbers)]
        if kind == "numpy":
            columns = [np.array(words, object), np.array(numbers, np.int64)]
        elif kind == "arrow":
            columns = [pa.array(words, pa.string()), pa.array(numbers, pa.int64())]
        elif kind == "chunked":
            half = n // 2
            columns = [
                pa.chunked_array([c[:half], c[half:]], t)
                for c, t in ((words, pa.string()), (numbers, pa.int64()))
            ]
        batch = TupleBatch(SOURCE, columns, roots, edges, offsets, n=n)
    model = [([w, k], tree) for w, k, tree in zip(words, numbers, ids, strict=True)]
    return batch, model


def seen(batch: TupleBatch) -> list[tuple[list[Any], dict[int, int]]]:
    """Each row's values and tree, as per-tuple code sees them, three ways that must agree."""
    views = batch.tuples()
    assert len(views) == len(batch)
    out = [(list(t.values), t.anchors_to_ids) for t in views]
    assert [(list(batch[i].values), batch[i].anchors_to_ids) for i in range(len(batch))] == out
    assert batch.rows() == [values for values, _ in out]
    assert TupleBatch.from_tuples(views).rows() == batch.rows() if views else True
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=batches(), data=st.data())
def test_take_keeps_each_rows_values_and_tree(
    case: tuple[TupleBatch, list[tuple[list[Any], dict[int, int]]]], data: st.DataObject
) -> None:
    batch, model = case
    assert seen(batch) == model
    n = len(batch)
    rows = data.draw(st.lists(st.integers(0, n - 1), max_size=2 * n + 1), label="rows") if n else []
    part = batch.take(np.array(rows, np.int64))
    assert len(part) == len(rows)
    assert seen(part) == [model[i] for i in rows]
    assert (part.roots is None) == (batch.roots is None)
    if part.roots is not None:
        assert part.edges is not None and part.edges.shape == part.roots.shape
        assert sorted(part.root_ids().tolist()) == sorted(r for i in rows for r in model[i][1])
    again = (
        data.draw(st.lists(st.integers(0, len(rows) - 1), max_size=len(rows)), label="again")
        if rows
        else []
    )
    assert seen(part.take(np.array(again, np.int64))) == [model[rows[j]] for j in again]
    # The ids of per-tuple views turn back into the same bookkeeping (None: no row has one).
    roots, edges, _ = tree_ids_of(part.tuples())
    flat = [(r, e) for i in rows for r, e in model[i][1].items()]
    if roots is None:
        assert flat == []
    else:
        assert edges is not None
        assert list(zip(roots.tolist(), edges.tolist(), strict=True)) == flat
