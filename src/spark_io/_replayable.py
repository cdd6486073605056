"""``ReplayableSpout``: a spout whose rows are numbered and can be read again by number.

Storm replays a failed tuple by asking the spout for it again; a spout that can re-read any
range of its rows (a log, a file, a table with a sequence column) makes that cheap and is
what Spark's micro-batches need: each task's rows are numbered ``0, 1, 2, ...`` (its
*positions*), and a micro-batch is a range of positions per task, re-read identically when
the batch runs again. The same class runs in local mode, where it is an ordinary reliable
spout: rows are emitted in batches with their position as message id, a failed row is read
again and re-emitted, and the acked prefix is passed to ``commit``.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Any

from engine.state import RewindableSpout

from ._errors import SourceError

__all__ = ["ReplayableSpout"]


class ReplayableSpout(RewindableSpout):
    """Subclass it and implement ``end_position`` and ``read`` (and declare one stream).

    >>> from spark_io import ReplayableSpout
    >>> class Sentences(ReplayableSpout):
    ...     SENTENCES = ["the cat sat", "the dog ran"] * 50
    ...     def end_position(self, task_index, num_tasks):
    ...         return len(range(task_index, len(self.SENTENCES), num_tasks))
    ...     def read(self, task_index, num_tasks, start, end):
    ...         mine = self.SENTENCES[task_index::num_tasks]
    ...         return [mine[start:end]]                # one column per declared field
    ...     def declare_output_fields(self, declarer):
    ...         declarer.declare(["sentence"])

    - ``end_position(task_index, num_tasks)``: how many rows the task has now (positions
      ``0 .. end-1`` exist). It may grow; with ``bounded = True`` (the default) the spout is
      exhausted, in local mode, once every row up to it is acked.
    - ``read(task_index, num_tasks, start, end)``: the rows at positions ``start .. end-1``,
      exactly ``end - start`` of them, the same ones every time: one column per declared
      field, a mapping field -> column, or Arrow data.
    - ``start_position(task_index, num_tasks)``: where a new run starts (default 0).
    - ``commit(task_index, num_tasks, end)``: every row before ``end`` is done (acked in
      local mode; its micro-batch committed on Spark). Default: nothing.
    - ``spark_schema()``: the stream's Spark schema as DDL (``"sentence STRING"``); by
      default the Spark runner infers it from the first rows.

    It is a ``RewindableSpout`` (positions are its rows' numbers): feeding a stateful bolt in
    local mode, it makes that bolt's state exactly-once (``engine.state``).

    These methods may run without ``open`` (Spark calls them in its own processes), so they
    must depend only on their arguments and on what the constructor stored.
    ``batch_rows`` rows are emitted per call in local mode and read per task per
    micro-batch on Spark at most.
    """

    batch_rows: int = 10_000
    bounded: bool = True

    # --- what a subclass implements -----------------------------------------------------------
    def end_position(self, task_index: int, num_tasks: int) -> int:
        raise NotImplementedError

    def read(self, task_index: int, num_tasks: int, start: int, end: int) -> Any:
        raise NotImplementedError

    def start_position(self, task_index: int, num_tasks: int) -> int:
        return 0

    def commit(self, task_index: int, num_tasks: int, end: int) -> None:
        """Every row before ``end`` is done."""

    def spark_schema(self) -> str | None:
        return None

    # --- local mode: Storm's reliable spout over positions ------------------------------------
    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self._collector = collector
        self._task_index = context.get_this_task_index()
        self._num_tasks = len(context.get_component_tasks(context.get_this_component_id()))
        self._component = context.get_this_component_id()
        self._next = self.start_position(self._task_index, self._num_tasks)
        self._committed = self._next
        self._reported = self._next
        self._done: set[int] = set()
        self._retry: list[int] = []
        self._pending = 0
        self._end = self.end_position(self._task_index, self._num_tasks)
        self._max_pending: int | None = conf.get("topology.max.spout.pending")

    def next_tuple(self) -> None:
        if self._retry:
            position = heapq.heappop(self._retry)
            self._emit(position, position + 1)
            return
        if self._next >= self._end:
            if self.bounded:
                return
            self._end = self.end_position(self._task_index, self._num_tasks)
            if self._next >= self._end:
                return
        room = self.batch_rows
        if self._max_pending is not None:
            room = min(room, self._max_pending - self._pending)
        if room <= 0:
            return
        start, end = self._next, min(self._next + room, self._end)
        self._emit(start, end)
        self._next = end

    def _emit(self, start: int, end: int) -> None:
        data = self.read(self._task_index, self._num_tasks, start, end)
        # Message ids unique over the spout's tasks: position * num_tasks + task_index.
        n, t = self._num_tasks, self._task_index
        rows = self._collector.emit_batch(data, msg_ids=list(range(start * n + t, end * n + t, n)))
        if rows != end - start:
            raise SourceError(
                f"spout {self._component!r}: read({self._task_index}, {self._num_tasks}, "
                f"{start}, {end}) returned {rows} rows; it must return exactly end - start"
            )
        self._pending += rows

    def ack(self, msg_id: Any) -> None:
        self._pending -= 1
        position = msg_id // self._num_tasks
        self._done.add(position)
        if position != self._committed:
            return
        done = self._done
        while position in done:
            done.discard(position)
            position += 1
        self._committed = position
        if position - self._reported >= self.batch_rows or self.is_exhausted():
            self._report_commit()

    def _report_commit(self) -> None:
        self._reported = self._committed
        self.commit(self._task_index, self._num_tasks, self._committed)

    def fail(self, msg_id: Any) -> None:
        self._pending -= 1
        heapq.heappush(self._retry, msg_id // self._num_tasks)

    def is_exhausted(self) -> bool:
        return self.bounded and self._next >= self._end and not self._retry and self._pending == 0

    # --- positions: exactly-once state in local mode ------------------------------------------
    def position(self) -> int:
        """The first position not emitted yet (or waiting for a retry)."""
        return min(self._next, min(self._retry, default=self._next))

    def rewind(self, position: int) -> None:
        """Emit again from ``position``, forgetting what is in flight or waiting for a retry
        (the checkpoint wiring calls it when the stateful bolts this spout feeds roll back)."""
        self._next = position
        self._retry = []
        self._done = set()
        self._pending = 0
        self._committed = self._reported = position

    def close(self) -> None:
        if hasattr(self, "_reported") and self._committed != self._reported:
            self._report_commit()
