"""Benchmark: tuples/s through windowed bolts, each beside the same topology without a window
measured in the same run, and bytewax's windowing as a peer.

Windows measured (one windowed-bolt task, a reliable spout with message ids, acking on):

``count``
    a sliding ``Count(1000)`` window every ``Count(100)``: each firing updates a running sum
    and emits it, anchored to the window (Storm's rule); 100 tuples leave and are acked.
``time``
    a sliding ``Duration(1.0)`` window every ``Duration(0.25)`` on the runtime's clock (real
    time here), the same running sum.

Two flavours of each, against the same topology without a window (the bolt only acks):

``per_tuple``
    the spout calls ``emit`` per tuple; the bolt reads ``Tuple`` objects: Storm's sliding
    sum (``get_new()`` added, ``get_expired()`` taken off). Without a window: a ``Bolt``
    that acks each tuple.
``batch``
    the spout calls ``emit_batch`` of 1,024 rows, delivered as one ``TupleBatch``; the bolt
    reads columns (``new_column`` / ``expired_column``), no ``Tuple`` per row. Without a
    window: a ``BasicBatchBolt`` (its batches acked on return).

The spout emits until the run stops; each run is timed for 2 s after 1.5 s of warm-up, once
the time window has filled and its tuples leave (steady state: about a second of tuples in
flight, which the spout and the acker carry), as the tuples the bolt executed per second.
The runs go in rounds (``--rounds``, 3): in each round every topology runs once, each window
right after the same topology without it, and a ratio is taken within its round; the
figures are the medians over the rounds. This machine's speed drifts by a third over tens
of seconds (other tenants): the best of two runs of each, measured one topology after the
other as before, could put a window's lucky run beside its baseline's unlucky one.

Every rate is per second of the process's CPU time (``time.process_time``): the engine is
one thread, busy all along here, so on a quiet machine that is its wall-clock rate, and on
a machine shared with other work the figures (and their ratios) hold still while wall-clock
ones swing with the load. The emitted sums have no subscriber (nothing is sent; the window still checks
each emit). A sum over ``get()`` at every firing instead reads every
tuple length/slide = 10 times: the user's code, not the window, then sets the pace.

A time window holds about a second of tuples, which stay in flight until they leave it;
``held_acks`` is the same topology with a bolt that only holds each input that long before
acking it (no window): ``time_*_vs_held_acks`` is what the window costs beyond carrying its
tuples (the spout's pending map and the acker's ledger grow with them).

Also, plain Python: a ``collections.deque`` loop per window (``deque loop``), and bytewax
0.21 (``bytewax_window_events_per_s``): ``count_window`` over the same numbers keyed by
``n % 10``, tumbling 1 s windows on its ``SystemClock``, one worker in process, the best of
source batch sizes 256, 1,024 and 4,096. ``batch_window_vs_bytewax`` divides the slower of
Squall's two batch windows by it.

Measured (2 vCPUs shared, load 5-6, two runs; ratios to no window: count per tuple,
count batch, time per tuple, time batch; then bytewax):

    before (issue 17's last round, and this session's first run)
        0.77-0.91  0.68  0.71  0.38;  0.83  0.62  0.69  0.40;   1.9-2.5x bytewax
    spout roots consecutive, ledgers kept at their size (this commit)
        0.76  0.60  0.82  0.50;   0.77  0.68  0.77  0.54;    3.5-3.8x bytewax
    with main's faster per-tuple bolts merged (one run)
        0.73  0.63  0.67  0.46;   3.35x bytewax
    the same, at load 4-8 (one run; the "before" of the next row)
        0.64  0.63  0.71  0.53;   3.9x bytewax
    managed GC held to 2 % of the time, views acked in one array operation (three runs,
    load 7-8)
        0.76  0.58  0.88  0.44;   0.81  0.62  0.82  0.60;   0.78  0.64  0.93  0.45;
        2.9-4.3x bytewax
    the same with main's spout pending table merged (the batch runs without a window went
    from 4.1M to 5.8-6.6M tuples/s; four runs, load 3-10)
        0.78  0.55  0.90  0.48;   0.77  0.59  0.88  0.31;   0.79  0.56  0.79  0.32;
        0.79  0.58  0.83  0.27;   2.9-4.8x bytewax; held acks (batch) 0.30-0.53
    a later session, quiet machine (load 0-1), the old best-of-2 measurement: one run
        1.16  0.89  1.40  0.69;   4.9x bytewax (the per-tuple baseline that run: 368k)
    rounds of paired runs (medians of 3), after: growing a table no longer stops the
    loop, a spout without ``ack`` is not called per message id, and the first topology
    after a long one collects the garbage it left (``engine._runtime.gc``)
        0.78  0.66  0.99  0.55;   4.1x bytewax (time batch: 2.06M tuples/s against the
        baseline's 3.70M; each round within 0.04 of the median)
    and with the spout's pending table growing between turns, its next growth's memory
    warmed up (two runs; a first round's time window, batch, still fell to 0.23-0.25 in
    each, against 0.54-0.63 in the others, so the medians hold)
        0.88  0.67  1.00  0.54;   0.70  0.69  0.87  0.54
    a later session: large tables in private mappings (they were shared memory, slower to
    fault in and to use: the held-acks baseline, batch, 2.2-2.4M -> 3.0-3.2M tuples/s,
    alternating), complete latencies bucketed from their float bits, ack_ops without an
    index array; two runs (load 0.9-1.1; the first round's time window, batch, fell to
    0.32 and 0.23 again)
        0.90  0.60  1.05  0.61;   0.83  0.54  0.90  0.57;   6.8x bytewax; held acks
        (batch) 0.64-0.68
    a later session: ``topology.producer.batch.size`` 1024 (a per-tuple spout's turn; the
    per-tuple runs, with and without a window, 25-45 % faster), the ledger's next table
    made ahead at 3/4 of the way to its growth, not at once (three runs, load 1-2)
        0.95  0.60  0.98  0.25;   0.93  0.58  0.92  0.56;   0.91  0.60  0.91  0.34;
        2.9-6.3x bytewax; held acks (batch) 0.68-0.78

The time window, batch, still fell to 0.2-0.4 in some rounds (in some runs in every
round). Found (the ledger's and the pending table's growths logged per run, with the page
faults): the spout's pending table grew from 8 to 16 million slots inside the timed 2 s
(it grew at 7/16 full, and the window holds 3-3.5 million trees, so whether and when
depended on the run), its two fresh 128 MB arrays first written on the loop at about
10 us a page on this virtual machine: 0.7-0.8 s of CPU in that run. A task's roots are
consecutive, so the table now runs to 3/4 full (11/16 between turns) and stays at 8
million slots; and the ledger, which wrote a 640 MB table ahead at once after growing to
8 million slots, never used, now makes it at 3/4 of the way to its growth (280k page
faults per run, against 440k). In the bench's own sequence the time window, batch, went
from 1.0-1.35M to 2.8-2.9M tuples per CPU second; the whole bench then (load 1-2):
        0.95  0.63  0.99  0.69;   6.0-7.0x bytewax; held acks (batch) 0.83

Growing the tables that hold trees in flight (a time window of a second at two million
tuples a second holds two million) stopped the loop: the acker's ledger going from 4 to 8
million slots took 0.34-0.9 s (first writes of fresh memory fault a page at a time, slowly
on this virtual machine), and the spout's pending table 0.25-0.5 s (a sort of every root,
and the fresh object array of message ids). The ledger now makes its next table on a
thread once 3/8 full (then the grow takes 0.03-0.06 s), and the pending table moves its
slots without a sort, grows between the spout's turns (not inside ``next_tuple``, where
the blocking warning blamed the spout for it) and, once large, has its next growth's
memory written and freed on a thread first: its grows to 2-8 million slots took
0.03-0.11 s in a fresh process, 0.1-0.4 s when the thread is late. And the rounds in one
process had slowed each other down: a dropped topology is cyclic garbage, and the next one froze
it with the heap (``gc.freeze``), holding 0.4-0.8 GB; the same time window's second and
third runs in a process went at 1.05-1.4M tuples/s against 1.9-2.2M for the first. The
no-window baselines got faster from the same fix (3.7M tuples/s against 2.7M), so the
ratios above are lower than the earlier rows while every rate is higher.

The time window per tuple: its ``Tuple`` views live as long as the window (a second), and
the managed GC's young collection, once a second, walked all of them: 10-14 % of the run
(100-160 ms per collection; the same run without collections went from 540k to 700k
tuples/s). Collections are now held to 2 % of the wall-clock time (``engine._runtime.gc``),
which took it from 0.64-0.71 to 0.82-0.93 of no window. The count window per tuple: making
the views (``TupleBatch.tuples``, 12 %) costs what the bolt without a window pays too; the
views of the rows that left were acked one by one (5 %), now with one array operation
(their ack values written back to the batch): +5-7 % in an A/B run.

The count window, batch, stays near 0.6 (A/B of the window changes: no measurable
change). Per row, against no window (py-spy, 6 s, 2.6M vs 4.2M rows/s): the bolt +87 ns
(the bolt's sums over columns, ``new_column`` / ``expired_column`` included, 35; ``add_ids``
with its ten firings per 1,024-row batch, 28, about 2.8 us a firing in a tight loop of
Python; acks of what left, as many array acks as the batch without a window makes), the
acker +24 ns (``take_with_starts``: the window's acks come in more, smaller pieces), the
spout +27 ns (more rows in flight). Even a window core that cost nothing would leave it
near 0.75: ten firings of Python per batch is the floor of this design. With main's
pending table the baseline got faster still (6.6M/s, 150 ns a row), so the window's
fixed ~110 ns a row weigh more (0.55-0.59, though 3.7M/s against 2.6M before).

The time window, batch, is the held-acks baseline (``time_batch_vs_held_acks`` 0.9-1.1):
a second of trees in flight. Profile (py-spy, 6 s, after the pending table): the acker's
``AckerLedger.apply`` 27 % (a million live roots), the spout 33 %, the window 15 % (its
sums over a quarter second of rows, whose expired column is now read in one pass over the
batches' lists: 1.8 ms -> 1.1 ms for 250 batches).

The held-acks baseline (batch) went from 0.38-0.56 to 0.59-0.72 of no window: carrying a
second of trees is what the time windows pay. Profile of the time window, batch, steady
state (py-spy, 3 s): before, the spout's pending map 53 % (pops 27 %, inserts 26 %: random
64-bit keys in a dict of a million, a cache miss each), the ledger 8 %; after, inserts 26 %
(the dict's resizes as it churns), the ledger 15-20 % (apply, and a rehash of 1.5 M
entries taking 0.1-0.5 s whenever it grows past 2 M slots, or regrows after a lull), pops
6 %, the window itself about 11 % (``ColumnSum`` included). The count window, batch: the
window's own work is about 45 % of the bolt's time (firing every 100 rows: the columns,
the sums, the emit; ``add_ids``), acks of evicted rows 8 %.

Checkpoint cost and the Redis store bolt are measured by ``bench/state_redis.py``.

    python bench/windows.py             # about a minute
    python bench/windows.py --quick     # engine runs timed 0.5 s

The last line printed is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import platform
import statistics
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

from engine import BasicBatchBolt, BatchBolt, Bolt, Spout, TopologyBuilder, run_topology
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
    start = time.process_time()
    window: collections.deque[int] = collections.deque(maxlen=length)
    out = []
    for i, v in enumerate(values, 1):
        window.append(v)
        if i % slide == 0:
            out.append(sum(window))
    took = time.process_time() - start
    assert out
    return len(values) / took


def baseline_time(values: list[int], length_s: float = 1.0, slide_s: float = 0.25) -> float:
    """Plain Python: a deque of (arrival ns, value), evicted by the clock, summed per slide."""
    start = time.process_time()
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
    took = time.process_time() - start
    assert out is not None
    return len(values) / took


# --- the engine ---------------------------------------------------------------------------
#: Seconds an engine run goes before it is timed (the time window fills: its length and a
#: slide, and its first tuples leave), and seconds it is then timed.
WARM_UP_SECS = 1.5
TIMED_SECS = 2.0


class NumberSpout(Spout):
    """Emits 0, 1, 2, ... with message ids until the run stops."""

    def __init__(self, batch: bool) -> None:
        self.batch = batch

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.i = 0

    def next_tuple(self) -> None:
        if self.batch:
            ids = list(range(self.i, self.i + BATCH_ROWS))
            self.collector.emit_batch([ids], msg_ids=ids)
            self.i += BATCH_ROWS
        else:
            for _ in range(256):
                self.collector.emit([self.i], msg_id=self.i)
                self.i += 1

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


class Pass(Bolt):
    """The engine without a window, per tuple: ack each tuple."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tuple: Any) -> None:
        self.collector.ack(tuple)


