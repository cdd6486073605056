"""``TupleBatch``: many tuples of one stream as columns, the unit the engine moves.

A batch holds, for one (component, stream, task) source, the values of each declared field
as a *column* — whatever the producer gave: a Python list, a numpy array or an Arrow array —
and the tuple-tree bookkeeping as numpy arrays: per row its root id and edge id (Storm's
``MessageId``). Rows with other than one root (multi-anchoring across trees, untracked rows
among tracked ones) put the batch's ids in CSR form, ``acker_kernel``'s one representation.
Per-tuple components see rows as ``Tuple`` views, made only when asked for.

>>> from engine import Fields
>>> from engine._model.tuple import Source
>>> b = TupleBatch(Source("split", "default", 3, Fields("word", "n")), [["a", "b"], [1, 2]])
>>> len(b), b.column("word"), b[1]["n"], b.source_task
(2, ['a', 'b'], 2, 3)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from acker_kernel import gather_roots

from .._model.fields import Fields
from .._model.tuple import Source, Tuple

__all__ = ["TupleBatch", "as_columns", "column_as_list", "take_column", "tree_ids_of"]

_EMPTY_IDS = np.zeros(0, np.uint64)


class TupleBatch:
    """Rows of one stream from one task, as columns, with their tree bookkeeping.

    ``roots`` / ``edges`` (uint64) are None when the rows are unanchored (no message id
    upstream, or no ackers). Otherwise each row has one root and its edge id there, or,
    when ``root_offsets`` (int64, one per row plus one) is set, row ``i`` has the roots
    ``roots[root_offsets[i]:root_offsets[i + 1]]`` with their edge ids in ``edges`` (CSR:
    a row anchored across trees has several, an untracked row none): the one
    representation ``acker_kernel``'s batch functions take. ``ack_vals`` is the receiving
    task's XOR of the edge ids of the children anchored to each row (Storm's per-tuple ack
    value), made when the first child is emitted.

    The values are columns (``columns``, one per field) or, for rows that per-tuple code
    emitted one by one, the rows themselves (``from_rows``): each form is made from the
    other only when something asks for it, so a per-tuple bolt feeding another never
    turns its rows into columns and back.
    """

    __slots__ = (
        "_columns",
        "_rows",
        "_started_ns",
        "_state",
        "ack_vals",
        "edges",
        "n",
        "root_offsets",
        "roots",
        "source",
    )

    def __init__(
        self,
        source: Source,
        columns: Sequence[Any],
        roots: np.ndarray | None = None,
        edges: np.ndarray | None = None,
        root_offsets: np.ndarray | None = None,
        n: int | None = None,
    ) -> None:
        self.source = source
        self._columns: list[Any] | None = list(columns)
        self._rows: list[Sequence[Any]] | None = None
        self.n = len(self._columns[0]) if n is None else n
        self.roots = roots
        self.edges = edges
        self.root_offsets = root_offsets
        self.ack_vals: np.ndarray | None = None
        #: per row: 0 pending, 1 acked, 2 failed (made on the first ack or fail)
        self._state: np.ndarray | None = None
        #: when a task began executing it (perf_counter ns; process latency), 0 before
        self._started_ns = 0

    @classmethod
    def from_rows(
        cls,
        source: Source,
        rows: list[Sequence[Any]],
        roots: np.ndarray | None = None,
        edges: np.ndarray | None = None,
        root_offsets: np.ndarray | None = None,
    ) -> TupleBatch:
        """A batch of ``rows`` (each a sequence of the stream's field values, as per-tuple
        emits give them), kept as they are until something asks for columns."""
        batch = cls.__new__(cls)
        batch.source = source
        batch._columns = None
        batch._rows = rows
        batch.n = len(rows)
        batch.roots = roots
        batch.edges = edges
        batch.root_offsets = root_offsets
        batch.ack_vals = None
        batch._state = None
        batch._started_ns = 0
        return batch

    # --- shape and values ---------------------------------------------------------------
    def __len__(self) -> int:
        return self.n

    @property
    def columns(self) -> list[Any]:
        """One column per field (made from the rows the first time, for a row batch)."""
        cols = self._columns
        if cols is None:
            rows = self._rows
            assert rows is not None
            width = len(self.source.fields)
            if width == 1:
                cols = [[r[0] for r in rows]]
            else:
                cols = [list(c) for c in zip(*rows, strict=True)] or [[] for _ in range(width)]
            self._columns = cols
        return cols

    @property
    def fields(self) -> Fields:
        """The stream's declared fields, in column order: what ``column(name)`` looks up."""
        return self.source.fields

    @property
    def source_component(self) -> str:
        """The component that emitted the rows (``Tuple.source_component`` for the batch)."""
        return self.source.component

    @property
    def source_stream(self) -> str:
        """The stream the rows came on: one batch never mixes streams."""
        return self.source.stream

    @property
    def source_task(self) -> int:
        """The task that emitted the rows; a batch never mixes tasks either, so a direct
        reply or a per-task statistic needs no per-row lookup."""
        return self.source.task

    def column(self, field: str | int) -> Any:
        """The values of one field, as the producer gave them (list, numpy or Arrow)."""
        if isinstance(field, str):
            return self.columns[self.source.fields.index(field)]
        return self.columns[field]

    def row(self, i: int) -> list[Any]:
        """Row ``i``'s values as a new list of Python objects (numpy and Arrow scalars
        unwrapped), which the caller may keep or change without touching the batch."""
        if self._rows is not None:
            return list(self._rows[i])
        return [_item(col, i) for col in self.columns]

    def rows(self) -> list[list[Any]]:
        """Every row as a list of values (per-row Python objects: the slow way)."""
        return [list(r) for r in self.row_values()]

    def row_values(self) -> list[Sequence[Any]]:
        """Every row's values as a sequence (the rows themselves for a row batch; tuples
        zipped from the columns otherwise), for per-tuple code to index."""
        if self._rows is not None:
            return self._rows
        cols = [column_as_list(col) for col in self.columns]
        return list(zip(*cols, strict=True)) if cols else [()] * self.n

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
        """Whether the rows carry tree ids: False when nothing upstream tracks them (no
        message id, or no ackers), and then acking or failing the rows costs nothing."""
        return self.roots is not None

    def tuples(self) -> list[Tuple]:
        """Per-row ``Tuple`` views, for per-tuple components. Acking a view acks its row."""
        src = self.source
        rows = self.row_values()
        if self.roots is None:
            return [Tuple(r, src, None, 0) for r in rows]
        if self.root_offsets is None:
            assert self.edges is not None  # roots and edges are set together
            roots = self.roots.tolist()
            edges = self.edges.tolist()
            return [Tuple(r, src, root, e) for r, root, e in zip(rows, roots, edges, strict=True)]
        return [self._view(i, r) for i, r in enumerate(rows)]

    def _view(self, i: int, values: Sequence[Any]) -> Tuple:
        roots = self.roots
        if roots is None:
            return Tuple(values, self.source, None, 0)
        edges = self.edges
        assert edges is not None
        offsets = self.root_offsets
        if offsets is None:
            return Tuple(values, self.source, int(roots[i]), int(edges[i]))
        lo, hi = int(offsets[i]), int(offsets[i + 1])
        if hi - lo == 1:
            return Tuple(values, self.source, int(roots[lo]), int(edges[lo]))
        ids = dict(zip(roots[lo:hi].tolist(), edges[lo:hi].tolist(), strict=True))
        return Tuple(values, self.source, ids or None, 0)

    def root_ids(self) -> np.ndarray:
        """Every root id of every row (a row with several roots gives each of them)."""
        return _EMPTY_IDS if self.roots is None else self.roots

    def take(self, rows: np.ndarray) -> TupleBatch:
        """The batch of ``rows`` (an index array), bookkeeping included."""
        rows = np.asarray(rows, np.int64)
        roots, edges, offsets = self.roots, self.edges, self.root_offsets
        if roots is not None:
            assert edges is not None
            roots, offsets = gather_roots(roots, rows, self.root_offsets)
            edges = gather_roots(edges, rows, self.root_offsets)[0]
        if self._columns is None:
            assert self._rows is not None
            got = self._rows.__getitem__
            return TupleBatch.from_rows(
                self.source, [got(i) for i in rows.tolist()], roots, edges, offsets
            )
        return TupleBatch(
            self.source,
            [take_column(col, rows) for col in self._columns],
            roots,
            edges,
            offsets,
            n=int(rows.shape[0]),
        )

    @classmethod
    def from_tuples(cls, tuples: Sequence[Tuple]) -> TupleBatch:
        """A batch of per-tuple emits (all from one source), their trees kept."""
        src = tuples[0]._src
        roots, edges, offsets = tree_ids_of(tuples)
        return cls.from_rows(src, [t.values for t in tuples], roots, edges, offsets)


