"""Spouts as Spark streaming sources (``pyspark.sql.datasource``), for the Spark runner.

A spout that can re-read its rows by position becomes a ``DataSourceStreamReader``: the
offsets of a micro-batch are the spout's positions, ``partitions()`` gives one Spark
partition per spout task (partition ``i`` is task index ``i``), ``read()`` runs on the
executors and yields Arrow record batches, and ``commit(end)`` tells the spout that every
row before ``end`` is done (Storm's acks, one per micro-batch). Spark keeps the offsets of
every batch in its checkpoint, so a batch that runs again reads exactly the same rows.

Two kinds of spouts qualify:

- ``ReplayableSpout``: positions per task, read through the spout's own ``read``.
- ``SparkOffsetSpout`` over files (parquet, orc, csv, json): positions are the offset
  column's values, one range for all tasks; task ``i`` reads the chunks it owns in local
  mode too (chunks of ``chunk_rows`` offsets dealt round-robin), with pyarrow on the
  executor (no Spark session there).

The reader travels to Spark's Python processes pickled in the source's options.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, cast

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from ._layout import OutputLayout
from ._offsets import FirstPollStrategy

__all__ = [
    "SOURCE_NAME",
    "OffsetFilesReader",
    "PositionReader",
    "ReplayableReader",
    "SpoutSource",
    "WrappedReader",
    "cloudpickled",
    "dump_reader",
    "load_reader",
]

#: The format name the runner reads spouts with (``spark.readStream.format(SOURCE_NAME)``).
SOURCE_NAME = "squall_spout"
_READER = "squall.reader"
_SCHEMA = "squall.schema"


def cloudpickled(value: object) -> bytes:
    """``value`` pickled by Spark's cloudpickle: what Spark's Python processes unpickle,
    classes and functions defined in a script's ``__main__`` included."""
    from pyspark import cloudpickle

    dumps = cast("Callable[[object], bytes]", cloudpickle.dumps)
    return dumps(value)


def dump_reader(reader: PositionReader) -> str:
    return base64.b64encode(cloudpickled(reader)).decode("ascii")


def load_reader(text: str) -> PositionReader:
    import pickle

    reader: PositionReader = pickle.loads(base64.b64decode(text))
    return reader


class _TaskRange(InputPartition):
    """One spout task's rows of a micro-batch: positions ``[start, end)``."""

    def __init__(self, task_index: int, start: int, end: int) -> None:
        super().__init__((task_index, start, end))
        self.task_index = task_index
        self.start = start
        self.end = end


@dataclass
class PositionReader:
    """What the stream reader needs from a spout (picklable; runs in Spark's processes)."""

    component: str
    task_ids: tuple[int, ...]
    layout: OutputLayout
    #: positions per task per micro-batch at most (Spark's default read limit)
    batch_rows: int

    @property
    def num_tasks(self) -> int:
        return len(self.task_ids)

    def initial(self) -> dict[str, int]:
        raise NotImplementedError

    def available(self) -> dict[str, int]:
        """The end positions of the rows that exist now."""
        raise NotImplementedError

    def ranges(self, start: dict[str, int], end: dict[str, int]) -> list[_TaskRange]:
        raise NotImplementedError

    def read_columns(self, task_index: int, start: int, end: int) -> Iterator[list[Any]]:
        """The typed Arrow arrays of the spout's stream, one list per record batch."""
        raise NotImplementedError

    def commit(self, end: dict[str, int]) -> None:
        """Every row before ``end`` is done (the micro-batch is committed)."""

    def latest(self, start: dict[str, int], max_rows: int | None) -> dict[str, int]:
        available = self.available()
        if max_rows is None:
            return available
        return {k: min(v, start.get(k, v) + max_rows) for k, v in available.items()}

    def read(self, part: _TaskRange) -> Iterator[Any]:
        schema = self.layout.arrow_schema()
        task = self.task_ids[part.task_index]
        for arrays in self.read_columns(part.task_index, part.start, part.end):
            n = len(arrays[0]) if arrays else 0
            if n:
                yield self.layout.record_batch(schema, 0, arrays, n, task)


@dataclass
class WrappedReader(PositionReader):
    """``inner``'s positions, rows and commits, each a method to override: what a reader
    that changes one of them (the runner's offsets named by spout, a bolt fused into the
    read) builds on."""

    inner: PositionReader

    @classmethod
    def wrapping(
        cls, reader: PositionReader, layout: OutputLayout | None = None, **more: Any
    ) -> Self:
        """A reader of this class around ``reader`` (its ``layout``, unless one is given)."""
        return cls(
            reader.component,
            reader.task_ids,
            reader.layout if layout is None else layout,
            reader.batch_rows,
            reader,
            **more,
        )

    def initial(self) -> dict[str, Any]:
        return self.inner.initial()

    def available(self) -> dict[str, Any]:
        return self.inner.available()

    def latest(self, start: dict[str, Any], max_rows: int | None) -> dict[str, Any]:
        return self.inner.latest(start, max_rows)

    def ranges(self, start: dict[str, Any], end: dict[str, Any]) -> Any:
        return self.inner.ranges(start, end)

    def read_columns(self, task_index: int, start: int, end: int) -> Iterator[list[Any]]:
        return self.inner.read_columns(task_index, start, end)

    def read(self, part: _TaskRange) -> Iterator[Any]:
        return self.inner.read(part)

    def commit(self, end: dict[str, Any]) -> None:
        self.inner.commit(end)


