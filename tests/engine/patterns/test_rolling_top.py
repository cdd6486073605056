"""Rolling top-N (Storm's rolling-top-words) end to end under ``simulate``."""

from __future__ import annotations

from typing import Any

from engine import run_topology
from engine.patterns import Rankings, build_rolling_top_n
from engine.testing import advance_time, simulate
from engine.windowing import Duration

from .components import ListSpout, Sink

# 20 seconds of words, one every 0.1 s: per second 5 x "a", 3 x "b", 1 x "c", 1 x "d"
SECOND = ["a", "b", "a", "c", "a", "b", "a", "d", "a", "b"]
WORDS = [[w] for _ in range(20) for w in SECOND]


def test_rolling_top_n_ranks_the_last_window_and_forgets_what_left() -> None:
    builder = build_rolling_top_n(
        "words",
        ListSpout(["word"], WORDS, interval_secs=0.1),
        "word",
        top_n=3,
        window=Duration(6),
        slide=Duration(2),
        counters=3,
        rankers=2,
        emit_frequency_secs=1.0,
    )
    builder.set_bolt("result", Sink()).shuffle_grouping("total_ranker")
    topology = builder.create_topology()

    async def main() -> Any:
        async with run_topology(topology, {"topology.seed": 5}, trace=True) as running:
            await advance_time(15)
            (sink,) = running.task_objects("result").values()
            mid = sink.seen["default"][-1][0]
            await advance_time(30)  # the words stopped at 20 s: every window empties
            return mid, sink.seen["default"][-1][0], running.report()

    mid, end, report = simulate(main())
    assert isinstance(mid, Rankings) and mid.top_n == 3
    # a 6 s window holds 6 seconds of words: 30 a, 18 b, 6 c, 6 d (top 3: c before d)
    assert mid.items == (("a", 30), ("b", 18), ("c", 6))
    assert end.items == ()
    r = report["words"]
    assert (r.acked, r.failed, r.lost) == (200, 0, 0)