def tree_ids_of(
    tuples: Sequence[Tuple],
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """``(roots, edges, root_offsets)`` of per-tuple ``tuples`` as a batch holds them (all
    None when none is anchored; CSR when some row has other than one root)."""
    single = True
    anchored = False
    for t in tuples:
        root = t._root
        if type(root) is int:
            anchored = True
        else:
            single = False
            if root is not None:
                anchored = True
    if not anchored:
        return None, None, None
    if single:
        n = len(tuples)
        roots = np.fromiter([t._root for t in tuples], np.uint64, n)
        edges = np.fromiter([t._edge for t in tuples], np.uint64, n)
        return roots, edges, None
    flat_roots: list[int] = []
    flat_edges: list[int] = []
    offsets = [0]
    for t in tuples:
        root = t._root
        if type(root) is int:
            flat_roots.append(root)
            flat_edges.append(t._edge)
        elif root is not None:
            flat_roots.extend(root)
            flat_edges.extend(root.values())
        offsets.append(len(flat_roots))
    return (
        np.array(flat_roots, np.uint64),
        np.array(flat_edges, np.uint64),
        np.array(offsets, np.int64),
    )


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
        values: list[Any] = col.to_pylist()
        return values
    if isinstance(col, np.ndarray):
        values = col.tolist()
        return values
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
