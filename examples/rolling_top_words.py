"""Rolling top words: Storm's rolling-top-words on sliding windows.

    words (spout: words from examples/data/storm.txt, one every 10 ms, message ids)
      -> counter (RollingCountBolt: a 9 s window every 3 s, fields grouping on "word")
      -> intermediate_ranker (top 5 of its share, every 2 s)
      -> total_ranker (the overall top 5)

Run it: ``python examples/rolling_top_words.py`` (``--seconds 60``). It runs on virtual time
(``engine.testing.simulate``), so a minute of stream takes a second or two, and prints the
top words every 6 s of stream time and the spout's message report (lost must be 0).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from engine import Bolt, Spout, run_topology
from engine.patterns import build_rolling_top_n
from engine.testing import advance_time, simulate
from engine.windowing import Duration

TEXT = Path(__file__).resolve().parent / "data" / "storm.txt"


class WordSpout(Spout):
    """Words of the text, cycling, one per ``interval_secs`` of the runtime's clock."""

    def __init__(self, interval_secs: float = 0.01) -> None:
        self.interval_secs = interval_secs

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.clock = context.clock
        self.words = [w for w in re.findall(r"[a-z']+", TEXT.read_text().lower()) if len(w) > 3]
        self.i = 0
        self.next_at = 0

    def next_tuple(self) -> None:
        now = self.clock.now_ns()
        if now < self.next_at:
            return
        self.next_at = max(self.next_at + round(self.interval_secs * 1e9), now - 10**6)
        self.collector.emit([self.words[self.i % len(self.words)]], msg_id=self.i)
        self.i += 1

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])


class Latest(Bolt):
    """Keeps the latest total rankings."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.rankings: Any = None

    def execute(self, tuple: Any) -> None:
        self.rankings = tuple[0]
        self.collector.ack(tuple)


def build() -> Any:
    builder = build_rolling_top_n(
        "words",
        WordSpout(),
        "word",
        top_n=5,
        window=Duration(9),
        slide=Duration(3),
        counters=2,
        rankers=2,
        emit_frequency_secs=2,
    )
    builder.set_bolt("latest", Latest()).global_grouping("total_ranker")
    return builder.create_topology()


async def scenario(seconds: float) -> Any:
    async with run_topology(build(), {"topology.seed": 1}, trace=True) as running:
        (latest,) = running.task_objects("latest").values()
        t = 0.0
        while t < seconds:
            await advance_time(6)
            t += 6
            top = latest.rankings.items if latest.rankings else ()
            print(f"{t:5.0f} s  " + "  ".join(f"{w} {c}" for w, c in top))
        return running.report()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    report = simulate(scenario(args.seconds))
    print(report["words"])
    return 0 if report["words"].lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
