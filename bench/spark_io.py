"""spark_io throughput: Spark into the engine and out again, beside raw Spark in the same run.

    python bench/spark_io.py [--rows 1000000]

Four figures, best of ``--repeat`` runs each, on one local Spark session:

- source: rows/s from a parquet file through ``SparkOffsetSpout`` (one task, chunks of
  ``--chunk-rows``, emitted as Arrow batches) into a batch bolt that acks them; the clock
  stops when every row is acked. Also shown: the same into a per-tuple bolt (the engine
  makes a ``Tuple`` per row for it).
- raw read: rows/s of ``spark.read.parquet(...).toArrow()`` of the same file (Arrow only).
- sink: rows/s from an in-memory spout (Arrow batches) through ``SparkSinkBolt`` (parquet,
  batches of ``--batch-rows``); the clock stops when every row is acked, i.e. durably
  written. Measured appending and transactional, each with 1 and 4 sink tasks.
- raw write: rows/s of ``spark.createDataFrame(arrow_table).write.parquet(...)``.

Also printed: the engine's own ceiling (the same topology fed by an in-memory spout), the
machine's load average, the peak growth of the process's resident memory during each run,
and that growth per row in flight (``topology.max.spout.pending``, which bounds the rows
emitted and not acked: what the source reads ahead, what the sink holds and writes), to show
that memory follows what is in flight, not the input's size. The last line is JSON.

Where the sink's time went (1M rows, batches of 250,000, 2 cores, load 1.1-3.6, a timing
of each call of one run): each write is one Spark job of 2 tasks and 2 files, as the raw
write's one job (createDataFrame 0.2-0.6 s, the save 0.7-1.0 s, the staging's renames
1-9 ms, the Arrow table under 30 ms); four writes took 4.4-4.8 s against 3.7-4.9 s for
the raw write of the same rows. The rest was waiting: 250,000 is not a multiple of the
spout's 8,192-row batches, so three batches went at 262,144 rows and the last 213,568 were
held until the tick (``batch_secs``), 3.8 s with the writer idle. Since a write's end
sends rows held for at least half a batch at once, the sink (best of 2, the same
conditions, before -> after): appending 8.50 -> 4.15 s, transactional 8.64 -> 4.26 s, 4
tasks 8.77 -> 4.71 s, transactional 4 tasks 9.15 -> 5.52 s; raw write 4.02 s (0.97x,
0.94x, 0.85x, 0.73x; the last run at load 3.3). The whole bench afterwards (load 0.9-2.4):
sink 0.69x appending, 0.73x transactional, 0.55x and 0.60x with 4 tasks; the source with the
spout's default chunks 1.06x the raw read (1.28x with 250,000-row chunks).

A later session: with ``topology.max.spout.pending`` three batches, the third batch stopped
just short of full until the first write's acks came back, so the writer never grouped and
1M rows went in 4 writes of 254k. A write now takes the rows held since, if they make half
a batch (254k, 500k, 246k: 3 writes; one sink task, timed per write, alternating with the
old code: 3.5-4.4 s against 4.2-5.0 s), and a tail under half a batch goes once the input
has been quiet a tenth of ``batch_secs`` rather than at the tick (without that, the 4-task
run left a 14,480-row tail that waited 3 s). The whole bench then (load 1-2): sink 0.86x
appending, 0.89x transactional, 0.71x and 0.66x with 4 tasks (each task writes its own
Spark jobs: 12 of them for the 4 tasks, against 3); the source 0.79x.

Later (a sink's tasks in a process now share one writer: 4 tasks write 3 Spark jobs, as
one task does; the source no longer loads its input twice before its first read), the
whole bench at load 1.3-1.5: source 1.08x the raw read, sink 0.85x appending, 0.95x
transactional, 0.90x and 0.97x with 4 tasks.

Where the source's time went (1M rows in one parquet file, which Spark reads as 2 partitions
on the 2 cores; a timeline of each run, old and new code alternating, load 4-6): the spout
reads the file in one Spark job, as the raw read does, and no row reaches the engine before
both tasks are done; the engine then takes 0.22-0.24 s for the million rows (its own work,
and the reader thread's checks sharing the GIL) while Spark is idle. That serial tail is
most of the gap, and little of it can be hidden on 2 cores: Spark keeps both busy while it
reads. The reader used to load the source again before its first query (a second file
listing and schema read): open() to the first Spark job took 0.10-0.18 s, now 0.02-0.05 s.
The whole run, old and new behaviour alternating in one process, 14 rounds each: at load
1.7-2, median 0.735 -> 0.625 s (new faster in 13 of 14; raw read median 0.497 s, so 0.68x ->
0.80x); at load 6-7, median 1.044 -> 0.992 s. Not kept: one job per partition, each served
as soon as its own task is done, changed nothing for this file (both tasks end together: no
row reached the bolt before both jobs were done); smaller partitions (the session's
maxPartitionBytes at 3 MB or 1.5 MB) got the first rows to the engine sooner but did not end
sooner. The whole bench, old and new alternating twice at load 1.3-3.5 (best of 2): the
source 0.72 and 0.80 s against 0.69 and 0.79 s; source / raw read 0.88x and 0.84x against
0.99x and 0.75x, the raw read itself taking 0.59-0.68 s.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# This file is named like the package it measures: run as a script, its folder comes first
# on sys.path and ``import spark_io`` would import this file. Drop the folder.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import uvloop  # noqa: E402

from engine import BasicBatchBolt, BasicBolt, Spout, TopologyBuilder, run_topology  # noqa: E402
from spark_io import (  # noqa: E402
    SessionConfig,
    SinkTarget,
    SparkOffsetSpout,
    SparkSinkBolt,
    SparkSource,
    spark_session,
)

#: ``SparkOffsetSpout``'s default ``chunk_rows``: the headline source figure uses the
#: spout as users get it.
SPOUT_CHUNK_ROWS = inspect.signature(SparkOffsetSpout).parameters["chunk_rows"].default
#: The second source row: larger chunks. With one spout task chunks do not shape the reads
#: (one query per pass either way): they size the read-ahead queue (``prefetch_chunks`` x
#: ``chunk_rows`` rows) and the default ``max_uncommitted_offsets``.
LARGE_CHUNK_ROWS = 250_000
#: ``topology.max.spout.pending`` of the source runs: the rows in flight at most.
SOURCE_IN_FLIGHT = 50_000


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class PeakRss:
    """Samples this process's RSS every 20 ms; ``growth`` is the peak over the start."""

    def __enter__(self) -> PeakRss:
        self.start = self.peak = rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss_bytes())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.start) / 2**20