class BatchPass(BasicBatchBolt):
    """The engine without a window, per batch: every batch acked on return."""

    def execute_batch(self, batch: Any, collector: Any) -> None:
        pass

    def declare_output_fields(self, declarer: Any) -> None:
        pass


#: How long ``HeldAcks`` holds each input: as long as the time window holds a tuple on
#: average (tuples leave 0.75 to 1 s after they arrive, at the next window end).
HOLD_SECS = 0.875


class _Holding:
    """Acks each input ``HOLD_SECS`` after it arrived."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.clock = context.clock
        self.held: collections.deque[tuple[int, Any]] = collections.deque()

    def hold(self, item: Any) -> None:
        now = self.clock.now_ns()
        held = self.held
        held.append((now, item))
        while held[0][0] <= now - HOLD_SECS * 1e9:
            self.collector.ack(held.popleft()[1])


class HeldAcks(_Holding, Bolt):
    """No window: as many tuples in flight as the time window holds, without the window
    (what carrying them costs the spout and the acker)."""

    def execute(self, tuple: Any) -> None:
        self.hold(tuple)


class HeldBatchAcks(_Holding, BatchBolt):
    """``HeldAcks`` for batches."""

    def execute_batch(self, batch: Any) -> None:
        self.hold(batch)

    def declare_output_fields(self, declarer: Any) -> None:
        pass


class WindowSum(WindowedBolt):
    """Storm's sliding sum over ``Tuple`` objects: what came in, minus what left."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.total = 0

    def execute(self, window: Any) -> None:
        for t in window.get_new():
            self.total += t[0]
        for t in window.get_expired():
            self.total -= t[0]
        self.collector.emit([self.total])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sum"])


