"""Reusable test components: a finite replaying spout and bolts of every kind.

Plain, picklable module-level classes (the engine copies components per task) that need
nothing beyond the engine (no Hypothesis), as bytewax keeps ``TestingSource`` and
``TestingSink``. ``engine.testing.strategies`` builds its random topologies from them::

    from engine import TopologyBuilder
    from engine.testing import FiniteSpout, HoldBolt, PassBolt

    builder = TopologyBuilder()
    builder.set_spout("numbers", FiniteSpout(100), 2)
    builder.set_bolt("pass", PassBolt(), 2).shuffle_grouping("numbers")
    builder.set_bolt("hold", HoldBolt(3)).global_grouping("pass")

- ``FiniteSpout(n)``: message ids 0..n-1 split over its tasks, values ``[id, key]``; replays
  failed messages; ``is_exhausted`` once every id was acked.
- ``PassBolt`` (anchors and acks), ``BasicPassBolt``, ``AsyncPassBolt`` (an ``async``
  execute that sleeps), ``FanOutBolt(k)`` (k anchored copies), ``FilterBolt(m)`` (drops some
  tuples, acks them all) and ``HoldBolt(batch)`` (holds inputs and emits one tuple
  anchored to all of them, then acks them: multi-anchoring, acking later; a tick tuple
  flushes what it holds). Every one declares the fields ``FIELDS = ("id", "key")``.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Mapping
from typing import Any

from .._model.component import BasicBolt, Bolt, Spout
from .._model.tuple import is_tick_tuple

__all__ = [
    "FIELDS",
    "AsyncPassBolt",
    "BasicPassBolt",
    "FanOutBolt",
    "FilterBolt",
    "FiniteSpout",
    "HoldBolt",
    "PassBolt",
]

#: The fields every shipped component declares on its default stream.
FIELDS = ("id", "key")


class FiniteSpout(Spout):
    """Emits message ids ``0..n_messages-1`` once each (split over its tasks), replaying
    every failed one, as values ``[id, id % keys]`` on the fields ``["id", "key"]``.

    With ``interval_secs``, each task emits at most one tuple per interval of the
    topology's ``Clock`` (virtual time under ``simulate``), so the traffic spreads over time.
    ``acked`` and ``failed`` list what the task heard, in order; the spout is exhausted
    once each of its ids was acked.

    >>> from engine import TopologyBuilder
    >>> builder = TopologyBuilder()
    >>> _ = builder.set_spout("numbers", FiniteSpout(10, interval_secs=0.01), 2)
    """

    def __init__(self, n_messages: int, keys: int = 4, interval_secs: float = 0.0) -> None:
        if n_messages < 0 or keys < 1 or interval_secs < 0:
            raise ValueError(
                f"FiniteSpout needs n_messages >= 0, keys >= 1 and interval_secs >= 0, got "
                f"{n_messages}, {keys} and {interval_secs}"
            )
        self.n_messages = n_messages
        self.keys = keys
        self.interval_secs = interval_secs

    def __repr__(self) -> str:
        keys = "" if self.keys == 4 else f", keys={self.keys}"
        interval = f", interval_secs={self.interval_secs!r}" if self.interval_secs else ""
        return f"FiniteSpout({self.n_messages}{keys}{interval})"

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self._collector = collector
        self._clock = context.clock
        n_tasks = len(context.get_component_tasks(context.get_this_component_id()))
        self.ids = list(range(context.get_this_task_index(), self.n_messages, n_tasks))
        self._next = 0
        self._next_at = 0.0
        self._retry: collections.deque[int] = collections.deque()
        self.acked: list[int] = []
        self.failed: list[int] = []

    def next_tuple(self) -> None:
        if self.interval_secs:
            now = self._now()
            if now < self._next_at:
                return
            self._next_at = now + self.interval_secs
        if self._retry:
            msg_id = self._retry.popleft()
        elif self._next < len(self.ids):
            msg_id = self.ids[self._next]
            self._next += 1
        else:
            return
        self._collector.emit([msg_id, msg_id % self.keys], msg_id=msg_id)

    def _now(self) -> float:
        if self._clock is None:  # a context made by hand, outside a runtime
            return asyncio.get_running_loop().time()
        return float(self._clock.now_ns()) / 1e9

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)
        self._retry.append(msg_id)

    def is_exhausted(self) -> bool:
        return (
            self._next >= len(self.ids)
            and not self._retry
            and len(set(self.acked)) >= len(self.ids)
        )

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(list(FIELDS))


class PassBolt(Bolt):
    """Emits each input again, anchored to it, then acks it (a rich ``Bolt``)."""

    def __repr__(self) -> str:
        return "PassBolt()"

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self._collector = collector

    def execute(self, tuple: Any) -> None:
        self._collector.emit(list(tuple.values), anchors=tuple)
        self._collector.ack(tuple)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(list(FIELDS))


class BasicPassBolt(BasicBolt):
    """Emits each input again (a ``BasicBolt``: anchored and acked by the engine)."""

    def __repr__(self) -> str:
        return "BasicPassBolt()"

    def execute(self, tuple: Any, collector: Any) -> None:
        collector.emit(list(tuple.values))

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(list(FIELDS))


class AsyncPassBolt(BasicBolt):
    """An ``async`` basic bolt: sleeps ``delay_secs`` (clock time), then emits the input."""

    def __init__(self, delay_secs: float = 0.01) -> None:
        self.delay_secs = delay_secs

    def __repr__(self) -> str:
        return f"AsyncPassBolt({self.delay_secs!r})"

    async def execute(self, tuple: Any, collector: Any) -> None:
        await asyncio.sleep(self.delay_secs)
        collector.emit(list(tuple.values))

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(list(FIELDS))


class FanOutBolt(Bolt):
    """Emits ``k`` copies of each input (keys ``key * k + j``) anchored to it, then acks."""

    def __init__(self, k: int = 2) -> None:
        self.k = k

    def __repr__(self) -> str:
        return f"FanOutBolt({self.k})"

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self._collector = collector

    def execute(self, tuple: Any) -> None:
        msg_id, key = tuple.values
        for j in range(self.k):
            self._collector.emit([msg_id, key * self.k + j], anchors=[tuple])
        self._collector.ack(tuple)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(list(FIELDS))


class FilterBolt(BasicBolt):
    """Passes on the inputs whose ``(id + key) % modulus`` is not 0; acks every input."""

    def __init__(self, modulus: int = 3) -> None:
        self.modulus = modulus

    def __repr__(self) -> str:
        return f"FilterBolt({self.modulus})"

    def execute(self, tuple: Any, collector: Any) -> None:
        msg_id, key = tuple.values
        if (msg_id + key) % self.modulus:
            collector.emit([msg_id, key])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(list(FIELDS))


class HoldBolt(Bolt):
    """Holds its inputs; once it holds ``batch`` of them (or at every tick tuple, each
    ``flush_secs``) emits one tuple anchored to all of them, then acks them all.

    An aggregation or join in miniature: multi-anchoring (often across the trees of
    several spout messages) and acks that come batches after the input arrived.
    """

    def __init__(self, batch: int = 3, flush_secs: float = 1.0) -> None:
        self.batch = batch
        self.flush_secs = flush_secs

    def __repr__(self) -> str:
        flush = "" if self.flush_secs == 1.0 else f", flush_secs={self.flush_secs!r}"
        return f"HoldBolt({self.batch}{flush})"

    def component_configuration(self) -> Mapping[str, Any]:
        return {"topology.tick.tuple.freq.secs": self.flush_secs}

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self._collector = collector
        self.held: list[Any] = []

    def execute(self, tuple: Any) -> None:
        if is_tick_tuple(tuple):
            self._flush()
            return
        self.held.append(tuple)
        if len(self.held) >= self.batch:
            self._flush()

    def _flush(self) -> None:
        held, self.held = self.held, []
        if not held:
            return
        first = min(t.values[0] for t in held)
        self._collector.emit([first, held[0].values[1]], anchors=held)
        for t in held:
            self._collector.ack(t)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(list(FIELDS))