class Drain(BasicBatchBolt):
    """Acks every row of each batch (the engine acks a basic batch bolt's rows on return)."""

    def execute_batch(self, batch: Any, collector: Any) -> None:
        pass


class DrainTuples(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        pass


#: The in-memory spouts' tables, by name: a spout holds the name, so the copy the engine
#: makes of each component (pickled, as Storm ships them) does not copy the rows.
TABLES: dict[str, pa.Table] = {}


class MemorySpout(Spout):
    """Emits an Arrow table in slices of 8,192 rows, the row index as message id (the
    engine's ceiling, and the sink's input)."""

    def __init__(self, table: str) -> None:
        self.table = table

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        table = TABLES[self.table]
        self.emit_batch = collector.emit_batch
        self.columns = [c.combine_chunks() for c in table.columns]
        self.n = table.num_rows
        self.i = 0
        self.acked = 0
        self.failed = 0

    def next_tuple(self) -> None:
        i = self.i
        k = min(self.n - i, 8192)
        if k:
            self.emit_batch([c.slice(i, k) for c in self.columns], list(range(i, i + k)))
            self.i = i + k

    def ack(self, msg_id: Any) -> None:
        self.acked += 1

    def ack_batch(self, msg_ids: list[Any]) -> None:
        self.acked += len(msg_ids)

    def fail(self, msg_id: Any) -> None:
        self.failed += 1  # not replayed: run_to_completion refuses the run's figures

    def is_exhausted(self) -> bool:
        return self.acked + self.failed == self.n

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "sentence"])


def run_to_completion(topology: Any, conf: dict[str, Any]) -> float:
    """Seconds from the start of the topology (its spouts opened) to every row acked."""

    async def main() -> float:
        # A loaded machine is slow: no tree may time out while the sink's writes queue.
        conf.setdefault("topology.message.timeout.secs", 600)
        async with run_topology(topology, conf) as running:
            start = time.perf_counter()
            await running.wait_until_complete(1200)
            seconds = time.perf_counter() - start
            info = running.info()
            failed = sum(c.failed for c in info.components.values() if c.kind == "spout")
            if failed or info.errors:
                last = f"; last error: {info.errors[-1].error}" if info.errors else ""
                raise RuntimeError(f"{failed} rows failed or timed out{last}: not a clean run")
            return seconds

    return uvloop.run(main())


