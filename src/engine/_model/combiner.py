"""``CombinerBolt``: a bolt that declares it is an associative, commutative aggregation.

Storm Trident's ``CombinerAggregator`` (a zero, a value per row, a combine) in topology form.
Because neither the order nor the grouping of the rows changes the result, a runner may
combine rows *before* they cross the bolt's fields grouping, so that one partial aggregate
per key and sending task travels instead of every row: Spark's partial aggregation before
its shuffle. The Spark runner does so; the local engine combines each batch a task receives
in one pass. Either way the bolt emits, per batch it gets (a micro-batch on Spark), one row
per key: the key's fields and the combination of its rows' values, anchored to every row
of the key.

This module is the model: plain declarations, no machinery (it works on the batch and the
collector it is handed).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .batch_component import BasicBatchBolt
from .component import DEFAULT_STREAM_ID, OutputFieldsDeclarer, StreamInfo
from .errors import InvalidComponentError, InvalidDeclarationError
from .fields import Fields

__all__ = ["ARROW_COMBINES", "CombinerBolt", "CountCombiner", "SumCombiner"]

#: The Arrow hash aggregations a combiner may name (``arrow_combine``), with the Python
#: function each computes over two values.
ARROW_COMBINES: Mapping[str, Callable[[Any, Any], Any]] = {
    "sum": operator.add,
    "min": min,
    "max": max,
}


class CombinerBolt(BasicBatchBolt):
    """Subclass it: ``zero``, ``value`` (or ``value_field`` / ``constant_value``),
    ``combine``, and one output stream, the key fields then the aggregate's field.

    >>> from engine import CombinerBolt
    >>> class WordCount(CombinerBolt):
    ...     def zero(self):
    ...         return 0
    ...     def value(self, tuple):                  # each row counts 1
    ...         return 1
    ...     def combine(self, a, b):
    ...         return a + b
    ...     def declare_output_fields(self, declarer):
    ...         declarer.declare(["word", "count"])     # key: word; aggregate: count
    >>> WordCount().key_fields(), WordCount().fold([1, 1, 1])
    (Fields('word'), 3)
    >>> # builder.set_bolt("count", WordCount(), 4).fields_grouping("split", Fields("word"))

    The key is every output field but the last, read from the input by name; every input
    stream must have those fields. ``combine`` must be associative and commutative, and
    ``combine(zero(), v) == v``.

    A runner works without per-row Python when the bolt says what its value and its
    combine are in columnar terms: ``value_field`` (each row's value is that input field)
    or ``constant_value`` (every row's value, 1 for a count), and ``arrow_combine`` (the
    Arrow hash aggregation equal to ``combine``: ``"sum"``, ``"min"`` or ``"max"``).
    ``CountCombiner`` and ``SumCombiner`` are the two common cases, ready made.
    """

    #: Arrow's hash aggregation computing ``combine`` over a column, if there is one.
    arrow_combine: str | None = None
    #: Each row's value is this input field (``value`` is then not called).
    value_field: str | None = None
    #: Each row's value is this constant (``value`` is then not called).
    constant_value: Any = None

    # --- what a subclass implements --------------------------------------------------------
    def zero(self) -> Any:
        """The aggregate of no rows."""
        raise NotImplementedError

    def value(self, tuple: Any) -> Any:
        """One row's value (Trident's ``init``); by default ``value_field`` or
        ``constant_value``."""
        if self.value_field is not None:
            return tuple[self.value_field]
        if self.constant_value is not None:
            return self.constant_value
        raise NotImplementedError

    def combine(self, a: Any, b: Any) -> Any:
        """Two aggregates as one (associative and commutative)."""
        raise NotImplementedError

    # --- the declaration -------------------------------------------------------------------
    def output_fields(self) -> Fields:
        """The one stream's fields, key first: read from ``declare_output_fields``, which
        must declare exactly that stream (``InvalidDeclarationError`` otherwise)."""
        declarer = OutputFieldsDeclarer()
        self.declare_output_fields(declarer)
        info = declarer.streams.get(DEFAULT_STREAM_ID)
        if info is None or len(declarer.streams) != 1 or not len(info.fields) or info.direct:
            raise InvalidDeclarationError(
                "a CombinerBolt declares exactly one stream, the default one (not direct), "
                "with the key fields and then the aggregate's field"
            )
        return info.fields

    def key_fields(self) -> Fields:
        """The grouping key of the aggregation: every output field but the last."""
        return Fields(list(self.output_fields())[:-1])

    def check_inputs(self, component_id: str, inputs: Iterable[tuple[str, StreamInfo]]) -> None:
        """Raise ``InvalidComponentError`` unless every input stream (``(description,
        StreamInfo)``) has the key fields and the value field; ``create_topology`` calls it."""
        where = f"combiner bolt {component_id!r} ({type(self).__name__})"
        try:
            key = self.key_fields()
        except InvalidDeclarationError as exc:
            raise InvalidComponentError(f"{where}: {exc}") from None
        for name in ("zero", "combine"):
            if getattr(type(self), name) is getattr(CombinerBolt, name):
                raise InvalidComponentError(f"{where} does not implement {name}")
        custom_value = type(self).value is not CombinerBolt.value
        if not custom_value and self.value_field is None and self.constant_value is None:
            raise InvalidComponentError(
                f"{where} does not say what a row's value is: implement value(tuple) or set "
                f"value_field or constant_value"
            )
        if self.arrow_combine is not None and self.arrow_combine not in ARROW_COMBINES:
            raise InvalidComponentError(
                f"{where}: arrow_combine must be one of {sorted(ARROW_COMBINES)} or None, got "
                f"{self.arrow_combine!r}"
            )
        needed = list(key) + ([self.value_field] if self.value_field and not custom_value else [])
        for what, info in inputs:
            missing = [f for f in needed if f not in info.fields]
            if missing:
                raise InvalidComponentError(
                    f"{where}: input {what} has no field {missing[0]!r} (its fields: "
                    f"{list(info.fields)}); the key fields {list(key)} are read from every "
                    f"input by name"
                )

    # --- combining -------------------------------------------------------------------------
    def fold(self, values: Iterable[Any]) -> Any:
        """``combine`` over ``values``, from ``zero``."""
        acc = self.zero()
        combine = self.combine
        for v in values:
            acc = combine(acc, v)
        return acc

    def execute_batch(self, batch: Any, collector: Any) -> None:
        """One row per key of ``batch``: its key and its rows' combined value, anchored to
        every row of the key."""
        fields = batch.fields
        key_at = [fields.index(f) for f in self.key_fields()]
        rows: Sequence[Sequence[Any]] = batch.rows()
        if type(self).value is not CombinerBolt.value:
            values = [self.value(t) for t in batch.tuples()]
        elif self.value_field is not None:
            at = fields.index(self.value_field)
            values = [r[at] for r in rows]
        else:
            values = [self.constant_value] * len(rows)
        combine = self.combine
        accs: dict[tuple[Any, ...], Any] = {}
        members: dict[tuple[Any, ...], list[int]] = {}
        for i, (row, v) in enumerate(zip(rows, values, strict=True)):
            key = tuple(row[k] for k in key_at)
            if key in accs:
                accs[key] = combine(accs[key], v)
                members[key].append(i)
            else:
                accs[key] = combine(self.zero(), v)
                members[key] = [i]
        keys = list(accs)
        columns = [[k[j] for k in keys] for j in range(len(key_at))]
        columns.append([accs[k] for k in keys])
        collector.emit_batch(columns, anchor_groups=[members[k] for k in keys])


class _Adding(CombinerBolt):
    """What Trident's ``Count`` and ``Sum`` share: the aggregate is the sum of the rows'
    values (Arrow's ``sum`` on Spark), under the output fields the constructor was given."""

    arrow_combine = "sum"
    fields: list[str]

    def zero(self) -> int:
        return 0

    def combine(self, a: Any, b: Any) -> Any:
        return a + b

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(self.fields)


class CountCombiner(_Adding):
    """How many rows each key has (Trident's ``Count``): ``CountCombiner(["word",
    "count"])`` emits ``(word, count)``."""

    constant_value = 1

    def __init__(self, fields: Sequence[str]) -> None:
        self.fields = _fields(self, fields)


class SumCombiner(_Adding):
    """The sum of an input field per key (Trident's ``Sum``): ``SumCombiner("bytes",
    ["host", "total"])`` emits ``(host, total)``."""

    def __init__(self, value_field: str, fields: Sequence[str]) -> None:
        if not isinstance(value_field, str) or not value_field:
            raise InvalidComponentError(
                f"SumCombiner needs the name of the field to sum, got {value_field!r}"
            )
        self.value_field = value_field
        self.fields = _fields(self, fields)


def _fields(bolt: CombinerBolt, fields: Sequence[str]) -> list[str]:
    if isinstance(fields, str) or not fields:
        raise InvalidComponentError(
            f"{type(bolt).__name__} needs its output fields as a list, the key fields then "
            f"the aggregate's (e.g. ['word', 'count']), got {fields!r}"
        )
    return list(fields)
