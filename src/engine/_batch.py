"""``TupleBatch``: many tuples of one stream as columns, the unit the engine moves.

A batch holds, for one (component, stream, task) source, the values of each declared field
as a *column* — whatever the producer gave: a Python list, a numpy array or an Arrow array —
and the tuple-tree bookkeeping as numpy arrays: per row its root id and edge id (Storm's
``MessageId``). A row with several roots (multi-anchoring across trees) keeps them in a
side table. Per-tuple components see rows as ``Tuple`` views, made only when asked for.

>>> from engine import Fields
>>> from engine._tuple import Source
>>> b = TupleBatch(Source("split", "default", 3, Fields("word", "n")), [["a", "b"], [1, 2]])
>>> len(b), b.column("word"), b[1]["n"], b.source_task
(2, ['a', 'b'], 2, 3)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ._fields import Fields
from ._tuple import Source, Tuple

__all__ = ["TupleBatch", "as_columns", "column_as_list", "take_column"]

_EMPTY_IDS = np.zeros(0, np.uint64)


class TupleBatch:
    """Rows of one stream from one task, as columns, with their tree bookkeeping.

    ``roots`` / ``edges`` (uint64 arrays, one entry per row) are None when the rows are
    unanchored (no message id upstream, or no ackers). ``multi`` maps a row index to
    ``{root: edge}`` for rows with several roots; their ``roots`` entry is unused.
    ``ack_vals`` is the receiving task's XOR of the edge ids of the children anchored to each
    row (Storm's per-tuple ack value), made when the first child is emitted.
    """

    __slots__ = (
        "_started_ns",
        "_state",
        "ack_vals",
        "columns",
        "edges",
        "multi",
        "n",
        "roots",
        "source",
    )

    def __init__(
        self,
        source: Source,
        columns: Sequence[Any],
        roots: np.ndarray | None = None,
        edges: np.ndarray | None = None,
        multi: dict[int, dict[int, int]] | None = None,
        n: int | None = None,
    ) -> None:
        self.source = source
        self.columns = list(columns)
        self.n = len(self.columns[0]) if n is None else n
        self.roots = roots
        self.edges = edges
        self.multi = multi
        self.ack_vals: np.ndarray | None = None
        #: per row: 0 pending, 1 acked, 2 failed (made on the first ack or fail)
        self._state: np.ndarray | None = None
        #: when a task began executing it (perf_counter ns; process latency), 0 before
        self._started_ns = 0

    # --- shape and values ---------------------------------------------------------------
    def __len__(self) -> int:
        return self.n

    @property
    def fields(self) -> Fields:
        return self.source.fields

    @property
    def source_component(self) -> str:
        return self.source.component

    @property
    def source_stream(self) -> str:
        return self.source.stream

    @property
    def source_task(self) -> int:
        return self.source.task

    def column(self, field: str | int) -> Any:
        """The values of one field, as the producer gave them (list, numpy or Arrow)."""
        if isinstance(field, str):
            return self.columns[self.source.fields.index(field)]
        return self.columns[field]

    def row(self, i: int) -> list[Any]:
        return [_item(col, i) for col in self.columns]

    def rows(self) -> list[list[Any]]:
        """Every row as a list of values (per-row Python objects: the slow way)."""
        cols = [column_as_list(col) for col in self.columns]
        return [list(r) for r in zip(*cols, strict=True)] if cols else [[]] * self.n

    def __getitem__(self, i: int) -> Tuple:
        return self.tuples()[i] if i < 0 else self._view(i, self.row(i))

    def __iter__(self) -> Iterator[Tuple]:
        return iter(self.tuples())

    def to_arrow(self) -> Any:
        """The rows as a ``pyarrow.RecordBatch`` (needs pyarrow)."""
        import pyarrow as pa

        return pa.RecordBatch.from_arrays(
            [
                col if isinstance(col, (pa.Array, pa.ChunkedArray)) else pa.array(col)
                for col in self.columns
            ],
            names=list(self.source.fields),
        )

    # --- tree ---------------------------------------------------------------------------
    @property
    def anchored(self) -> bool:
        return self.roots is not None

    def tuples(self) -> list[Tuple]:
        """Per-row ``Tuple`` views, for per-tuple components. Acking a view acks its row."""
        src = self.source
        cols = [column_as_list(col) for col in self.columns]
        rows = list(zip(*cols, strict=True)) if cols else [()] * self.n
        if self.roots is None:
            return [Tuple(r, src, None, 0) for r in rows]
        roots = self.roots.tolist()
        edges = self.edges.tolist()  # type: ignore[union-attr]
        out = [Tuple(r, src, root, e) for r, root, e in zip(rows, roots, edges, strict=True)]
        if self.multi:
            for i, ids in self.multi.items():
                out[i]._root = dict(ids)
                out[i]._edge = 0
        return out

    def _view(self, i: int, values: list[Any]) -> Tuple:
        if self.roots is None:
            return Tuple(values, self.source, None, 0)
        if self.multi and i in self.multi:
            return Tuple(values, self.source, dict(self.multi[i]), 0)
        return Tuple(values, self.source, int(self.roots[i]), int(self.edges[i]))  # type: ignore[index]

    def root_ids(self) -> np.ndarray:
        """Every root id of every row (a multi-root row gives each of its roots)."""
        if self.roots is None:
            return _EMPTY_IDS
        if not self.multi:
            return self.roots
        single = np.ones(self.n, bool)
        single[list(self.multi)] = False
        extra = [r for ids in self.multi.values() for r in ids]
        return np.concatenate([self.roots[single], np.array(extra, np.uint64)])

    def take(self, rows: np.ndarray) -> TupleBatch:
        """The batch of ``rows`` (an index array), bookkeeping included."""
        rows = np.asarray(rows, np.int64)
        multi = None
        if self.multi:
            where = {int(r): j for j, r in enumerate(rows.tolist())}
            multi = {where[i]: ids for i, ids in self.multi.items() if i in where} or None
        return TupleBatch(
            self.source,
            [take_column(col, rows) for col in self.columns],
            None if self.roots is None else self.roots[rows],
            None if self.edges is None else self.edges[rows],
            multi,
            n=int(rows.shape[0]),
        )

    @classmethod
    def from_tuples(cls, tuples: Sequence[Tuple]) -> TupleBatch:
        """A batch of per-tuple emits (all from one source), their trees kept."""
        src = tuples[0]._src
        width = len(src.fields)
        columns = [list(c) for c in zip(*(t.values for t in tuples), strict=True)]
        if not columns:
            columns = [[] for _ in range(width)]
        roots = np.zeros(len(tuples), np.uint64)
        edges = np.zeros(len(tuples), np.uint64)
        multi: dict[int, dict[int, int]] = {}
        anchored = False
        for i, t in enumerate(tuples):
            root = t._root
            if type(root) is int:
                roots[i] = root
                edges[i] = t._edge
                anchored = True
            elif root is not None:
                multi[i] = dict(root)
                anchored = True
        batch = cls(
            src,
            columns,
            roots if anchored else None,
            edges if anchored else None,
            multi or None,
            n=len(tuples),
        )
        return batch


def _item(col: Any, i: int) -> Any:
    v = col[i]
    if hasattr(v, "as_py"):  # an Arrow scalar
        return v.as_py()
    if isinstance(v, np.generic):
        return v.item()
    return v


def column_as_list(col: Any) -> list[Any]:
    """A column's values as a Python list (the list itself when it is one)."""
    if type(col) is list:
        return col
    if hasattr(col, "to_pylist"):  # Arrow
        return col.to_pylist()
    if isinstance(col, np.ndarray):
        return col.tolist()
    return list(col)


def take_column(col: Any, rows: np.ndarray) -> Any:
    """``col`` at ``rows`` (an int64 index array), keeping the column's kind."""
    if type(col) is list:
        if rows.shape[0] == len(col) and (
            rows.shape[0] == 0
            or (rows[0] == 0 and rows[-1] == len(col) - 1 and bool((np.diff(rows) == 1).all()))
        ):
            return col
        getter = col.__getitem__
        return [getter(i) for i in rows.tolist()]
    if isinstance(col, np.ndarray):
        return col[rows]
    if hasattr(col, "take"):  # Arrow arrays take an index array
        return col.take(rows)
    return [col[i] for i in rows.tolist()]


def as_columns(data: Any, fields: Fields, where: str) -> tuple[list[Any], int]:
    """Columns in ``fields`` order from what a user emits: a sequence of columns, a mapping
    field -> column, or an Arrow ``RecordBatch`` / ``Table``. Returns (columns, rows)."""
    names = list(fields)
    if hasattr(data, "schema") and hasattr(data, "num_rows"):  # Arrow batch or table
        have = list(data.schema.names)
        missing = [f for f in names if f not in have]
        if missing:
            raise ValueError(
                f"{where}: the Arrow data has no column {missing[0]!r} (columns: {have}); declared fields: {names}"
            )
        columns = [data.column(f) for f in names]
        n = int(data.num_rows)
    elif isinstance(data, Mapping):
        missing = [f for f in names if f not in data]
        if missing:
            raise ValueError(
                f"{where}: no column for field {missing[0]!r}; declared fields: {names}"
            )
        extra = sorted(set(data) - set(names))
        if extra:
            raise ValueError(
                f"{where}: column {extra[0]!r} is not a declared field; declared fields: {names}"
            )
        columns = [data[f] for f in names]
        n = len(columns[0]) if columns else 0
    else:
        columns = list(data)
        if len(columns) != len(names):
            raise ValueError(
                f"{where}: {len(columns)} columns for {len(names)} declared fields {names}; "
                f"pass one column per field (or a mapping field -> column)"
            )
        n = len(columns[0]) if columns else 0
    for f, col in zip(names, columns, strict=True):
        if len(col) != n:
            raise ValueError(
                f"{where}: column {f!r} has {len(col)} rows, column {names[0]!r} has {n}; every column needs the same length"
            )
    return columns, n
