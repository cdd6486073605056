"""Executors' run loops: how long a spout's turn holds the event loop, and how many calls
of an async bolt run at once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from engine import BasicBolt, Spout, TopologyBuilder, run_topology
from engine.testing import simulate


class BlockingSpout(Spout):
    """``next_tuple`` blocks 20 ms (a synchronous client, say) and emits one tuple. It
    counts its calls per stretch of the loop: a callback queued at a stretch's first call
    runs as soon as the loop gets control back, and closes the stretch."""

    def __init__(self, n: int) -> None:
        self.n = n

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.sent = 0
        self.acked = 0
        self.calls = 0
        self.stretches: list[int] = []

    def next_tuple(self) -> None:
        if self.sent == self.n:
            return
        if self.calls == 0:
            asyncio.get_running_loop().call_soon(self._stretch_ended)
        self.calls += 1
        time.sleep(0.02)
        self.collector.emit([self.sent], msg_id=self.sent)
        self.sent += 1

    def _stretch_ended(self) -> None:
        self.stretches.append(self.calls)
        self.calls = 0

    def ack(self, msg_id: Any) -> None:
        self.acked += 1

    def is_exhausted(self) -> bool:
        return self.acked == self.n

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


class Sink(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        pass


def test_a_blocking_next_tuple_holds_the_loop_for_one_call_per_turn() -> None:
    builder = TopologyBuilder()
    builder.set_spout("slow", BlockingSpout(10))
    builder.set_bolt("sink", Sink()).shuffle_grouping("slow")

    async def scenario() -> list[int]:
        async with run_topology(builder.create_topology(), {"topology.seed": 1}) as running:
            await running.wait_until_complete(timeout=60)
            (spout,) = running.task_objects("slow").values()
            return list(spout.stretches)

    # Before, the spout loop looked at the clock every 16th call only (and under virtual
    # time, which stands still while a call blocks, not at all): 10 calls in one stretch.
    assert simulate(scenario()) == [1] * 10
