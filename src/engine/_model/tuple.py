"""``Tuple``: one value list travelling on a stream, with its place in the tuple tree."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

from .fields import Fields

__all__ = [
    "SYSTEM_COMPONENT_ID",
    "SYSTEM_TICK_STREAM_ID",
    "RowTrees",
    "Source",
    "Tuple",
    "extend_roots",
    "is_tick_tuple",
]

#: Storm's system component and tick stream (``Constants.SYSTEM_COMPONENT_ID`` ...).
SYSTEM_COMPONENT_ID = "__system"
SYSTEM_TICK_STREAM_ID = "__tick"


class Source:
    """Where tuples come from: one (component, stream, task). Shared by all their tuples."""

    __slots__ = ("component", "fields", "stream", "task")

    def __init__(self, component: str, stream: str, task: int, fields: Fields) -> None:
        self.component = component
        self.stream = stream
        self.task = task
        self.fields = fields

    def __repr__(self) -> str:
        return f"Source({self.component!r}, {self.stream!r}, task={self.task})"


class Tuple:
    """A tuple as a bolt receives it: values by index or by field name, plus its source.

    The engine makes tuples; a test may build one by hand from its values and its source:

    >>> from engine import Fields
    >>> from engine._model.tuple import Source, Tuple
    >>> t = Tuple(["storm", 3], Source("split", "default", 2, Fields("word", "count")), None, 0)
    >>> t[0], t["count"], t.source_component, t.source_task
    ('storm', 3, 'split', 2)

    The tree bookkeeping (Storm's ``MessageId``) lives in five slots, the fewest that make
    creating a tuple cheap: ``_root`` is the root id (an int) with ``_edge`` this tuple's
    edge id, or a dict root -> edge id when the tuple has several roots, or None when it is
    unanchored; ``_ack_val`` is the XOR of the edge ids of the children anchored to it, and
    None once the tuple was acked or failed. The one ``Tuple`` a basic bolt sees for row
    after row of a batch has, as ``_root``, what knows the tree of the row being executed
    (a ``RowTrees``); it gets its row's own ids if user code keeps it.
    """

    __slots__ = ("_ack_val", "_edge", "_root", "_src", "values")

    def __init__(self, values: Sequence[Any], src: Source, root: Any, edge: int) -> None:
        self.values = values
        self._src = src
        self._root = root
        self._edge = edge
        self._ack_val: int | None = 0

    # --- values -----------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Any:
        # Indexes first and without a type test (ints, numpy integers, slices: whatever
        # ``values`` accepts): ``tuple[0]`` runs once per row of a per-tuple bolt.
        try:
            return self.values[key]
        except (TypeError, IndexError):  # a field name (numpy values raise IndexError)
            if isinstance(key, str):
                return self.values[self._src.fields.index(key)]
            raise

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def get_value(self, i: int) -> Any:
        """Storm's ``getValue(i)``: the value at index ``i``, as ``t[i]`` gives it."""
        return self.values[i]

    def get_value_by_field(self, field: str) -> Any:
        """Storm's ``getValueByField``: the value of ``field``, as ``t[field]`` gives it.

        The field's index is looked up in the stream's declared ``Fields``, so a name the
        stream does not declare raises a ``ValueError`` naming the known fields, rather than
        returning ``None`` for a typo.
        """
        return self.values[self._src.fields.index(field)]

    def get_values(self) -> list[Any]:
        """Storm's ``getValues``: a new list of the values, safe to change or to keep.

        A copy, because ``values`` is what the emitter handed over (a tuple, or a list that
        every task the emit went to shares): changing it in place would change it for them.
        """
        return list(self.values)

    def select(self, fields: Fields) -> list[Any]:
        """Storm's ``select``: the values of ``fields``, in their order (a grouping key)."""
        return self._src.fields.select(fields, self.values)

    def contains(self, field: str) -> bool:
        """Storm's ``contains``: whether the stream declares ``field``.

        A bolt fed by several streams asks it before reading a field that only some have.
        """
        return field in self._src.fields

    @property
    def fields(self) -> Fields:
        """The ``Fields`` the source stream declared: the names ``t[name]`` accepts."""
        return self._src.fields

    def get_fields(self) -> Fields:
        """Storm's ``getFields``: the same as ``fields``."""
        return self._src.fields

    # --- where it came from ------------------------------------------------------------
    @property
    def source_component(self) -> str:
        """The id of the component that emitted the tuple (Storm's ``getSourceComponent``)."""
        return self._src.component

    @property
    def source_stream(self) -> str:
        """The stream the tuple came on (Storm's ``getSourceStreamId``).

        A bolt subscribed to several streams of one component tells them apart by it.
        """
        return self._src.stream

    @property
    def source_task(self) -> int:
        """The task id that emitted the tuple (Storm's ``getSourceTask``)."""
        return self._src.task

    @property
    def source_global_stream_id(self) -> tuple[str, str]:
        """``(source_component, source_stream)``: the key a bolt's inputs are declared by."""
        return (self._src.component, self._src.stream)

    # --- its tree ------------------------------------------------------------------------
    @property
    def anchors_to_ids(self) -> dict[int, int]:
        """Storm's ``MessageId.getAnchorsToIds``: root id -> this tuple's edge id."""
        root = self._root
        if root is None:
            return {}
        if type(root) is int:
            return {root: self._edge}
        if type(root) is dict:
            return dict(root)
        trees: RowTrees = root  # a basic bolt's row view
        return trees.current_anchors_to_ids()

    @property
    def root_ids(self) -> frozenset[int]:
        """The ids of the spout tuples whose trees this tuple belongs to.

        A tuple anchored to several inputs (a join, an aggregate) has several roots; its
        failure replays each of those spout tuples.
        """
        return frozenset(self.anchors_to_ids)

    @property
    def completed(self) -> bool:
        """True once the tuple was acked or failed."""
        return self._ack_val is None

    def __repr__(self) -> str:
        src = self._src
        return f"Tuple({list(self.values)!r}, source={src.component!r}:{src.stream!r}@{src.task})"


class RowTrees(Protocol):
    """What a basic bolt's row view has as ``_root``: the tree of the row being executed."""

    def current_anchors_to_ids(self) -> dict[int, int]:
        """Root id -> edge id of the row being executed now (``Tuple.anchors_to_ids``).

        Asked only when user code reads a tree or keeps the tuple, so the rows of a batch
        need no per-row dict while they run.
        """
        ...


def extend_roots(roots: list[int], tuples: Iterable[Tuple]) -> None:
    """Append the root ids of every tuple in ``tuples`` to ``roots``."""
    for t in tuples:
        root = t._root
        if type(root) is int:
            roots.append(root)
        elif root is not None:
            roots.extend(root)


def is_tick_tuple(t: Tuple) -> bool:
    """Storm's ``TupleUtils.isTick``: a tuple on ``__system``'s ``__tick`` stream."""
    return t._src.component == SYSTEM_COMPONENT_ID and t._src.stream == SYSTEM_TICK_STREAM_ID
