"""Benchmark: tuples/s through windowed bolts, each beside a plain-Python baseline measured in
the same run.

Windows measured (one windowed-bolt task, a reliable spout with message ids, acking on):

``count``
    a sliding ``Count(1000)`` window every ``Count(100)``: each firing sums the window and
    emits once, anchored to all 1,000 tuples (Storm's rule), and 100 tuples leave and are
    acked. Baseline: a ``collections.deque(maxlen=1000)`` loop that sums every 100th tuple.
``time``
    a sliding ``Duration(1.0)`` window every ``Duration(0.25)`` on the runtime's clock (real
    time here). Baseline: a deque of ``(arrival ns, value)`` evicted by ``time.monotonic_ns``.

Each runs with per-tuple input (the spout calls ``emit``) and batch input (``emit_batch`` of
1,024 rows, delivered as one ``TupleBatch``), best of 2 after a warm-up run, and is also compared with the same topology
whose bolt only acks (``no window``: what the engine costs without a window). A run is timed from the first tuple to the
moment the windowed bolt has executed them all.

Room for the state helper (issue 11): ``measure_checkpoint_cost`` (throughput with
checkpoints every 1 s against none) and ``measure_redis_store`` (Redis store bolt rows/s
against a raw pipelined ``redis`` client loop) return None here; they are printed as "not
measured" and appear as ``"checkpoint"`` and ``"redis"`` in the JSON line once filled in.

    python bench/windows.py             # ~200,000 tuples per run
    python bench/windows.py --quick

The last line printed is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

try:
    import engine
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    import engine

import uvloop

from engine import Bolt, Spout, TopologyBuilder, run_topology
from engine.windowing import Count, Duration, WindowedBolt

BATCH_ROWS = 1024


# --- the machine ------------------------------------------------------------------------
def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{platform.system()} {platform.machine()}, {cpu}, {os.cpu_count()} cores, load "
        f"average {load:.1f}; Python {platform.python_version()}, engine at "
        f"{Path(engine.__file__).parent}"
    )


# --- baselines ----------------------------------------------------------------------------
def baseline_count(values: list[int], length: int = 1000, slide: int = 100) -> float:
    """Plain Python: a deque of the last ``length`` values, summed every ``slide``."""
    start = time.perf_counter()
    window: collections.deque[int] = collections.deque(maxlen=length)
    out = []
    for i, v in enumerate(values, 1):
        window.append(v)
        if i % slide == 0:
            out.append(sum(window))
    took = time.perf_counter() - start
    assert out
    return len(values) / took


def baseline_time(values: list[int], length_s: float = 1.0, slide_s: float = 0.25) -> float:
    """Plain Python: a deque of (arrival ns, value), evicted by the clock, summed per slide."""
    start = time.perf_counter()
    length, slide = round(length_s * 1e9), round(slide_s * 1e9)
    window: collections.deque[tuple[int, int]] = collections.deque()
    now = time.monotonic_ns
    next_end = now() + slide
    out = []
    for v in values:
        t = now()
        window.append((t, v))
        if t >= next_end:
            while window and window[0][0] <= t - length:
                window.popleft()
            out.append(sum(x for _, x in window))
            next_end += slide
    took = time.perf_counter() - start
    assert out is not None
    return len(values) / took


# --- the engine ---------------------------------------------------------------------------
class NumberSpout(Spout):
    def __init__(self, n: int, batch: bool) -> None:
        self.n = n
        self.batch = batch

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.i = 0

    def next_tuple(self) -> None:
        if self.i >= self.n:
            return
        if self.batch:
            k = min(BATCH_ROWS, self.n - self.i)
            ids = list(range(self.i, self.i + k))
            self.collector.emit_batch([ids], msg_ids=ids)
            self.i += k
        else:
            for _ in range(min(256, self.n - self.i)):
                self.collector.emit([self.i], msg_id=self.i)
                self.i += 1

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


class Pass(Bolt):
    """The engine without a window: ack each tuple (the second baseline)."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tuple: Any) -> None:
        self.collector.ack(tuple)


class WindowSum(WindowedBolt):
    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.fired = 0

    def execute(self, window: Any) -> None:
        self.fired += 1
        self.collector.emit([sum(t[0] for t in window.get())])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sum"])


async def _engine_run(n: int, window: str, batch: bool) -> float:
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(n, batch))
    bolt: Any = WindowSum()
    if window == "count":
        bolt.with_window(Count(1000), Count(100))
    elif window == "time":
        bolt.with_window(Duration(1.0), Duration(0.25))
    else:
        bolt = Pass()
    b.set_bolt("window", bolt).shuffle_grouping("numbers")
    conf = {"topology.message.timeout.secs": 60, "topology.seed": 1}
    async with run_topology(b.create_topology(), conf, name=f"windows-{window}") as running:
        start = time.perf_counter()
        while running.info().components["window"].executed < n:
            await asyncio.sleep(0.005)
        took = time.perf_counter() - start
    return n / took


def engine_throughput(n: int, window: str, batch: bool) -> float:
    return uvloop.run(_engine_run(n, window, batch))


def best(n: int, window: str, batch: bool, runs: int = 2) -> float:
    return max(engine_throughput(n, window, batch) for _ in range(runs))


# --- room for the state helper -----------------------------------------------------------
def measure_checkpoint_cost(n: int) -> dict[str, float] | None:
    """Throughput of a stateful windowed bolt with checkpoints every 1 s against none (the
    target: at most 10 % lower). Filled in with the stateful bolts; None until then."""
    return None


def measure_redis_store(n: int) -> dict[str, float] | None:
    """Redis store bolt rows/s against a raw pipelined ``redis`` client loop in the same run
    (the target: at least 0.7x). Filled in with the Redis bolts; None until then."""
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tuples", type=int, default=200_000)
    parser.add_argument("--quick", action="store_true", help="20,000 tuples")
    args = parser.parse_args(argv)
    n = 20_000 if args.quick else args.tuples
    print(f"machine: {machine()}")
    values = list(range(n))
    figures: dict[str, Any] = {"tuples": n}
    engine_throughput(min(n, 5000), "none", False)  # warm up: imports, the acker's kernels
    passthrough = {batch: best(n, "none", batch) for batch in (False, True)}
    print(
        f"{'':34} {'tuples/s':>10} {'deque loop':>11} {'ratio':>6} {'no window':>10} {'ratio':>6}"
    )
    for window, baseline in (("count", baseline_count), ("time", baseline_time)):
        base = max(baseline(values) for _ in range(3))
        figures[f"{window}_deque_baseline_tuples_per_s"] = round(base)
        for batch in (False, True):
            rate = best(n, window, batch)
            kind = "batch" if batch else "per_tuple"
            plain = passthrough[batch]
            figures[f"{window}_{kind}_tuples_per_s"] = round(rate)
            figures[f"no_window_{kind}_tuples_per_s"] = round(plain)
            label = f"{window} window, {kind.replace('_', '-')} input"
            print(
                f"{label:34} {rate:10,.0f} {base:11,.0f} {rate / base:6.3f} {plain:10,.0f} "
                f"{rate / plain:6.2f}"
            )
    for name, measure in (("checkpoint", measure_checkpoint_cost), ("redis", measure_redis_store)):
        result = measure(n)
        print(f"{name}: {'not measured here (state helper)' if result is None else result}")
        figures[name] = result
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
