"""How fast virtual time runs: a 10-minute simulated word count with faults.

A reliable word count whose spout offers 50 sentences per simulated second for 600
simulated seconds (30,000 sentences), with 30 s message timeouts, a task crash, an acker
crash, 2 % dropped tuples and 1 % failing tuples; then the same topology for one simulated
hour with a bolt that never acks (timeouts only). Prints wall time against simulated time
and, as the last line, JSON: {"simulated_secs", "wall_secs", "speedup", "lost",
"hour_of_timeouts_wall_secs"}.

Run: python bench/simulation.py
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

# Run as a script, bench/ leads sys.path, where bench/spark_io.py would shadow the package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent / "src"))

from engine import BasicBolt, Bolt, Config, Fields, Spout, TopologyBuilder, run_topology  # noqa: E402
from engine.testing import (  # noqa: E402
    CrashAcker,
    CrashTask,
    DropTuples,
    FailTuples,
    advance_time,
    simulate,
)

WORDS = [f"w{i}" for i in range(200)]


class PacedSpout(Spout):
    """Offers ``rate`` sentences per second of the topology's clock; replays failures."""

    def __init__(self, rate: int, seconds: int) -> None:
        self.rate = rate
        self.total = rate * seconds

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        import asyncio

        self.loop = asyncio.get_running_loop()
        self.start = self.loop.time()
        self.collector = collector
        self.next = 0
        self.retry: list[int] = []
        self.acked = 0

    def next_tuple(self) -> None:
        if self.retry:
            i = self.retry.pop()
        elif self.next < min(self.total, int((self.loop.time() - self.start) * self.rate)):
            i = self.next
            self.next += 1
        else:
            return
        words = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(8))
        self.collector.emit([i, words], msg_id=i)

    def ack(self, msg_id: Any) -> None:
        self.acked += 1

    def fail(self, msg_id: Any) -> None:
        self.retry.append(msg_id)

    def is_exhausted(self) -> bool:
        return self.acked == self.total

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "sentence"])


class Split(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        for pos, word in enumerate(tuple[1].split()):
            collector.emit([word, tuple[0], pos])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "id", "pos"])


class Count(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.seen: set[tuple[int, int]] = set()

    def execute(self, tuple: Any, collector: Any) -> None:
        self.seen.add((tuple[1], tuple[2]))


class Hold(Bolt):
    def execute(self, tuple: Any) -> None:
        pass


def ten_minutes() -> tuple[float, float, int]:
    builder = TopologyBuilder()
    builder.set_spout("sentences", PacedSpout(50, 600))
    builder.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", Count(), 2).fields_grouping("split", Fields("word"))
    conf = Config()
    conf.set_seed(1)
    conf.set_message_timeout_secs(30)
    faults = [
        CrashTask(component="split", at=120.0),
        CrashAcker(at=300.0),
        DropTuples(source="split", target="count", probability=0.02),
        FailTuples(component="count", probability=0.01),
    ]

    async def scenario() -> tuple[float, int]:
        import asyncio

        loop = asyncio.get_running_loop()
        async with run_topology(builder.create_topology(), conf, trace=True, faults=faults) as r:
            start = loop.time()
            await r.wait_until_complete(timeout=3600)
            return loop.time() - start, r.report()["sentences"].lost

    wall = time.perf_counter()
    simulated, lost = simulate(scenario())
    return simulated, time.perf_counter() - wall, lost


def hour_of_timeouts() -> float:
    builder = TopologyBuilder()
    builder.set_spout("sentences", PacedSpout(10, 60))
    builder.set_bolt("hold", Hold()).shuffle_grouping("sentences")

    async def scenario() -> None:
        async with run_topology(builder.create_topology(), {"topology.seed": 2}):
            await advance_time(3600)

    wall = time.perf_counter()
    simulate(scenario())
    return time.perf_counter() - wall


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    cpu = (
        next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            platform.processor(),
        )
        if Path("/proc/cpuinfo").exists()
        else platform.processor()
    )
    print(f"machine: {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}")
    simulated, wall, lost = ten_minutes()
    print(
        f"10-minute word count with faults: {simulated:.0f} simulated s in {wall:.2f} wall s "
        f"({simulated / wall:.0f}x), lost messages: {lost}"
    )
    hour = hour_of_timeouts()
    print(
        f"one simulated hour of 30 s timeouts (600 messages, every one replayed ~120x): "
        f"{hour:.2f} wall s"
    )
    print(
        json.dumps(
            {
                "simulated_secs": round(simulated, 1),
                "wall_secs": round(wall, 3),
                "speedup": round(simulated / wall, 1),
                "lost": lost,
                "hour_of_timeouts_wall_secs": round(hour, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