class ColumnSum(WindowSum):
    """The same sum over columns: no ``Tuple`` per row."""

    def execute(self, window: Any) -> None:
        self.total += sum(window.new_column(0)) - sum(window.expired_column(0))
        self.collector.emit([self.total])


async def _engine_run(window: str, batch: bool, warm_up: float, timed: float) -> float:
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(batch))
    bolt: Any = ColumnSum() if batch else WindowSum()
    if window == "count":
        bolt.with_window(Count(1000), Count(100))
    elif window == "time":
        bolt.with_window(Duration(1.0), Duration(0.25))
    elif window == "held":
        bolt = HeldBatchAcks() if batch else HeldAcks()
    else:
        bolt = BatchPass() if batch else Pass()
    b.set_bolt("window", bolt).shuffle_grouping("numbers")
    conf = {"topology.message.timeout.secs": 60, "topology.seed": 1}
    async with run_topology(b.create_topology(), conf, name=f"windows-{window}") as running:
        # the bolt's executed count, read from its executor (``info()`` would summarize
        # every latency histogram at each look)
        (bolt_executor,) = [e for e in running.runtime.executors if e.component_id == "window"]
        await asyncio.sleep(warm_up)
        before, start = sum(bolt_executor.executed.values()), time.process_time()
        await asyncio.sleep(timed)
        after, end = sum(bolt_executor.executed.values()), time.process_time()
    return (after - before) / (end - start)


