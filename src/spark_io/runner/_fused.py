"""A spout and its one bolt in one Spark stage: the bolt runs inside the spout's read.

A bolt whose only input is a spout's stream, local-or-shuffle grouped with as many tasks as
the spout (bolt task ``i`` takes spout task ``i``'s rows, no exchange), and which is the
spout's only subscriber, needs nothing from the JVM between the two. As separate operators,
each row would still cross twice: out of the Python source into Spark's rows, and back into
Arrow for the bolt's ``mapInArrow``. Fused, the source's Python read hands its Arrow
columns straight to the bolt's task (the engine's collectors and context, as in
``mapInArrow``) and only the bolt's output enters the JVM. Positions, offsets and commits
stay the spout's: the same rows are read for a micro-batch on every run of it, and a failed
bolt fails the Spark task, which reads them again.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .._layout import SOURCE_TASK, OutputLayout, in_col
from .._stream_source import PositionReader, WrappedReader

__all__ = ["INPUT_ROWS", "FusedReader"]

#: Rows of the spout's read handed to the bolt at a time: what ``mapInArrow`` would hand it
#: (Spark's ``spark.sql.execution.arrow.maxRecordsPerBatch`` default), which also bounds
#: the output record batches that enter the JVM.
INPUT_ROWS = 10_000


@dataclass
class FusedReader(WrappedReader):
    """``inner``'s positions and rows, read through the bolt of ``plan_bytes`` (a pickled
    ``BoltPlan``); ``layout`` is the bolt's output."""

    plan_bytes: bytes = b""

    @classmethod
    def of(cls, reader: PositionReader, plan_bytes: bytes, layout: OutputLayout) -> FusedReader:
        return cls.wrapping(reader, layout, plan_bytes=plan_bytes)

    def read_columns(self, task_index: int, start: int, end: int) -> Iterator[list[Any]]:
        raise NotImplementedError(
            "a fused reader's rows are its bolt's output record batches (read), not the "
            "spout's columns"
        )

    def read(self, part: Any) -> Iterator[Any]:
        # (imported here: Spark's planning process unpickles the reader, to ask for offsets
        # and partitions only, and must not pay for importing the engine)
        from ._bolt_task import run_bolt_task

        return run_bolt_task(
            self.plan_bytes, part.task_index, self._inputs(part.task_index, part.start, part.end)
        )

    def _inputs(self, task_index: int, start: int, end: int) -> Iterable[Any]:
        """The spout task's rows as the bolt's input record batches (what the routed
        ``mapInArrow`` input would hold: the emitting task, the fields)."""
        import numpy as np
        import pyarrow as pa

        inner: PositionReader = self.inner
        stream = inner.layout.streams[0]
        names = [SOURCE_TASK, *(in_col(0, k) for k in range(len(stream.fields)))]
        task = inner.task_ids[task_index]
        for arrays in inner.read_columns(task_index, start, end):
            n = len(arrays[0]) if arrays else 0
            tasks = pa.array(np.full(min(n, INPUT_ROWS), task, np.int32))
            for lo in range(0, n, INPUT_ROWS):
                k = min(INPUT_ROWS, n - lo)
                yield pa.RecordBatch.from_arrays(
                    [tasks.slice(0, k), *(a.slice(lo, k) for a in arrays)], names=names
                )