@dataclass
class ReplayableReader(PositionReader):
    """A ``ReplayableSpout``: positions per task (keys are task indexes)."""

    spout: Any = None

    def initial(self) -> dict[str, int]:
        n = self.num_tasks
        return {str(t): int(self.spout.start_position(t, n)) for t in range(n)}

    def available(self) -> dict[str, int]:
        n = self.num_tasks
        return {str(t): int(self.spout.end_position(t, n)) for t in range(n)}

    def ranges(self, start: dict[str, int], end: dict[str, int]) -> list[_TaskRange]:
        n = self.num_tasks
        initial: dict[str, int] | None = None
        out = []
        for t in range(n):
            s = start.get(str(t))
            if s is None:  # a task the checkpoint does not know: from its start position
                initial = initial or self.initial()
                s = initial[str(t)]
            out.append(_TaskRange(t, s, max(s, end.get(str(t), s))))
        return out

    def read_columns(self, task_index: int, start: int, end: int) -> Iterator[list[Any]]:
        from engine.runners import as_columns

        if end <= start:
            return
        stream = self.layout.streams[0]
        where = f"spout {self.component!r} read({task_index}, {self.num_tasks}, {start}, {end})"
        data = self.spout.read(task_index, self.num_tasks, start, end)
        columns, n = as_columns(data, _fields(stream.fields), where)
        if n != end - start:
            raise ValueError(f"{where} returned {n} rows; it must return exactly end - start")
        yield stream.to_arrow(columns, stream.arrow_types())

    def commit(self, end: dict[str, int]) -> None:
        n = self.num_tasks
        for t in range(n):
            if str(t) in end:
                self.spout.commit(t, n, int(end[str(t)]))


def _fields(names: Sequence[str]) -> Any:
    from engine import Fields

    return Fields(list(names))