def engine_throughput(window: str, batch: bool, timed: float = TIMED_SECS) -> float:
    """Tuples the bolt executes per CPU second, timed after ``WARM_UP_SECS`` (steady
    state)."""
    return uvloop.run(_engine_run(window, batch, WARM_UP_SECS, timed))


# --- bytewax's windowing ------------------------------------------------------------------
#: bytewax source batch sizes tried; the best is reported.
BYTEWAX_BATCH_SIZES = (256, 1024, 4096)


def _bytewax_key(n: int) -> str:
    return str(n % 10)


def bytewax_window(values: list[int], batch_size: int) -> float:
    """Events/s of bytewax's ``count_window``: a tumbling 1 s count per key (``n % 10``)
    on its system clock, one worker in process; checks that every event was counted."""
    from datetime import UTC, datetime, timedelta

    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.operators.windowing import SystemClock, TumblingWindower, count_window
    from bytewax.testing import TestingSink, TestingSource, run_main

    flow = Dataflow("windows")
    events = op.input("numbers", flow, TestingSource(values, batch_size=batch_size))
    windower = TumblingWindower(
        length=timedelta(seconds=1), align_to=datetime(2024, 1, 1, tzinfo=UTC)
    )
    counts = count_window("count", events, SystemClock(), windower, _bytewax_key)
    out: list[Any] = []
    op.output("out", counts.down, TestingSink(out))
    start = time.process_time()
    run_main(flow)
    took = time.process_time() - start
    counted = sum(n for _, (_, n) in out)
    if counted != len(values):
        raise AssertionError(f"bytewax counted {counted} events of {len(values)}")
    return len(values) / took


