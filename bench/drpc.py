"""DRPC benchmark: a 3-stage linear DRPC topology in process.

Two functions, each a chain of three bolts behind Storm's whole DRPC machinery (the DRPC
spout, prepare-request, three coordinated bolts, join-result, return-results; acking on):

* ``exclaim`` (the headline, Storm's classic DRPC example, three stages deep): each stage
  appends "!" to the one tuple it gets. This measures what the DRPC machinery costs a
  request: 9 tuples delivered per request, count reports included.
* ``shout`` (fan-out): stage 1 splits a sentence into its ~8 words (an enveloped bolt),
  stage 2 upper-cases each (shuffled over 2 tasks), stage 3 joins a request's words once
  the request is complete there (a batch bolt, by request id): ~26 tuples per request.

Measured on one uvloop event loop that runs both the topology and the callers:

* latency at low load: one caller, one request at a time (p50 / p99 over the requests);
* throughput: 100 concurrent callers, each calling again as soon as it has its result.

Baseline, in the same run: ``exclaim``'s three stages as a plain asyncio pipeline (one
coroutine per stage, unbounded queues, a future per request, no acking, no tracking): the
cost of an in-process request/response pipeline with nothing else.

Targets (issue #5): p99 <= 10 ms at low load, >= 5,000 requests/s with 100 callers. The
last line printed is JSON: ``{"p50_ms", "p99_ms", "requests_per_s"}``, for ``exclaim``.

    PYTHONPATH=src python -m bench.drpc [--requests 3000] [--seconds 5] [--callers 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

# Run as a script, bench/ comes first on sys.path, and bench/spark_io.py would shadow
# the spark_io package.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    del sys.path[0]

import uvloop

from engine import BasicBolt, run_topology
from engine.coordination import BatchBolt
from engine.drpc import LinearDRPCTopologyBuilder, LocalDRPC

SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "storm processes unbounded streams of data",
    "a spout emits tuples and bolts process them",
    "every tuple tree is acked or failed",
]


class Exclaim(BasicBolt):
    """``(id, text) -> (id, text + "!")``; enveloped, ``(text,) -> (text + "!",)``."""

    def __init__(self, enveloped: bool = False) -> None:
        self.enveloped = enveloped

    def execute(self, tuple: Any, collector: Any) -> None:
        if self.enveloped:
            collector.emit([tuple[0] + "!"])
        else:
            collector.emit([tuple[0], tuple[1] + "!"])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["text"] if self.enveloped else ["id", "text"])


class Split(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        for word in tuple[0].split():
            collector.emit([word])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])


class Upper(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        collector.emit([tuple[0], tuple[1].upper()])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "word"])


class Join(BatchBolt):
    def prepare(self, conf: Any, context: Any, collector: Any, id: Any) -> None:
        self.collector, self.id, self.words = collector, id, []

    def execute(self, tuple: Any) -> None:
        self.words.append(tuple[1])

    def finish_batch(self) -> None:
        self.collector.emit([self.id, " ".join(sorted(self.words))])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "result"])


def exclaim(drpc: LocalDRPC) -> Any:
    builder = LinearDRPCTopologyBuilder("exclaim")
    builder.add_bolt(Exclaim(enveloped=True), 1, envelope=True)
    builder.add_bolt(Exclaim(), 1).shuffle_grouping()
    builder.add_bolt(Exclaim(), 1).shuffle_grouping()
    return builder.create_local_topology(drpc)


def shout(drpc: LocalDRPC) -> Any:
    builder = LinearDRPCTopologyBuilder("shout")
    builder.add_bolt(Split(), 1, envelope=True)
    builder.add_bolt(Upper(), 2).shuffle_grouping()
    builder.add_bolt(Join(), 1).fields_grouping(["id"])
    return builder.create_local_topology(drpc)


WORKLOADS: dict[str, tuple[Callable[[LocalDRPC], Any], Callable[[str], str]]] = {
    "exclaim": (exclaim, lambda s: s + "!!!"),
    "shout": (shout, lambda s: " ".join(sorted(w.upper() for w in s.split()))),
}


Call = Callable[[str], Awaitable[str]]


async def latency(call: Call, expected: Callable[[str], str], requests: int) -> tuple[float, float]:
    """p50 and p99 in ms, one request at a time (after a short warm-up)."""
    for i in range(200):
        await call(SENTENCES[i % len(SENTENCES)])
    samples = []
    for i in range(requests):
        sentence = SENTENCES[i % len(SENTENCES)]
        start = time.perf_counter_ns()
        result = await call(sentence)
        samples.append((time.perf_counter_ns() - start) / 1e6)
        assert result == expected(sentence)
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49], cuts[98]


async def throughput(
    call: Call, expected: Callable[[str], str], callers: int, seconds: float
) -> float:
    """Requests per second with ``callers`` concurrent callers for ``seconds``."""
    loop = asyncio.get_running_loop()
    done = 0
    stop = loop.time() + seconds

    async def caller(k: int) -> None:
        nonlocal done
        i = k
        while loop.time() < stop:
            sentence = SENTENCES[i % len(SENTENCES)]
            assert await call(sentence) == expected(sentence)
            done += 1
            i += 1

    start = time.perf_counter()
    await asyncio.gather(*(caller(k) for k in range(callers)))
    return done / (time.perf_counter() - start)


async def squall(
    workload: str, requests: int, callers: int, seconds: float
) -> tuple[float, float, float]:
    build, expected = WORKLOADS[workload]
    with LocalDRPC(request_timeout_secs=60) as drpc:
        async with run_topology(build(drpc), {"topology.seed": 1}):

            def call(sentence: str) -> Awaitable[str]:
                return drpc.execute_async(workload, sentence)

            p50, p99 = await latency(call, expected, requests)
            rate = await throughput(call, expected, callers, seconds)
            stats = drpc.statistics()
            assert stats.failed == stats.timed_out == 0, stats
    return p50, p99, rate


async def baseline(requests: int, callers: int, seconds: float) -> tuple[float, float, float]:
    """``exclaim``'s three stages as bare asyncio coroutines and queues."""
    queues: list[asyncio.Queue[Any]] = [asyncio.Queue() for _ in range(3)]

    async def stage(i: int) -> None:
        get = queues[i].get
        put = queues[i + 1].put_nowait if i < 2 else None
        while True:
            text, future = await get()
            if put is not None:
                put((text + "!", future))
            else:
                future.set_result(text + "!")

    loop = asyncio.get_running_loop()
    stages = [asyncio.ensure_future(stage(i)) for i in range(3)]

    async def call(text: str) -> str:
        future = loop.create_future()
        queues[0].put_nowait((text, future))
        return await future  # type: ignore[no-any-return]

    expected = WORKLOADS["exclaim"][1]
    try:
        p50, p99 = await latency(call, expected, requests)
        rate = await throughput(call, expected, callers, seconds)
    finally:
        for s in stages:
            s.cancel()
    return p50, p99, rate


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{platform.system()} {platform.machine()}, {cpu}, {os.cpu_count()} cores, "
        f"load average {load:.1f}; Python {platform.python_version()}, uvloop {uvloop.__version__}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000, help="latency samples")
    parser.add_argument("--seconds", type=float, default=5.0, help="throughput run length")
    parser.add_argument("--callers", type=int, default=100)
    args = parser.parse_args(argv)
    print(f"machine: {machine()}")
    runs = {
        "asyncio pipeline (baseline)": uvloop.run(
            baseline(args.requests, args.callers, args.seconds)
        ),
        "squall DRPC exclaim": uvloop.run(
            squall("exclaim", args.requests, args.callers, args.seconds)
        ),
        "squall DRPC shout (fan-out)": uvloop.run(
            squall("shout", args.requests, args.callers, args.seconds)
        ),
    }
    print(f"{'':28} {'p50 ms':>8} {'p99 ms':>8} {'requests/s':>11}")
    for name, (p50, p99, rate) in runs.items():
        print(f"{name:28} {p50:8.3f} {p99:8.3f} {rate:11,.0f}")
    p50, p99, rate = runs["squall DRPC exclaim"]
    ok = p99 <= 10 and rate >= 5000
    print(
        f"targets for exclaim (p99 <= 10 ms, >= 5,000 requests/s with {args.callers} "
        f"callers): {'met' if ok else 'NOT met'}"
    )
    print(
        json.dumps(
            {"p50_ms": round(p50, 3), "p99_ms": round(p99, 3), "requests_per_s": round(rate, 1)}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
