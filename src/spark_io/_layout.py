"""How a topology's streams look as Spark columns (the Spark runner's wire format).

A component's output is one DataFrame for all its streams: ``__stream`` (the stream's
index among the component's streams), ``__src_task`` (the emitting task id, Storm's
``source_task``), ``__dtask`` (the target task id of a direct emit, else null) and one
column per field of each stream, ``s<stream>_<field>`` by position (user names may hold
any character). A field is typed when its Spark type is known (the spout's source, or the
runner's ``schemas``); otherwise it travels pickled in a binary column.

A bolt's input is the union of its subscriptions, ``__input`` telling them apart, with the
columns ``i<input>_<field>`` and ``__task``, the index of the task that executes the row.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "DIRECT_TASK",
    "INPUT",
    "LEAF",
    "SOURCE_TASK",
    "STREAM",
    "TASK",
    "OutputLayout",
    "StreamLayout",
    "in_col",
    "leaf_col",
    "out_col",
]

STREAM = "__stream"
SOURCE_TASK = "__src_task"
DIRECT_TASK = "__dtask"
TASK = "__task"
INPUT = "__input"
LEAF = "__leaf"
#: Pickle protocol of untyped fields (5: out-of-band buffers, Python 3.8+).
PICKLE_PROTOCOL = 5


def out_col(stream: int, field: int) -> str:
    return f"s{stream}_{field}"


def in_col(input: int, field: int) -> str:
    return f"i{input}_{field}"


def leaf_col(leaf: int, field: int) -> str:
    return f"l{leaf}_{field}"


@dataclass(frozen=True)
class StreamLayout:
    """One declared stream as columns: per field its Spark type (JSON) or pickled."""

    component: str
    stream: str
    index: int
    fields: tuple[str, ...]
    #: per field: the Spark DataType as JSON (``"\\"string\\""``), or None when pickled
    types: tuple[str | None, ...]
    direct: bool = False

    @property
    def typed(self) -> bool:
        return all(t is not None for t in self.types)

    def spark_types(self) -> list[Any]:
        from pyspark.sql.types import BinaryType, _parse_datatype_json_string

        return [BinaryType() if t is None else _parse_datatype_json_string(t) for t in self.types]

    def arrow_types(self) -> list[Any]:
        from pyspark.sql.pandas.types import to_arrow_type

        return [to_arrow_type(t) for t in self.spark_types()]

    def describe(self) -> str:
        return f"stream {self.stream!r} of {self.component!r}"

    def to_arrow(self, columns: list[Any], arrow_types: list[Any]) -> list[Any]:
        """Typed Arrow arrays from emitted columns (lists, numpy or Arrow), pickling the
        untyped fields; a value that does not fit its type is an error naming the field."""
        import pyarrow as pa

        out = []
        for name, kind, pickled, col in zip(
            self.fields, arrow_types, [t is None for t in self.types], columns, strict=True
        ):
            try:
                if pickled:
                    values = col.to_pylist() if hasattr(col, "to_pylist") else col
                    out.append(
                        pa.array([pickle.dumps(v, PICKLE_PROTOCOL) for v in values], pa.binary())
                    )
                elif isinstance(col, pa.ChunkedArray):
                    arr = col.combine_chunks()
                    out.append(arr if arr.type == kind else arr.cast(kind))
                elif isinstance(col, pa.Array):
                    out.append(col if col.type == kind else col.cast(kind))
                else:
                    if isinstance(col, np.ndarray) and col.dtype == object:
                        col = col.tolist()
                    out.append(pa.array(col, type=kind))
            except (
                pa.ArrowInvalid,
                pa.ArrowTypeError,
                pa.ArrowNotImplementedError,
                OverflowError,  # an int past the type's range, from pa.array
            ) as exc:
                raise TypeError(
                    f"{self.describe()}: field {name!r} does not fit its Spark type {kind}: "
                    f"{exc}; emit values of that type or fix the runner's schemas="
                ) from exc
            except (pickle.PicklingError, TypeError, AttributeError) as exc:
                raise TypeError(
                    f"{self.describe()}: field {name!r} is untyped, so its values travel "
                    f"pickled, and one does not pickle: {exc}; give the stream a Spark type "
                    f"in the runner's schemas="
                ) from exc
        return out

    def from_arrow(self, arrays: list[Any]) -> list[Any]:
        """Columns for a ``TupleBatch``: typed fields stay Arrow, pickled ones are loaded."""
        return [
            [pickle.loads(b) for b in arr.to_pylist()] if kind is None else arr
            for kind, arr in zip(self.types, arrays, strict=True)
        ]


@dataclass(frozen=True)
class OutputLayout:
    """A component's output DataFrame: its streams side by side (see the module doc)."""

    component: str
    streams: tuple[StreamLayout, ...]

    def stream(self, name: str) -> StreamLayout:
        for s in self.streams:
            if s.stream == name:
                return s
        raise KeyError(name)

    def spark_schema(self) -> Any:
        from pyspark.sql.types import IntegerType, StructField, StructType

        fields = [
            StructField(STREAM, IntegerType(), False),
            StructField(SOURCE_TASK, IntegerType(), False),
            StructField(DIRECT_TASK, IntegerType(), True),
        ]
        for s in self.streams:
            for k, kind in enumerate(s.spark_types()):
                fields.append(StructField(out_col(s.index, k), kind, True))
        return StructType(fields)

    def arrow_schema(self) -> Any:
        from pyspark.sql.pandas.types import to_arrow_schema

        return to_arrow_schema(self.spark_schema())

    def record_batch(
        self,
        schema: Any,
        stream: int,
        arrays: list[Any],
        n: int,
        source_task: int,
        direct_tasks: Any = None,
    ) -> Any:
        """One ``pyarrow.RecordBatch`` of ``schema`` holding ``n`` rows of stream index
        ``stream`` (``arrays``, typed), the other streams' columns null."""
        import pyarrow as pa

        cols: list[Any] = [
            pa.array(np.full(n, stream, np.int32)),
            pa.array(np.full(n, source_task, np.int32)),
            pa.nulls(n, pa.int32())
            if direct_tasks is None
            else pa.array(np.asarray(direct_tasks, np.int32)),
        ]
        i = 3
        for s in self.streams:
            for k in range(len(s.fields)):
                kind = schema.field(i).type
                cols.append(arrays[k] if s.index == stream else pa.nulls(n, kind))
                i += 1
        return pa.RecordBatch.from_arrays(cols, schema=schema)