def bytewax_best(values: list[int], runs: int = 2) -> tuple[float, int]:
    """The best events/s over ``BYTEWAX_BATCH_SIZES`` and its batch size."""
    rates = {b: max(bytewax_window(values, b) for _ in range(runs)) for b in BYTEWAX_BATCH_SIZES}
    size = max(rates, key=rates.__getitem__)
    return rates[size], size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tuples", type=int, default=200_000, help="events of the deque loops and bytewax"
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"engine runs timed 0.5 s, not {TIMED_SECS:g}"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of every engine run (medians reported)"
    )
    args = parser.parse_args(argv)
    n = args.tuples
    timed = 0.5 if args.quick else TIMED_SECS
    print(f"machine: {machine()}")
    values = list(range(n))
    figures: dict[str, Any] = {
        "warm_up_secs": WARM_UP_SECS,
        "timed_secs": timed,
        "rounds": args.rounds,
    }
    for batch in (False, True):
        engine_throughput("count", batch, 0.2)  # warm up: imports, the acker's kernels
    # Rounds: in each, every topology runs once, each window right after its baseline; a
    # ratio is taken within a round and the median over the rounds is reported.
    rates: dict[tuple[str, bool], list[float]] = {}
    for _ in range(args.rounds):
        for batch in (False, True):
            for window in ("none", "count", "time", "held"):
                rate = engine_throughput(window, batch, timed)
                rates.setdefault((window, batch), []).append(rate)

    def ratio(window: str, batch: bool, baseline: str = "none") -> tuple[float, list[float]]:
        each = [w / b for w, b in zip(rates[window, batch], rates[baseline, batch], strict=True)]
        return statistics.median(each), each

    def rate_of(window: str, batch: bool) -> float:
        return statistics.median(rates[window, batch])

    print(
        f"medians of {args.rounds} rounds (each round's ratios in brackets)\n"
        f"{'':34} {'tuples/s':>10} {'deque loop':>11} {'ratio':>6} {'no window':>10} {'ratio':>6}"
    )
    batch_rates = []
    for window, baseline in (("count", baseline_count), ("time", baseline_time)):
        base = max(baseline(values) for _ in range(3))
        figures[f"{window}_deque_baseline_tuples_per_s"] = round(base)
        for batch in (False, True):
            rate, plain = rate_of(window, batch), rate_of("none", batch)
            vs_plain, each = ratio(window, batch)
            kind = "batch" if batch else "per_tuple"
            figures[f"{window}_{kind}_tuples_per_s"] = round(rate)
            figures[f"no_window_{kind}_tuples_per_s"] = round(plain)
            figures[f"{window}_{kind}_vs_no_window"] = round(vs_plain, 3)
            if window == "time":
                figures[f"held_acks_{kind}_tuples_per_s"] = round(rate_of("held", batch))
                figures[f"time_{kind}_vs_held_acks"] = round(ratio("time", batch, "held")[0], 3)
            if batch:
                batch_rates.append(rate)
            label = f"{window} window, {kind.replace('_', '-')}"
            print(
                f"{label:34} {rate:10,.0f} {base:11,.0f} {rate / base:6.3f} {plain:10,.0f} "
                f"{vs_plain:6.2f} [{' '.join(f'{x:.2f}' for x in each)}]"
            )
    for batch in (False, True):
        kind = "batch" if batch else "per-tuple"
        held, each = ratio("held", batch)
        print(
            f"{'acks held ' + str(HOLD_SECS) + ' s, ' + kind:34} {rate_of('held', batch):10,.0f} "
            f"{'':11} {'':6} {rate_of('none', batch):10,.0f} {held:6.2f} "
            f"[{' '.join(f'{x:.2f}' for x in each)}]"
        )
    peer, size = bytewax_best(values)
    figures["bytewax_window_events_per_s"] = round(peer)
    figures["bytewax_window_batch_size"] = size
    figures["batch_window_vs_bytewax"] = round(min(batch_rates) / peer, 3)
    print(
        f"bytewax count_window, tumbling 1 s per key, batch {size}: {peer:,.0f} events/s; "
        f"Squall's slower batch window is {min(batch_rates) / peer:.2f}x that"
    )
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
