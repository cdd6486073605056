"""Test components for windowed bolts: a reliable event spout and recording bolts."""

from __future__ import annotations

import collections
from typing import Any

from engine import Bolt, Spout
from engine.windowing import WindowedBolt

EVENT_FIELDS = ["id", "key", "ts"]


class EventSpout(Spout):
    """Emits events ``(id, key, ts)`` with the id as message id, ``per_call`` per
    ``next_tuple`` every ``interval_secs`` of the clock (``batch=True``: one ``emit_batch``);
    replays what fails; task i of n takes every n-th event. Records acks and fails."""

    def __init__(
        self,
        events: list[tuple[int, int, float]],
        *,
        interval_secs: float = 0.0,
        per_call: int = 1,
        batch: bool = False,
    ) -> None:
        self.events = events
        self.interval_secs = interval_secs
        self.per_call = per_call
        self.batch = batch

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.clock = context.clock
        n = len(context.get_component_tasks(context.get_this_component_id()))
        self.todo = collections.deque(self.events[context.get_this_task_index() :: n])
        self.mine = len(self.todo)
        self.by_id = {e[0]: e for e in self.todo}
        self.next_at = 0
        self.acked: list[int] = []
        self.failed: list[int] = []

    def next_tuple(self) -> None:
        if not self.todo:
            return
        if self.interval_secs:
            now = self.clock.now_ns()
            if now < self.next_at:
                return
            self.next_at = now + round(self.interval_secs * 1e9)
        rows = [self.todo.popleft() for _ in range(min(self.per_call, len(self.todo)))]
        if self.batch:
            cols = [list(c) for c in zip(*rows, strict=True)]
            self.collector.emit_batch(cols, msg_ids=[r[0] for r in rows])
        else:
            for r in rows:
                self.collector.emit(list(r), msg_id=r[0])

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)
        self.todo.append(self.by_id[msg_id])

    def is_exhausted(self) -> bool:
        return not self.todo and len(set(self.acked)) >= self.mine

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(EVENT_FIELDS)


class RecordingWindow(WindowedBolt):
    """Records every window it sees as (ids, new ids, expired ids, start, end) and emits the
    window's size, anchored to the window."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.windows: list[tuple[list[int], list[int], list[int], float, float]] = []

    def execute(self, window: Any) -> None:
        ids = lambda ts: [t["id"] for t in ts]  # noqa: E731
        self.windows.append(
            (
                ids(window.get()),
                ids(window.get_new()),
                ids(window.get_expired()),
                window.start_timestamp,
                window.end_timestamp,
            )
        )
        self.collector.emit([len(window.get()), window.end_timestamp])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["size", "end"])


class Sink(Bolt):
    """Acks everything; records values per stream."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.seen: dict[str, list[list[Any]]] = collections.defaultdict(list)

    def execute(self, tuple: Any) -> None:
        self.seen[tuple.source_stream].append(list(tuple.values))
        self.collector.ack(tuple)
