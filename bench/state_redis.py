"""Checkpoint cost of stateful bolts, and the Redis store bolt against a raw redis loop.

    python bench/state_redis.py          # ~1 minute; needs redis-server on PATH; last line: JSON
    python bench/state_redis.py --sentences 300000   # longer word count runs
    python bench/state_redis.py --state-sizes        # checkpoint cost by state size, ~5 min
    python bench/state_redis.py --store-inflight 1,64   # the store bolt alone, per setting
    python bench/state_redis.py --store-inflight 1,64 --rtt-ms 1   # Redis 1 ms away

1. Checkpoint cost: a reliable word count (sentences -> split -> count, p=1,
   ``topology.max.spout.pending`` 20,000) whose counter is a ``BasicStatefulBolt``
   checkpointing every 1 s (in-memory provider, ``put``/``get`` on its ``KeyValueState``),
   against the same topology whose counter is a plain ``BasicBolt`` counting into a dict
   (no checkpoints). Target: at most 10 % fewer sentences/s (``checkpoint_cost``); the same
   per CPU second of the process (``checkpoint_cost_cpu``: the engine runs in one thread,
   so on a shared machine it is the steadier figure). 60,000 sentences take about 0.4 s on
   a quiet machine, less than the interval: ``--sentences`` runs longer.
2. Redis store: a spout emits rows ``(key, 1)`` in batches (``emit_batch``, message ids) to a
   ``RedisStoreBolt`` (``HINCRBY``), every row acked after Redis confirmed; against a raw
   loop sending the same commands with the asyncio ``redis`` client, one pipeline per 256
   rows. Target: >= 0.7x the raw loop's rows/s. redis-server is started on a free loopback
   port in a temporary directory.

Each measurement runs once per round, rounds interleaved, best of 3 (the machine is shared).
The word count also prints each round's own cost (its two runs back to back see the same
load) and their median (``checkpoint_cost_paired`` / ``_paired_cpu``): the best of 3 of
half-second runs picks its two figures from different moments of a shared machine's load.

``--state-sizes``: the word count over a vocabulary of 1k, 100k and 1M words (sentence ``i``
brings words ``8i`` to ``8i + 7``; 125,000 sentences for 1M, so the state ends with that
many keys), and one checkpoint's time (prepare + commit) per provider on a state of that
many keys, after every key changed and after 1,000 changed, with the time to load it again.

Measured at ca998ce (2 vCPUs shared, load 3-11; ``checkpoint_cost`` / ``_cpu``):

    default (60,000 sentences), 3 runs   0.180 / 0.130   0.257 / 0.173   0.353 / 0.143
    --sentences 600000, 2 runs           0.202 / 0.155   0.228 / 0.141
    --state-sizes   1k keys 0.213 / 0.144   100k keys 0.499 / 0.471   1M keys 0.254 / 0.422

    one checkpoint, ms (every key changed / 1,000 changed; load)
                1k keys             100k keys              1M keys
    memory      0.4 / 0.27; 0.5     123 / 0.37; 113        1,043 / 0.68; 1,401
    sqlite      4.7 / 2.6; 1.4      699 / 11.4; 122        3,578 / 14.2; 2,970
    redis      20.2 / 8.3; 7.9      602 / 4.3; 346         8,332 / 5.4; 5,487

Measured again after: a small state of plain values finds a checkpoint's changes by
comparison (``put`` only sets the value), the in-memory store keeps objects (no encoding),
spout roots are consecutive and the acker's ledgers keep their size between checkpoints
(same machine, load 3.5-7; the every-key checkpoint is now timed on a state made and
checkpointed once before, not on its first checkpoint):

    default, 5 runs      0.137 / 0.086   0.112 / 0.085   0.281 / 0.041
                         0.195 / 0.103   0.065 / 0.104
    (before, this session, at load 1: 0.063 / 0.115)
    with main's faster per-tuple bolts merged, load 6.5-8, 4 runs:
                         0.235 / 0.123   0.059 / 0.082   0.073 / 0.069   -0.019 / 0.069
    --sentences 600000   0.169 / 0.081
    --state-sizes   1k keys 0.119 / 0.088   100k keys 0.349 / 0.321   1M keys 0.339 / 0.316

    one checkpoint, ms     1k keys             100k keys              1M keys
    memory                 0.2 / 0.14; 0.0     21 / 0.06; 2.6         388 / 0.20; 54
    sqlite                 7.3 / 2.9; 1.5      478 / 23; 225          6,814 / 16; 3,404
    redis                  3.6 / 3.8; 5.5      605 / 11; 634          8,685 / 12; 6,745

The wall-clock cost swings with the load (the runs last 0.4 s); the CPU one holds at
0.07-0.10 but for one outlier each way in nine runs. Profile of what is left (py-spy, the
same word count with the checkpointed bolt counting into a plain dict, and with
``KeyValueState``, interleaved, CPU seconds): the checkpoint machinery (barriers, held
acks, the checkpoint spout, the ledger holding trees for ~0.1 s) +3 %, ``put``/``get``
being calls where a dict's are not +5-7 %.

Measured again after ``STOPPED_IDLE_NS`` fell from 20 to 10 ms, with the checkpoint spout
then also polling every 0.25 ms (since reverted: an idle stateful topology used 4-5 % of
a CPU, not 2.2-2.8 %), on 2 shared vCPUs at load 0.6-5.7, another job's JVM using up to
1.8 of them. Whole-run figures cannot tell 10 % from 20 % here: the
same code, alternated with the new (``checkpoint_cost`` / ``_cpu``, each line one run):

    before, default          0.093 / 0.016   0.208 / 0.223   0.083 / 0.037
                             0.146 / 0.028   -0.102 / -0.138   -0.007 / -0.006
    after, default           0.113 / 0.096   0.127 / 0.092   0.180 / 0.182
                             -0.077 / -0.109   0.077 / 0.095   0.283 / 0.265
    (after, quiet, load 0.6: 0.122 / 0.120, rounds 0.100 / 0.126 / 0.122)
    before, --sentences 300000   -0.099 / -0.105   0.208 / 0.174   0.104 / 0.097
    after,  --sentences 300000    0.157 / 0.156    0.044 / 0.016   0.032 / 0.007

(the rounds' own costs swing as much: -0.11 to +0.35 within one run). What the stateful run
does beyond the plain one was measured instead. py-spy (300 Hz, 5 runs of 60,000 sentences
per profile, two profiles each, samples inside the run): the same work takes the same
samples in both (spout 315-419, split 308-353, the bolt executor 334-365, the acker
51-71); the counter's ``execute`` takes 306-320 against 200-214, i.e. ``put`` being a
Python call and ``get`` a bound method where a dict's are specialized (+7 % of the run:
the put body's lines alone 77 samples), and the barriers, the gates' ``admit`` and the
checkpoint spout 28-31 (+2 %). A dict subclass with ``put = dict.__setitem__`` and a
``put`` bound to the dict's ``__setitem__`` both measured slower than the method
(176-188 and 180 ns per ``put(w, get(w, 0) + 1)``, against 139-157; a dict: 80). The
rest is the end of a finite run: its last tuples wait for a checkpoint that starts once
the input has stopped. The input was idle mostly 21-36 ms (medians 23-32) when the
last ``PREPARE`` started (20 ms, then up to 16 ms of the checkpoint spout's sleep, which
grows to 16x its 1 ms wait while it has nothing to emit); with 10 ms, 11-26 ms (medians
16-17; with the 0.25 ms poll too, 10-14), 8 runs each, alternated. Per-tuple: held acks are arrays kept by the
executor's ``AckHold`` (a basic bolt stays on the per-tuple fast path; forwarders hold
none); the spout's pending table and the acker's ledger, larger by the held trees, did
not show in the profiles (``PendingTable``, ``AckerLedger.apply``: no more samples).

``--store-inflight 1,64`` measures only the store bolt, once per ``topology.bolt.max.inflight``
value (and the raw loop): 1 is one pipeline in flight per task at a time, as the engine ran
async batch bolts before they ran concurrently; 64 is the default. On a loopback Redis a round
trip costs little, so concurrency gains little there; each millisecond of network between
the bolt and Redis costs a one-at-a-time bolt a millisecond per batch. ``--rtt-ms`` puts
that network in: the bolt and the raw loop then talk to Redis through a proxy (a child
process) that holds every chunk half the round trip each way.

Measured at 6fb42f8 (2 vCPUs shared with other jobs, load average 11-14, so CPU-bound
figures are low and noisy), rows/s, best of 3, each line one run of the command:

    --store-inflight 1,64              raw 25,293   inflight 1 19,189   inflight 64 23,862
    --store-inflight 1,64 --rtt-ms 1   raw 19,830   inflight 1 17,629   inflight 64 20,761
    --store-inflight 1,64 --rtt-ms 10  raw 11,878   inflight 1  9,588   inflight 64 21,644

(at load 6-7, ``--rtt-ms 1``: inflight 1 13,442-32,824, inflight 64 51,423-51,918).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import multiprocessing
import os
import platform
import shutil
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from engine import BasicBolt, Fields, Spout, TopologyBuilder, run_topology
from engine.redis import (
    LocalRedisServer,
    RedisConfig,
    RedisDataType,
    RedisStoreBolt,
    RedisStoreMapper,
)
from engine.state import (
    BasicStatefulBolt,
    InMemoryStateStore,
    KeyValueState,
    RedisStateStore,
    SqliteStateStore,
    StateStore,
)

SENTENCES = 60_000
ROWS = 200_000
BATCH = 256
VOCAB = [f"w{i}" for i in range(500)]


_VOCABS: dict[int, list[str]] = {}


def vocabulary(size: int) -> list[str]:
    """``size`` words, made once (before any timing starts)."""
    if size not in _VOCABS:
        _VOCABS[size] = [f"w{i}" for i in range(size)]
    return _VOCABS[size]


class Sentences(Spout):
    """Sentence ``i`` has 8 words: ``VOCAB[(i * 31 + j * 17) % 500]``, or with ``vocab``
    the words ``i * 8 + j`` of a vocabulary that many words long (every word new until it
    is used up)."""

    def __init__(self, n: int, vocab: int = 0) -> None:
        self.n = n
        self.vocab = vocab

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.i, self.acked = collector, 0, 0
        self.failed: collections.deque[int] = collections.deque()
        self.words = vocabulary(self.vocab) if self.vocab else None

    def next_tuple(self) -> None:
        for _ in range(BATCH):
            if self.failed:
                i = self.failed.popleft()
            elif self.i < self.n:
                i = self.i
                self.i += 1
            else:
                return
            if self.words is None:
                words = " ".join(VOCAB[(i * 31 + j * 17) % len(VOCAB)] for j in range(8))
            else:
                vocab, size = self.words, self.vocab
                words = " ".join(vocab[(i * 8 + j) % size] for j in range(8))
            self.collector.emit([words], msg_id=i)

    def ack(self, msg_id: Any) -> None:
        self.acked += 1

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)

    def is_exhausted(self) -> bool:
        return self.acked == self.n

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sentence"])


class Split(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        for w in tuple[0].split():
            collector.emit([w])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])


class PlainCount(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.counts: dict[str, int] = {}

    def execute(self, tuple: Any, collector: Any) -> None:
        w = tuple[0]
        self.counts[w] = self.counts.get(w, 0) + 1


class StatefulCount(BasicStatefulBolt):
    def init_state(self, state: Any) -> None:
        self.counts = state

    def execute(self, tuple: Any, collector: Any) -> None:
        w = tuple[0]
        self.counts.put(w, self.counts.get(w, 0) + 1)


async def wordcount(
    stateful: bool, run: int, vocab: int = 0, sentences: int = SENTENCES
) -> tuple[float, float]:
    """Sentences per second through the word count, with or without checkpoints: per
    second of wall-clock time, and per CPU second of this process (steadier than the wall
    clock on a shared machine; the engine runs in one thread)."""
    if vocab:
        vocabulary(vocab)
    builder = TopologyBuilder()
    builder.set_spout("sentences", Sentences(sentences, vocab))
    builder.set_bolt("split", Split()).shuffle_grouping("sentences")
    count = StatefulCount() if stateful else PlainCount()
    builder.set_bolt("count", count).fields_grouping("split", Fields("word"))
    conf = {"topology.max.spout.pending": 20_000, "topology.state.checkpoint.interval.ms": 1000}
    name = f"bench-{stateful}-{vocab}-{run}"
    start, cpu = time.perf_counter(), time.process_time()
    async with run_topology(builder.create_topology(), conf, name=name) as r:
        await r.wait_until_complete(timeout=600)
    rate = sentences / (time.perf_counter() - start)
    cpu_rate = sentences / (time.process_time() - cpu)
    InMemoryStateStore.clear()  # the next run starts from an empty state
    return rate, cpu_rate


#: State sizes of ``--state-sizes``: the word count's vocabulary, and the checkpoints timed.
STATE_SIZES = {"1k": 1_000, "100k": 100_000, "1m": 1_000_000}
#: Keys changed between two checkpoints in the timed checkpoint of a large state.
CHANGED_KEYS = 1_000


async def word_count_by_state_size() -> dict[str, float]:
    """Best of 3 rounds of the word count, plain and checkpointed, over a vocabulary of
    each ``STATE_SIZES`` words: sentence ``i`` brings words ``8i`` to ``8i + 7``, so the
    state ends with that many keys (with 125,000 sentences for 1M)."""
    best: dict[str, float] = collections.defaultdict(float)
    for run in range(3):
        for label, size in STATE_SIZES.items():
            sentences = max(SENTENCES, size // 8)
            for stateful in (False, True):
                key = f"{'stateful' if stateful else 'plain'}_{label}"
                rate, cpu_rate = await wordcount(stateful, run, size, sentences)
                best[key] = max(best[key], rate)
                best[f"{key}_cpu"] = max(best[f"{key}_cpu"], cpu_rate)
    return best


def checkpoint_times(open_store: Any, size: int) -> tuple[float, float, float]:
    """Seconds a ``KeyValueState`` of ``size`` keys (made and checkpointed first, untimed)
    takes for a checkpoint after every key changed, for one after ``CHANGED_KEYS`` keys
    changed (best of 3), and to be loaded again (a recovery)."""
    state = KeyValueState(open_store())
    keys = vocabulary(size)
    for i, key in enumerate(keys):
        state.put(key, i)
    state.prepare_commit(1)
    state.commit(1)
    for i, key in enumerate(keys):
        state.put(key, i + 1)
    start = time.perf_counter()
    state.prepare_commit(2)
    state.commit(2)
    every = time.perf_counter() - start
    some = float("inf")
    step = max(1, size // CHANGED_KEYS)
    for txid in range(3, 6):
        for key in keys[::step]:
            state.put(key, txid)
        start = time.perf_counter()
        state.prepare_commit(txid)
        state.commit(txid)
        some = min(some, time.perf_counter() - start)
    start = time.perf_counter()
    KeyValueState(open_store())
    load = time.perf_counter() - start
    return every, some, load


def checkpoint_costs(tmp: str, port: int) -> dict[str, tuple[float, float, float]]:
    """``checkpoint_times`` per provider and state size."""
    stores: dict[str, Any] = {
        "memory": lambda ns: InMemoryStateStore(ns, scope="bench"),
        "sqlite": lambda ns: SqliteStateStore(os.path.join(tmp, "state.sqlite"), ns),
        "redis": lambda ns: RedisStateStore({"port": port}, ns),
    }
    times = {}
    for provider, make in stores.items():
        for label, size in STATE_SIZES.items():
            opened: list[StateStore] = []

            def open_store(
                make: Any = make, ns: str = f"bench/{label}/0", opened: list[Any] = opened
            ) -> StateStore:
                opened.append(make(ns))
                return opened[-1]

            times[f"{provider}_{label}"] = checkpoint_times(open_store, size)
            for store in opened:
                store.close()
            InMemoryStateStore.clear("bench")
    return times


class Rows(Spout):
    def __init__(self, n: int) -> None:
        self.n = n

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.i, self.acked = collector, 0, 0
        self.failed: list[int] = []

    def next_tuple(self) -> None:
        if self.failed:
            ids, self.failed = self.failed[:BATCH], self.failed[BATCH:]
        elif self.i < self.n:
            ids = list(range(self.i, min(self.i + BATCH, self.n)))
            self.i += len(ids)
        else:
            return
        self.collector.emit_batch([[f"k{i % 1000}" for i in ids], [1] * len(ids)], msg_ids=ids)

    def ack(self, msg_id: Any) -> None:
        self.acked += 1

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)

    def is_exhausted(self) -> bool:
        return self.acked == self.n

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["key", "one"])


async def store_bolt(port: int, inflight: int = 64) -> float:
    builder = TopologyBuilder()
    builder.set_spout("rows", Rows(ROWS))
    mapper = RedisStoreMapper(RedisDataType.HASH_COUNTER, "key", "one", additional_key="bench")
    builder.set_bolt("store", RedisStoreBolt(RedisConfig(port=port), mapper)).shuffle_grouping(
        "rows"
    )
    conf = {"topology.max.spout.pending": 20_000, "topology.bolt.max.inflight": inflight}
    start = time.perf_counter()
    async with run_topology(builder.create_topology(), conf) as r:
        await r.wait_until_complete(timeout=600)
    return ROWS / (time.perf_counter() - start)


async def raw_loop(port: int) -> float:
    from redis.asyncio import Redis

    client = Redis(port=port)
    start = time.perf_counter()
    for lo in range(0, ROWS, BATCH):
        sums: dict[str, int] = collections.defaultdict(int)
        for i in range(lo, min(lo + BATCH, ROWS)):
            sums[f"k{i % 1000}"] += 1
        pipe = client.pipeline(transaction=False)
        for k, v in sums.items():
            pipe.hincrby("bench-raw", k, v)
        await pipe.execute()
    took = time.perf_counter() - start
    await client.aclose()
    return ROWS / took


def _delay_proxy(listen: Any, target_port: int, delay_secs: float) -> None:
    """Forward connections on the socket ``listen`` to Redis on ``target_port``, each chunk
    ``delay_secs`` late in each direction (order kept): a Redis that far away."""
    import asyncio

    async def pump(reader: Any, writer: Any) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        async def send() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    writer.close()
                    return
                await asyncio.sleep(max(0.0, due - loop.time()))
                writer.write(data)
                await writer.drain()

        sender = asyncio.ensure_future(send())
        while data := await reader.read(65536):
            queue.put_nowait((loop.time() + delay_secs, data))
        queue.put_nowait((0.0, b""))
        await sender

    async def serve(client_reader: Any, client_writer: Any) -> None:
        redis_reader, redis_writer = await asyncio.open_connection("127.0.0.1", target_port)
        await asyncio.gather(
            pump(client_reader, redis_writer),
            pump(redis_reader, client_writer),
            return_exceptions=True,
        )

    async def main() -> None:
        server = await asyncio.start_server(serve, sock=listen)
        await server.serve_forever()

    uvloop.run(main())


@contextlib.contextmanager
def redis_at_rtt(port: int, rtt_ms: float) -> Iterator[int]:
    """The port of a proxy to Redis on ``port`` that adds ``rtt_ms`` to each round trip."""
    listen = socket.socket()
    listen.bind(("127.0.0.1", 0))
    listen.listen(128)
    proxy = multiprocessing.get_context("fork").Process(
        target=_delay_proxy, args=(listen, port, rtt_ms / 2000), daemon=True
    )
    proxy.start()
    try:
        yield listen.getsockname()[1]
    finally:
        proxy.terminate()
        proxy.join()
        listen.close()


async def main(
    store_inflight: list[int] | None = None, rtt_ms: float = 0.0, sentences: int = SENTENCES
) -> dict[str, Any]:
    best: dict[str, float] = collections.defaultdict(float)
    if shutil.which("redis-server") is None:
        sys.exit(
            "bench/state_redis.py: redis-server is not installed (apt-get install redis-server)"
        )
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        port = stack.enter_context(LocalRedisServer(tmp)).port
        if rtt_ms:
            port = stack.enter_context(redis_at_rtt(port, rtt_ms))
        for run in range(3):
            if store_inflight is not None:
                for n in store_inflight:
                    best[f"inflight_{n}"] = max(best[f"inflight_{n}"], await store_bolt(port, n))
                best["raw"] = max(best["raw"], await raw_loop(port))
                continue
            rates = {}
            for key in ("plain", "stateful"):
                rate, cpu_rate = await wordcount(key == "stateful", run, sentences=sentences)
                rates[key], rates[f"{key}_cpu"] = rate, cpu_rate
                best[key] = max(best[key], rate)
                best[f"{key}_cpu"] = max(best[f"{key}_cpu"], cpu_rate)
            # The two runs of a round are back to back: their ratio sees the same load.
            best[f"round_{run}"] = 1 - rates["stateful"] / rates["plain"]
            best[f"round_{run}_cpu"] = 1 - rates["stateful_cpu"] / rates["plain_cpu"]
            print(
                f"  round {run}: {rates['plain']:,.0f} vs {rates['stateful']:,.0f} sentences/s "
                f"({best[f'round_{run}']:+.1%} cost; per CPU second "
                f"{best[f'round_{run}_cpu']:+.1%}), load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            best["store_bolt"] = max(best["store_bolt"], await store_bolt(port))
            best["raw"] = max(best["raw"], await raw_loop(port))
    return best


def store_inflight_report(best: dict[str, float], settings: list[int]) -> None:
    print(f"raw pipelined redis loop (HINCRBY)  {best['raw']:>12,.0f} rows/s")
    for n in settings:
        rows = best[f"inflight_{n}"]
        print(
            f"RedisStoreBolt, max.inflight {n:<5}  {rows:>12,.0f} rows/s "
            f"({rows / best['raw']:.2f}x raw)"
        )
    print(
        json.dumps(
            {
                "redis_raw_rows_per_s": round(best["raw"]),
                **{
                    f"redis_store_bolt_inflight_{n}_rows_per_s": round(best[f"inflight_{n}"])
                    for n in settings
                },
            }
        )
    )


async def state_sizes_main() -> tuple[dict[str, float], dict[str, tuple[float, float, float]]]:
    """``--state-sizes``: the word count by state size, then the checkpoint times."""
    best = await word_count_by_state_size()
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        port = stack.enter_context(LocalRedisServer(tmp)).port
        return best, checkpoint_costs(tmp, port)


def state_sizes_report(
    best: dict[str, float], times: dict[str, tuple[float, float, float]]
) -> None:
    fields: dict[str, Any] = {}
    for label in STATE_SIZES:
        plain, stateful = best[f"plain_{label}"], best[f"stateful_{label}"]
        cost = 1 - stateful / plain
        cost_cpu = 1 - best[f"stateful_{label}_cpu"] / best[f"plain_{label}_cpu"]
        fields[f"checkpoint_cost_{label}_keys"] = round(cost, 4)
        fields[f"checkpoint_cost_cpu_{label}_keys"] = round(cost_cpu, 4)
        print(
            f"word count, {label:>4} keys: no checkpoints {plain:>9,.0f}, checkpoint every "
            f"1 s {stateful:>9,.0f} sentences/s ({cost:+.1%} cost; per CPU second "
            f"{cost_cpu:+.1%})"
        )
    print(
        f"one checkpoint (prepare + commit), ms: all keys changed / {CHANGED_KEYS:,} changed; load"
    )
    for key, (every, some, load) in times.items():
        print(
            f"  {key:<12} {every * 1e3:>10,.1f} / {some * 1e3:>8,.2f}   load {load * 1e3:>10,.1f}"
        )
        fields[f"checkpoint_all_changed_ms_{key}"] = round(every * 1e3, 2)
        fields[f"checkpoint_{CHANGED_KEYS // 1000}k_changed_ms_{key}"] = round(some * 1e3, 3)
        fields[f"state_load_ms_{key}"] = round(load * 1e3, 2)
    print(json.dumps(fields))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--store-inflight",
        help="only the store bolt, at each of these comma-separated max.inflight values",
    )
    parser.add_argument(
        "--rtt-ms", type=float, default=0.0, help="with --store-inflight: Redis this far away"
    )
    parser.add_argument(
        "--sentences",
        type=int,
        default=SENTENCES,
        help=f"sentences per word count run (default {SENTENCES:,})",
    )
    parser.add_argument(
        "--state-sizes",
        action="store_true",
        help="the checkpoint's cost by state size (1k, 100k, 1M keys), per provider",
    )
    args = parser.parse_args()
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, load {os.getloadavg()[0]:.1f}"
    )
    if args.state_sizes:
        state_sizes_report(*uvloop.run(state_sizes_main()))
        sys.exit(0)
    if args.store_inflight:
        settings = [int(x) for x in args.store_inflight.split(",")]
        print(f"Redis round trip: loopback + {args.rtt_ms} ms")
        store_inflight_report(uvloop.run(main(settings, args.rtt_ms)), settings)
        sys.exit(0)
    best = uvloop.run(main(sentences=args.sentences))
    cost = 1 - best["stateful"] / best["plain"]
    cost_cpu = 1 - best["stateful_cpu"] / best["plain_cpu"]
    paired = statistics.median(best[f"round_{run}"] for run in range(3))
    paired_cpu = statistics.median(best[f"round_{run}_cpu"] for run in range(3))
    ratio = best["store_bolt"] / best["raw"]
    print(f"word count, no checkpoints          {best['plain']:>12,.0f} sentences/s")
    print(
        f"word count, checkpoint every 1 s    {best['stateful']:>12,.0f} sentences/s "
        f"({cost:+.1%} cost; target <= 10 %)"
    )
    print(
        f"  per CPU second: {best['plain_cpu']:,.0f} vs {best['stateful_cpu']:,.0f} "
        f"sentences ({cost_cpu:+.1%} cost)"
    )
    print(f"  median of the rounds' own costs: {paired:+.1%}; per CPU second {paired_cpu:+.1%}")
    print(f"raw pipelined redis loop (HINCRBY)  {best['raw']:>12,.0f} rows/s")
    print(
        f"RedisStoreBolt (HASH_COUNTER)       {best['store_bolt']:>12,.0f} rows/s "
        f"({ratio:.2f}x raw; target >= 0.7x)"
    )
    print(
        json.dumps(
            {
                "wordcount_plain_sentences_per_s": round(best["plain"]),
                "wordcount_checkpointed_sentences_per_s": round(best["stateful"]),
                "checkpoint_cost": round(cost, 4),
                "checkpoint_cost_cpu": round(cost_cpu, 4),
                "checkpoint_cost_paired": round(paired, 4),
                "checkpoint_cost_paired_cpu": round(paired_cpu, 4),
                "redis_raw_rows_per_s": round(best["raw"]),
                "redis_store_bolt_rows_per_s": round(best["store_bolt"]),
                "redis_store_bolt_vs_raw": round(ratio, 3),
            }
        )
    )