@dataclass
class OffsetFilesReader(PositionReader):
    """A ``SparkOffsetSpout`` over files: one offset range for all tasks (key ``offset``);
    task ``i`` reads the chunks of ``chunk_rows`` offsets it owns."""

    location: str = ""
    format: str = "parquet"
    options: dict[str, str] | None = None
    offset_column: str = "offset"
    chunk_rows: int = 100_000
    first_poll: FirstPollStrategy = FirstPollStrategy.UNCOMMITTED_EARLIEST
    bounded: bool = True

    def _dataset(self) -> Any:
        import pyarrow.dataset as ds

        fmt: Any = self.format
        if self.format == "csv":
            import pyarrow as pa
            from pyarrow import csv

            opts = self.options or {}
            header = str(opts.get("header", "true")).lower() == "true"
            # Spark's string fields are read as text, an empty one as null, as Spark does:
            # pyarrow would infer "02139" as 2139 and read an empty string as ""
            stream = self.layout.streams[0]
            text = {
                f: pa.string()
                for f, kind in zip(stream.fields, stream.types, strict=True)
                if kind == '"string"' and f != self.offset_column
            }
            fmt = ds.CsvFileFormat(
                read_options=csv.ReadOptions(autogenerate_column_names=not header),
                convert_options=csv.ConvertOptions(column_types=text, strings_can_be_null=True),
            )
        return ds.dataset(self.location, format=fmt)

    def _bounds(self) -> tuple[int | None, int | None]:
        cached: tuple[int | None, int | None] | None = getattr(self, "_cached_bounds", None)
        if cached is not None:
            return cached
        bounds: tuple[int | None, int | None] | None = (
            self._parquet_bounds() if self.format == "parquet" else None
        )
        if bounds is None:
            import pyarrow.compute as pc

            column = self._dataset().to_table(columns=[self.offset_column]).column(0)
            if len(column) == 0:
                bounds = (None, None)
            else:
                low, high = pc.min_max(column).values()
                bounds = (int(low.as_py()), int(high.as_py()) + 1)
        if self.bounded and bounds[0] is not None:
            self._cached_bounds = bounds
        return bounds

    def _parquet_bounds(self) -> tuple[int | None, int | None] | None:
        """The offsets' bounds from the statistics in the parquet files' footers, without
        reading a row, or None when a file does not give them (a remote location, a row
        group without exact min/max, an offset column that is not in the files). Spark's
        source process asks for the bounds before a query's first micro-batch, and reading
        the footers needs only ``pyarrow.parquet``, where a scan would import
        ``pyarrow.dataset`` (about 0.45 s, more on a busy machine) and read the column."""
        import pyarrow.parquet as pq

        from ._txn import data_files

        root = Path(self.location)
        if "://" in self.location or not root.exists():
            return None
        files = [root] if root.is_file() else sorted(data_files(root, _scanned))
        low: int | None = None
        high: int | None = None
        for path in files:
            try:
                meta = pq.ParquetFile(path).metadata
            except (OSError, ValueError):
                return None  # not parquet (or unreadable): the scan says what is wrong
            names = [meta.schema.column(i).path for i in range(meta.num_columns)]
            if self.offset_column not in names:
                return None
            index = names.index(self.offset_column)
            for group in range(meta.num_row_groups):
                rows = meta.row_group(group)
                if rows.num_rows == 0:
                    continue
                stats = rows.column(index).statistics
                if (
                    stats is None
                    or not stats.has_min_max
                    or stats.physical_type not in ("INT32", "INT64")
                ):
                    return None
                low = stats.min if low is None else min(low, stats.min)
                high = stats.max if high is None else max(high, stats.max)
        if low is None or high is None:
            return (None, None)
        return (int(low), int(high) + 1)

    def initial(self) -> dict[str, int]:
        low, high = self._bounds()
        if low is None or high is None:
            return {"offset": 0}
        latest = self.first_poll in (FirstPollStrategy.LATEST, FirstPollStrategy.UNCOMMITTED_LATEST)
        return {"offset": high if latest else low}

    def available(self) -> dict[str, int]:
        high = self._bounds()[1]
        return {"offset": 0 if high is None else high}

    def latest(self, start: dict[str, int], max_rows: int | None) -> dict[str, int]:
        high = self.available()["offset"]
        begin = start.get("offset", high)
        if high < begin:
            high = begin
        if max_rows is not None:
            high = min(high, begin + max_rows * self.num_tasks)
        return {"offset": high}

    def ranges(self, start: dict[str, int], end: dict[str, int]) -> list[_TaskRange]:
        s = start.get("offset", 0)
        e = max(s, end.get("offset", s))
        return [_TaskRange(t, s, e) for t in range(self.num_tasks)]

    def read_columns(self, task_index: int, start: int, end: int) -> Iterator[list[Any]]:
        import pyarrow.dataset as ds

        chunk, n = self.chunk_rows, self.num_tasks
        field = ds.field(self.offset_column)
        spans = []
        k = start // chunk
        while k * chunk < end:
            if k % n == task_index:
                spans.append((field >= max(start, k * chunk)) & (field < min(end, (k + 1) * chunk)))
            k += 1
        if not spans:
            return
        where = spans[0]
        for extra in spans[1:]:
            where = where | extra
        stream = self.layout.streams[0]
        table = (
            self._dataset()
            .to_table(
                columns=list(dict.fromkeys([*stream.fields, self.offset_column])), filter=where
            )
            .sort_by(self.offset_column)
        )
        if table.num_rows:
            columns = [table.column(f) for f in stream.fields]
            yield stream.to_arrow(columns, stream.arrow_types())


def _scanned(name: str) -> bool:
    """Whether ``OffsetFilesReader``'s scan reads a file or folder named ``name``: pyarrow
    lists the folder (``_dataset``), not Spark, and leaves out every name starting with
    ``.`` or ``_`` (its default ``ignore_prefixes``), where ``_txn.listed_by_spark`` keeps
    ``_a=b.parquet`` and ``_k=1/``."""
    return not name.startswith((".", "_"))


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, reader: PositionReader) -> None:
        self.reader = reader
        self._target: dict[str, int] | None = None

    def initialOffset(self) -> dict[str, int]:
        return self.reader.initial()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.reader.batch_rows)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        max_rows = None if isinstance(limit, ReadAllAvailable) else self.reader.batch_rows
        if isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
        end = self.reader.latest(start, max_rows)
        if self._target is not None:
            end = {k: min(v, self._target.get(k, v)) for k, v in end.items()}
        # Never behind the start (a source whose rows vanished): no batch, not a rewind.
        return {k: max(v, start.get(k, v)) for k, v in end.items()}

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.reader.available()

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        if start == end:
            return []
        return self.reader.ranges(start, end)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, _TaskRange)
        return self.reader.read(partition)

    def commit(self, end: dict[str, int]) -> None:
        self.reader.commit(end)


class SpoutSource(DataSource):
    """The Python data source every spout of a Spark-run topology is read through."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> Any:
        import json

        from pyspark.sql.types import StructType

        return StructType.fromJson(json.loads(self.options[_SCHEMA]))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _StreamReader(load_reader(self.options[_READER]))


def source_options(reader: PositionReader) -> dict[str, str]:
    """The ``readStream`` options that make ``SpoutSource`` read ``reader``."""
    return {_READER: dump_reader(reader), _SCHEMA: reader.layout.spark_schema().json()}
