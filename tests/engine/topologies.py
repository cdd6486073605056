"""Spouts, bolts and helpers shared by the runtime tests (importable, so picklable)."""

from __future__ import annotations

import asyncio
import collections
import random
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from engine import (
    BasicBolt,
    Bolt,
    FailedException,
    Fields,
    ReportedFailedException,
    Spout,
    TopologyBuilder,
    is_tick_tuple,
)
from engine._time.loop import run_sync

T = TypeVar("T")

WORDS = [f"w{i}" for i in range(50)]


def sentences(n: int, words: int = 5, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(n)]


def run(coro: Coroutine[Any, Any, T]) -> T:
    return run_sync(coro)


class ListSpout(Spout):
    """Emits ``items`` with message ids 0..n-1; replays failures when ``replay``."""

    def __init__(
        self,
        items: Sequence[Sequence[Any]],
        fields: Sequence[str] = ("id", "sentence"),
        replay: bool = True,
        reliable: bool = True,
    ) -> None:
        self.items = [list(v) for v in items]
        self.fields = list(fields)
        self.replay = replay
        self.reliable = reliable

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        n_tasks = len(context.get_component_tasks(context.get_this_component_id()))
        self.ids = list(range(context.get_this_task_index(), len(self.items), n_tasks))
        self.next = 0
        self.retry: collections.deque[int] = collections.deque()
        self.acked: list[int] = []
        self.failed: list[int] = []
        self.max_pending = 0
        self.opened = True
        self.activations = 0
        self.deactivations = 0
        self.emitted_while_inactive = 0
        self.active = False

    def activate(self) -> None:
        self.activations += 1
        self.active = True

    def deactivate(self) -> None:
        self.deactivations += 1
        self.active = False

    def next_tuple(self) -> None:
        if not self.active:
            self.emitted_while_inactive += 1
        if self.retry:
            msg_id = self.retry.popleft()
        elif self.next < len(self.ids):
            msg_id = self.ids[self.next]
            self.next += 1
        else:
            return
        self.collector.emit(self.items[msg_id], msg_id=msg_id if self.reliable else None)
        self.max_pending = max(self.max_pending, self.collector.pending_count())
        if not self.reliable:
            self.acked.append(msg_id)

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)
        if self.replay:
            self.retry.append(msg_id)

    def is_exhausted(self) -> bool:
        done = len(set(self.acked))
        if not self.replay:
            done = len(set(self.acked) | set(self.failed))
        return self.next >= len(self.ids) and not self.retry and done >= len(self.ids)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(self.fields)


class SplitBolt(Bolt):
    """A rich bolt: anchors each word to the sentence, then acks the sentence."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tuple: Any) -> None:
        for position, word in enumerate(tuple["sentence"].split()):
            self.collector.emit([word, tuple["id"], position], anchors=[tuple])
        self.collector.ack(tuple)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "id", "position"])


class CountBolt(BasicBolt):
    """Counts words; with ``fail_rate`` fails that share of executions at random."""

    def __init__(self, fail_rate: float = 0.0, seed: int = 0) -> None:
        self.fail_rate = fail_rate
        self.seed = seed

    def prepare(self, conf: Any, context: Any) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.seen: set[tuple[int, int]] = set()
        self.duplicates = 0
        self.rng = random.Random(self.seed * 1000 + context.get_this_task_id())
        self.words: set[str] = set()

    def execute(self, tuple: Any, collector: Any) -> None:
        if self.fail_rate and self.rng.random() < self.fail_rate:
            raise FailedException("injected failure")
        # Idempotent under replay: one count per (sentence id, position).
        key = (tuple["id"], tuple["position"])
        if key in self.seen:
            self.duplicates += 1
            return
        self.seen.add(key)
        self.counts[tuple["word"]] += 1
        self.words.add(tuple["word"])


class NeverAckBolt(Bolt):
    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.held: list[Any] = []

    def execute(self, tuple: Any) -> None:
        self.held.append(tuple)


class SlowBolt(BasicBolt):
    """Spends ``secs`` of CPU per tuple (blocking, like a heavy computation)."""

    def __init__(self, secs: float) -> None:
        self.secs = secs

    def prepare(self, conf: Any, context: Any) -> None:
        self.executed = 0

    def execute(self, tuple: Any, collector: Any) -> None:
        end = time.perf_counter() + self.secs
        while time.perf_counter() < end:
            pass
        self.executed += 1
        collector.emit(list(tuple.values))

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "sentence"])


class RaisingBasicBolt(BasicBolt):
    """Raises ``kind`` for values in ``bad``."""

    def __init__(self, bad: set[str], kind: str) -> None:
        self.bad = bad
        self.kind = kind

    def execute(self, tuple: Any, collector: Any) -> None:
        if tuple[1] in self.bad:
            if self.kind == "failed":
                raise FailedException("quietly failed")
            if self.kind == "reported":
                raise ReportedFailedException("failed and reported")
            raise ValueError(f"bad value {tuple[1]}")


class AsyncBolt(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.inflight = 0
        self.max_inflight = 0
        self.done = 0

    async def execute(self, tuple: Any, collector: Any) -> None:
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)
        await asyncio.sleep(0.002)
        collector.emit([tuple["id"], tuple["sentence"].upper()])
        self.inflight -= 1
        self.done += 1

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "sentence"])


class CollectBolt(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.received: list[tuple[Any, ...]] = []
        self.ticks = 0

    def execute(self, tuple: Any, collector: Any) -> None:
        if is_tick_tuple(tuple):
            self.ticks += 1
            return
        self.received.append(tuple_values(tuple))


def tuple_values(t: Any) -> tuple[Any, ...]:
    return (*t.values, t.source_component, t.source_stream, t.source_task)


def word_count_topology(
    items: list[str],
    parallelism: int,
    *,
    fail_rate: float = 0.0,
    spout: Spout | None = None,
) -> Any:
    builder = TopologyBuilder()
    spout = spout or ListSpout([[i, s] for i, s in enumerate(items)])
    builder.set_spout("sentences", spout, parallelism)
    builder.set_bolt("split", SplitBolt(), parallelism).shuffle_grouping("sentences")
    builder.set_bolt("count", CountBolt(fail_rate, seed=11), parallelism).fields_grouping(
        "split", Fields("word")
    )
    return builder.create_topology()


def all_objects(running: Any, component: str) -> list[Any]:
    return list(running.task_objects(component).values())


async def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(0.002)