def best(repeat: int, fn: Callable[[], tuple[float, float]]) -> tuple[float, float]:
    """(best seconds, peak RSS growth in MB over the runs)."""
    times, growths = [], []
    for _ in range(repeat):
        seconds, growth = fn()
        times.append(seconds)
        growths.append(growth)
    return min(times), max(growths)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument(
        "--chunk-rows",
        type=int,
        default=SPOUT_CHUNK_ROWS,
        help="the source's chunks (default: SparkOffsetSpout's default)",
    )
    parser.add_argument("--batch-rows", type=int, default=250_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    n = args.rows
    work = Path(tempfile.mkdtemp(prefix="squall-bench-spark-io-"))
    try:
        table = pa.table(
            {
                "id": pa.array(range(n), pa.int64()),
                "sentence": [f"sentence number {i} of the storm" for i in range(n)],
            }
        )
        TABLES["input"] = table
        source_path = work / "source.parquet"
        pq.write_table(table, source_path, row_group_size=100_000)
        session = SessionConfig(
            app_name="squall-bench-spark-io", warehouse_dir=str(work / "warehouse")
        )
        spark = spark_session(session)
        # Warm the JVM: the first jobs of a session pay for class loading and compilation.
        for _ in range(2):
            spark.read.parquet(str(source_path)).toArrow()
            spark.createDataFrame(table.slice(0, 100_000)).write.mode("overwrite").parquet(
                str(work / "warm")
            )

        def raw_read() -> tuple[float, float]:
            with PeakRss() as mem:
                start = time.perf_counter()
                got = spark.read.parquet(str(source_path)).toArrow()
                seconds = time.perf_counter() - start
            assert got.num_rows == n
            del got
            return seconds, mem.growth_mb

        run_id = [0]

        def source(chunk_rows: int = args.chunk_rows, drain: Any = Drain) -> tuple[float, float]:
            run_id[0] += 1
            builder = TopologyBuilder()
            builder.set_spout(
                "source",
                SparkOffsetSpout(
                    SparkSource.files(source_path),
                    "id",
                    ["id", "sentence"],
                    checkpoint_dir=work / f"checkpoint-{run_id[0]}",
                    chunk_rows=chunk_rows,
                    session=session,
                ),
            )
            builder.set_bolt("drain", drain()).shuffle_grouping("source")
            with PeakRss() as mem:
                seconds = run_to_completion(
                    builder.create_topology(), {"topology.max.spout.pending": SOURCE_IN_FLIGHT}
                )
            return seconds, mem.growth_mb

        def ceiling() -> tuple[float, float]:
            builder = TopologyBuilder()
            builder.set_spout("source", MemorySpout("input"))
            builder.set_bolt("drain", Drain()).shuffle_grouping("source")
            with PeakRss() as mem:
                seconds = run_to_completion(
                    builder.create_topology(), {"topology.max.spout.pending": 50_000}
                )
            return seconds, mem.growth_mb

        def raw_write() -> tuple[float, float]:
            run_id[0] += 1
            with PeakRss() as mem:
                start = time.perf_counter()
                spark.createDataFrame(table).write.parquet(str(work / f"raw-{run_id[0]}"))
                seconds = time.perf_counter() - start
            return seconds, mem.growth_mb

        sink_in_flight = 3 * args.batch_rows

        def sink(transactional: bool = False, tasks: int = 1) -> tuple[float, float]:
            run_id[0] += 1
            out = work / f"sink-{run_id[0]}"
            builder = TopologyBuilder()
            builder.set_spout("source", MemorySpout("input"))
            builder.set_bolt(
                "sink",
                SparkSinkBolt(
                    SinkTarget.files(out),
                    batch_rows=args.batch_rows,  # per write, of all its tasks (they share it)
                    batch_secs=5.0,
                    transactional=transactional,
                    key_field="id" if transactional else None,
                    session=session,
                ),
                tasks,
            ).shuffle_grouping("source")
            with PeakRss() as mem:
                seconds = run_to_completion(
                    builder.create_topology(), {"topology.max.spout.pending": sink_in_flight}
                )
            written = spark.read.parquet(str(out)).count()
            assert written == n, written
            return seconds, mem.growth_mb

        load_before = os.getloadavg()
        results = {}
        for name, fn in (
            ("raw_read", raw_read),
            ("source", source),
            ("source_large_chunks", lambda: source(LARGE_CHUNK_ROWS)),
            ("source_tuples", lambda: source(drain=DrainTuples)),
            ("ceiling", ceiling),
            ("raw_write", raw_write),
            ("sink", sink),
            ("sink_transactional", lambda: sink(transactional=True)),
            ("sink_4_tasks", lambda: sink(tasks=4)),
            ("sink_transactional_4_tasks", lambda: sink(transactional=True, tasks=4)),
        ):
            results[name] = best(args.repeat, fn)

        def rate(name: str) -> float:
            return n / results[name][0]

        print(
            f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"Spark {spark.version}, pyarrow {pa.__version__}, uvloop {uvloop.__version__}"
        )
        print(f"load average before the runs: {load_before}; after: {os.getloadavg()}")
        print(
            f"rows: {n:,}; source chunks of {args.chunk_rows:,} rows; sink batches of {args.batch_rows:,} "
            f"rows; best of {args.repeat}"
        )
        for name, label in (
            ("raw_read", "raw read: toArrow() of the parquet file"),
            ("source", "source: SparkOffsetSpout -> batch bolt, every row acked"),
            ("source_large_chunks", f"  the same with chunks of {LARGE_CHUNK_ROWS:,} rows"),
            ("source_tuples", "  the same into a per-tuple bolt"),
            ("ceiling", "engine ceiling: in-memory batch spout -> batch bolt, acked"),
            ("raw_write", "raw write: createDataFrame(arrow).write.parquet"),
            ("sink", "sink: in-memory spout -> SparkSinkBolt, acked when written"),
            ("sink_transactional", "  the same, transactional"),
            ("sink_4_tasks", "  the same appending, 4 sink tasks"),
            ("sink_transactional_4_tasks", "  the same, transactional, 4 sink tasks"),
        ):
            seconds, growth = results[name]
            in_flight = SOURCE_IN_FLIGHT if name.startswith("source") else sink_in_flight
            per = (
                f" ({growth * 2**20 / in_flight:,.0f} B per row in flight)"
                if name.startswith(("source", "sink"))
                else ""
            )
            print(
                f"  {label:<60}{rate(name):>12,.0f} rows/s  {seconds:6.2f} s  peak RSS "
                f"+{growth:,.0f} MB{per}"
            )
        print(
            f"source / raw read = {rate('source') / rate('raw_read'):.2f}  (target 0.8; the engine "
            f"ceiling / raw read = {rate('ceiling') / rate('raw_read'):.2f})"
        )
        for name in ("sink", "sink_transactional", "sink_4_tasks", "sink_transactional_4_tasks"):
            print(f"{name} / raw write = {rate(name) / rate('raw_write'):.2f}  (target 0.8)")

        def per_row(name: str, in_flight: int) -> int:
            return round(results[name][1] * 2**20 / in_flight)

        spark.stop()
        print(
            json.dumps(
                {
                    "source_rows_per_s": round(rate("source")),
                    "raw_read_rows_per_s": round(rate("raw_read")),
                    "sink_rows_per_s": round(rate("sink")),
                    "raw_write_rows_per_s": round(rate("raw_write")),
                    "sink_transactional_rows_per_s": round(rate("sink_transactional")),
                    "sink_4_tasks_rows_per_s": round(rate("sink_4_tasks")),
                    "sink_transactional_4_tasks_rows_per_s": round(
                        rate("sink_transactional_4_tasks")
                    ),
                    "source_vs_raw_read": round(rate("source") / rate("raw_read"), 2),
                    "sink_vs_raw_write": round(rate("sink") / rate("raw_write"), 2),
                    "source_bytes_per_row_in_flight": per_row("source", SOURCE_IN_FLIGHT),
                    "sink_bytes_per_row_in_flight": per_row("sink", sink_in_flight),
                    "load_average_1m": round(load_before[0], 2),
                }
            )
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
