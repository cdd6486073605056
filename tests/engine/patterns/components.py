"""Test components for the patterns: a list spout and a recording sink."""

from __future__ import annotations

import collections
from typing import Any

from engine import Bolt, Spout


class ListSpout(Spout):
    """Emits ``rows`` (message id = index) one per ``interval_secs`` of the clock (on a fixed
    schedule: late calls catch up), on
    ``fields``; with ``replay`` it re-emits what fails. Records acks and fails."""

    def __init__(
        self,
        fields: list[str],
        rows: list[list[Any]],
        interval_secs: float = 0.0,
        replay: bool = True,
    ) -> None:
        self.fields = fields
        self.rows = rows
        self.interval_secs = interval_secs
        self.replay = replay

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.clock = context.clock
        self.todo = collections.deque(range(len(self.rows)))
        self.next_at = 0
        self.acked: list[int] = []
        self.failed: list[int] = []
        self.fail_times: list[float] = []
        self.ack_times: dict[int, float] = {}

    def next_tuple(self) -> None:
        if not self.todo:
            return
        if self.interval_secs:
            now = self.clock.now_ns()
            if now < self.next_at:
                return
            self.next_at = max(self.next_at + round(self.interval_secs * 1e9), now - 10**6)
        i = self.todo.popleft()
        self.collector.emit(list(self.rows[i]), msg_id=i)

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)
        self.ack_times[msg_id] = self.clock.now_ns() / 1e9

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)
        self.fail_times.append(self.clock.now_ns() / 1e9)
        if self.replay:
            self.todo.append(msg_id)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(self.fields)


class Sink(Bolt):
    """Acks everything; records (clock seconds, values) per stream."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.clock = context.clock
        self.seen: dict[str, list[list[Any]]] = collections.defaultdict(list)
        self.times: list[float] = []

    def execute(self, tuple: Any) -> None:
        self.seen[tuple.source_stream].append(list(tuple.values))
        self.times.append(self.clock.now_ns() / 1e9)
        self.collector.ack(tuple)
