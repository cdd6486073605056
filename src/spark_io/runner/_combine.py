"""Combiner bolts on Spark: partial aggregates before the shuffle, Spark's own trick.

A ``CombinerBolt`` declares an associative, commutative aggregation. Where its input is
fields-grouped on (part of) its key, or global or all, the runner combines the rows inside
the upstream bolt's ``mapInArrow`` task, after it ran: one partial aggregate per key and
upstream task per micro-batch crosses the shuffle instead of every row, and when nothing
else reads the upstream stream, its raw rows never leave Python at all. The combiner
bolt's task then combines the partials it gets (or the raw rows, where no step was put
before it) and emits one row per key per micro-batch. Both steps gives the same rows as
combining every raw row in the combiner's task: every row of a key reaches the same task
either way, and neither order nor grouping changes the result.

With ``arrow_combine`` and typed key and value columns, both steps are one Arrow
``group_by`` per record batch (no per-row Python); otherwise a Python dict folds them
with the bolt's ``combine``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine import CombinerBolt, Tuple
from engine.runners import Source, column_as_list

__all__ = ["PARTIAL_PREFIX", "Accumulator", "CombineSpec", "PartialStep", "partial_stream"]

_VALUE = "__value"
#: 2**63: a 64-bit integer's sums lie in [-_LONG, _LONG)
_LONG = 1 << 63
#: Synthetic streams of partial aggregates are named ``__partial:<combiner>:<stream>``
#: (user streams cannot start with ``__``).
PARTIAL_PREFIX = "__partial:"


def partial_stream(combiner: str, stream: str) -> str:
    return f"{PARTIAL_PREFIX}{combiner}:{stream}"


@dataclass(frozen=True)
class CombineSpec:
    """How one combiner bolt's rows combine on Spark (picklable, made by ``compile``)."""

    component: str
    key: tuple[str, ...]
    #: the Arrow hash aggregation, when keys and values are typed Arrow columns
    arrow: str | None
    value_field: str | None
    constant_value: Any
    #: ``value(tuple)`` is the user's own: it runs per row
    custom_value: bool

    @classmethod
    def of(cls, cid: str, bolt: CombinerBolt, typed: bool) -> CombineSpec:
        custom = type(bolt).value is not CombinerBolt.value
        arrow = bolt.arrow_combine if typed and not custom else None
        return cls(
            cid,
            tuple(bolt.key_fields()),
            arrow,
            None if custom else bolt.value_field,
            None if custom else bolt.constant_value,
            custom,
        )


@dataclass(frozen=True)
class PartialStep:
    """A combine step in an upstream bolt's task: its stream ``source`` (index) combined
    into the synthetic stream ``target`` (index) that the combiner bolt reads."""

    spec: CombineSpec
    source: int
    target: int
    #: the source stream's field names
    fields: tuple[str, ...]


class Accumulator:
    """Partial aggregates of one combiner over one task's micro-batch."""

    def __init__(self, spec: CombineSpec, bolt: CombinerBolt) -> None:
        self.spec = spec
        self.bolt = bolt
        self.tables: list[Any] = []
        self.accs: dict[tuple[Any, ...], Any] = {}
        #: the Arrow types of the key columns and the value, once ``accs`` holds rows of an
        #: Arrow combine (``add``)
        self.types: tuple[list[Any], Any] | None = None

    def values(
        self, fields: Sequence[str], columns: Sequence[Any], n: int, source: Source | None
    ) -> Any:
        """Each raw row's value: a column when the bolt says how, else ``value(tuple)``."""
        spec = self.spec
        if spec.value_field is not None:
            return columns[list(fields).index(spec.value_field)]
        if spec.constant_value is not None:
            if spec.arrow:
                import pyarrow as pa

                return pa.repeat(pa.scalar(spec.constant_value), n)
            return [spec.constant_value] * n
        assert source is not None
        rows = zip(*(column_as_list(c) for c in columns), strict=True)
        return [self.bolt.value(Tuple(list(r), source, None, 0)) for r in rows]

    def add(self, keys: Sequence[Any], values: Any) -> None:
        """Combine rows given as key columns and a value column."""
        if self.spec.arrow:
            if not values.null_count:
                self.tables.append(self._group(keys, values))
                return
            # Arrow's aggregations skip nulls; the engine hands them to the bolt's combine
            # (``SumCombiner``'s fails on them), so these rows go through it too.
            self.types = ([k.type for k in keys], values.type)
        accs, combine, zero = self.accs, self.bolt.combine, self.bolt.zero
        lists = [column_as_list(k) for k in keys]
        for key, v in zip(
            zip(*lists, strict=True) if lists else _unit(values),
            column_as_list(values),
            strict=True,
        ):
            accs[key] = combine(accs[key], v) if key in accs else combine(zero(), v)

    def _group(self, keys: Sequence[Any], values: Any) -> Any:
        import pyarrow as pa

        names = [f"k{i}" for i in range(len(keys))]
        table = pa.table(dict(zip([*names, _VALUE], [*keys, values], strict=True)))
        out = table.group_by(names, use_threads=False).aggregate([(_VALUE, self.spec.arrow)])
        out = out.rename_columns([*names, _VALUE])
        if self.spec.arrow == "sum" and pa.types.is_integer(table.schema.field(_VALUE).type):
            self._check_sum(table, names, out)
        return out

    def _check_sum(self, table: Any, names: list[str], out: Any) -> None:
        """Raise ``OverflowError`` if a key's sum passed a 64-bit integer (Arrow's sum
        wraps around, where the engine's Python ints grow and then fit no BIGINT)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        values = table.column(_VALUE)
        low, high = (v.as_py() for v in pc.min_max(values).values())
        if low is None or max(-low, high) * len(values) < _LONG:
            return  # no sum of these values can pass it
        exact = (
            table.set_column(len(names), _VALUE, values.cast(pa.decimal128(38, 0)))
            .group_by(names, use_threads=False)
            .aggregate([(_VALUE, "sum")])
        )
        for i, total in enumerate(exact.column(len(names)).to_pylist()):
            if total is not None and not -_LONG <= total < _LONG:
                key = tuple(exact.column(k)[i].as_py() for k in range(len(names)))
                raise OverflowError(
                    f"combiner bolt {self.spec.component!r}: the sum of key {key} is "
                    f"{int(total)}, past a 64-bit integer's range"
                )

    def result(self) -> tuple[list[Any], Any, int]:
        """``(key columns, value column, rows)``: one row per key seen."""
        if self.spec.arrow:
            import pyarrow as pa

            if self.types is not None:
                keys, values, _ = self._python_result()
                key_types, value_type = self.types
                self.types = None
                self.tables.append(
                    self._group(
                        [pa.array(k, t) for k, t in zip(keys, key_types, strict=True)],
                        pa.array(values, value_type),
                    )
                )
            if not self.tables:
                return [], [], 0
            table = self.tables[0] if len(self.tables) == 1 else pa.concat_tables(self.tables)
            if len(self.tables) > 1:
                table = self._group(table.columns[:-1], table.column(_VALUE))
            self.tables = []
            cols = [c.combine_chunks() for c in table.columns]
            return cols[:-1], cols[-1], table.num_rows
        return self._python_result()

    def _python_result(self) -> tuple[list[Any], Any, int]:
        accs, self.accs = self.accs, {}
        width = len(self.spec.key)
        keys = [[k[i] for k in accs] for i in range(width)]
        return keys, list(accs.values()), len(accs)


def _unit(values: Any) -> list[tuple[()]]:
    """The key of every row of a global aggregate (no key fields)."""
    return [()] * len(values)
