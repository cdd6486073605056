"""Rolling top-N (Storm's rolling-top-words): rolling counts over a sliding window, then
intermediate rankers (fields-grouped by object), then one total ranker.

- ``RollingCountBolt``: a ``WindowedBolt``; per window, one ``(obj, count)`` per object in
  it, anchored to that object's tuples, and ``(obj, 0)`` once for an object that left.
- ``IntermediateRankingsBolt``: the top ``n`` of its share of the objects, emitted as
  ``Rankings`` every ``emit_frequency_secs`` (tick tuples).
- ``TotalRankingsBolt``: merges the intermediate rankings into the global top ``n``.
- ``build_rolling_top_n``: wires the three after your spout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._model.component import BasicBolt, OutputFieldsDeclarer, Spout
from .._model.fields import Fields
from .._model.topology import TopologyBuilder
from .._model.tuple import Tuple, is_tick_tuple
from ..windowing import Duration, WindowedBolt

__all__ = [
    "IntermediateRankingsBolt",
    "Rankings",
    "RollingCountBolt",
    "TotalRankingsBolt",
    "build_rolling_top_n",
]


@dataclass(frozen=True)
class Rankings:
    """The top ``n`` as ``(obj, count)`` pairs, highest count first (ties by object repr)."""

    top_n: int
    items: tuple[tuple[Any, int], ...] = ()

    @classmethod
    def of(cls, top_n: int, counts: Mapping[Any, int]) -> Rankings:
        """The top ``top_n`` of ``counts`` (object -> count)."""
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], repr(kv[0])))
        return cls(top_n, tuple(ranked[:top_n]))

    def objects(self) -> list[Any]:
        """The ranked objects, highest count first, without their counts."""
        return [obj for obj, _ in self.items]


class RollingCountBolt(WindowedBolt):
    """Counts each value of ``field`` over a sliding window; emits ``(obj, count)``.

    Which objects were in the last window is kept in memory, as in Storm's
    ``RollingCountBolt``: a task that restarts (a crash) no longer knows them, so an object
    whose tuples were lost with it and not replayed into the new window is never sent its
    ``(obj, 0)``, and keeps its last count in the rankings.

    >>> from engine.patterns import RollingCountBolt
    >>> from engine.windowing import Duration
    >>> counter = RollingCountBolt("word").with_window(Duration(300), Duration(60))
    """

    def __init__(self, field: str) -> None:
        self.field = field

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self._last: set[Any] = set()

    def execute(self, window: Any) -> None:
        by_obj: dict[Any, list[Tuple]] = {}
        for t in window.get():
            by_obj.setdefault(t[self.field], []).append(t)
        for obj, tuples in by_obj.items():
            self.collector.emit([obj, len(tuples)], anchors=tuples)
        for obj in self._last - by_obj.keys():
            self.collector.emit([obj, 0], anchors=())  # it left the window: rankers drop it
        self._last = set(by_obj)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["obj", "count"])


class _RankingsBolt(BasicBolt):
    def __init__(self, top_n: int = 10, emit_frequency_secs: float = 2.0) -> None:
        if not isinstance(top_n, int) or isinstance(top_n, bool) or top_n <= 0:
            raise ValueError(f"{type(self).__name__}: top_n must be a positive int, got {top_n!r}")
        if not emit_frequency_secs > 0:
            raise ValueError(
                f"{type(self).__name__}: emit_frequency_secs must be > 0, got {emit_frequency_secs!r}"
            )
        self.top_n = top_n
        self.emit_frequency_secs = emit_frequency_secs

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        self.counts: dict[Any, int] = {}

    def component_configuration(self) -> Mapping[str, Any] | None:
        return {"topology.tick.tuple.freq.secs": self.emit_frequency_secs}

    def rankings(self) -> Rankings:
        """The current top ``n`` of what this task counted (emitted on every tick)."""
        return Rankings.of(self.top_n, self.counts)

    def execute(self, tuple: Tuple, collector: Any) -> None:
        if is_tick_tuple(tuple):
            collector.emit([self.rankings()])
            return
        self.update(tuple)  # every count is kept (a low one may rise); zeros are dropped

    def update(self, tuple: Tuple) -> None:
        """Take one input into ``counts``; the rankings are recomputed from them on tick."""
        raise NotImplementedError

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["rankings"])


class IntermediateRankingsBolt(_RankingsBolt):
    """Ranks the ``(obj, count)`` it receives (fields-grouped on ``obj``)."""

    def update(self, tuple: Tuple) -> None:
        obj, count = tuple[0], tuple[1]
        if count:
            self.counts[obj] = count
        else:
            self.counts.pop(obj, None)


class TotalRankingsBolt(_RankingsBolt):
    """Merges intermediate ``Rankings`` (global grouping) into the overall top ``n``: the
    latest rankings of each intermediate task replace its earlier ones."""

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        super().prepare(conf, context)
        self.by_task: dict[int, Rankings] = {}

    def update(self, tuple: Tuple) -> None:
        self.by_task[tuple.source_task] = tuple[0]
        merged: dict[Any, int] = {}
        for rankings in self.by_task.values():
            for obj, count in rankings.items:
                merged[obj] = max(count, merged.get(obj, 0))
        self.counts = merged


def build_rolling_top_n(
    spout_id: str,
    spout: Spout,
    field: str,
    *,
    top_n: int = 10,
    window: Duration | None = None,
    slide: Duration | None = None,
    counters: int = 4,
    rankers: int = 4,
    emit_frequency_secs: float = 2.0,
    builder: TopologyBuilder | None = None,
) -> TopologyBuilder:
    """Storm's rolling-top-words after ``spout``: components ``counter``,
    ``intermediate_ranker`` and ``total_ranker`` (its ``rankings`` are the result). The
    counts slide over ``window`` (default 9 s) every ``slide`` (default 3 s).

    >>> from engine.patterns import build_rolling_top_n
    >>> # builder = build_rolling_top_n("words", WordSpout(), "word", top_n=5)
    >>> # topology = builder.create_topology()
    """
    builder = builder or TopologyBuilder()
    builder.set_spout(spout_id, spout)
    counter = RollingCountBolt(field).with_window(window or Duration(9), slide or Duration(3))
    builder.set_bolt("counter", counter, counters).fields_grouping(spout_id, Fields(field))
    builder.set_bolt(
        "intermediate_ranker", IntermediateRankingsBolt(top_n, emit_frequency_secs), rankers
    ).fields_grouping("counter", Fields("obj"))
    builder.set_bolt("total_ranker", TotalRankingsBolt(top_n, emit_frequency_secs)).global_grouping(
        "intermediate_ranker"
    )
    return builder
