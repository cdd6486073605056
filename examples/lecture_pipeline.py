"""The lecture's pipeline: web-server log lines -> Kafka -> a sliding event-time window ->
Redis.

    python examples/lecture_pipeline.py      # starts its own Kafka broker and redis-server
    python examples/lecture_pipeline.py --bootstrap-servers 127.0.0.1:9092 \\
        --redis-url redis://127.0.0.1:6379/0

It produces 20,000 access-log lines (Apache's common log format: ten minutes of page views)
into the topic ``access-log`` (one partition, see below), a few of them malformed, then a
few end-of-stream lines far in the future that move every task's watermark past the last
real window, as a live log's newer lines would. The topology:

    logs (KafkaSpout, 1 task: the line parsed into page and event time; a line that does
          not parse goes to the stream "malformed")
      -> views (WindowedBolt: 60 s windows sliding by 10 s on the event time, 5 s lag;
                per window and page: the views)
      -> store (RedisStoreBolt: SET lecture:views:<window end>:<page> views)
    logs/malformed -> malformed (RedisStoreBolt: INCRBY lecture:malformed 1 per line)

Every line is acked once its windows have left it and Redis confirmed what it fed; a
malformed line is counted in Redis, never dropped without a trace. The run ends once every
line was acked (the end-of-stream lines' windows never close); it prints the top pages of
the latest window, read back from Redis.

Why one partition: a windowed bolt's watermark follows its input stream, not the tasks
that emit it (Storm's rule). With two partitions read by two spout tasks, the one that
reached its end-of-stream lines first moved the stream's watermark an hour ahead, and the
other task's last lines came in late: its windows missed them (a test saw it in about one
run in three on a busy machine).
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import collections
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import uvloop

from engine import Config, Fields, TopologyBuilder, run_topology
from engine.kafka import (
    FirstPollOffsetStrategy,
    KafkaSpout,
    KafkaSpoutConfig,
    KafkaTuple,
    LocalKafkaBroker,
    RecordTranslator,
)
from engine.redis import (
    LocalRedisServer,
    RedisConfig,
    RedisDataType,
    RedisStoreBolt,
    RedisStoreMapper,
)
from engine.windowing import Duration, WindowedBolt

TOPIC = "access-log"
PARTITIONS = 1
LINES = 20_000
PAGES = [f"/lecture/{i}" for i in range(25)]
WINDOW_SECS, SLIDE_SECS, LAG_SECS = 60, 10, 5
#: event time of the first line: 2026-11-25 10:00:00 UTC
START = calendar.timegm((2026, 11, 25, 10, 0, 0))
#: end-of-stream pages: enough distinct pages to reach every ``views`` task
END_PAGES = [f"~end/{i}" for i in range(8)]
END_TS = START + 3600
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def log_line(i: int, ts: int, page: str) -> str:
    """One line of Apache's common log format."""
    t = time.gmtime(ts)
    stamp = f"{t.tm_mday:02d}/{MONTHS[t.tm_mon - 1]}/{t.tm_year}:{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} +0000"
    return f'198.51.100.{i % 250} - - [{stamp}] "GET {page} HTTP/1.1" 200 {512 + i % 300}'


def make_lines() -> Iterator[tuple[int, str]]:
    """``(partition, line)``: ten minutes of views in time order, every 997th line
    malformed, then the end-of-stream lines of each partition."""
    for i in range(LINES):
        ts = START + i * 600 // LINES
        page = PAGES[(i * i + 7 * i) % len(PAGES) // (1 + i % 3)]
        line = "garbage" if i % 997 == 996 else log_line(i, ts, page)
        yield i % PARTITIONS, line
    for p in range(PARTITIONS):
        for page in END_PAGES:
            yield p, log_line(0, END_TS, page)


def parse(line: str) -> tuple[str, int] | None:
    """``(page, event time in seconds)`` of a common-log-format line, or None."""
    try:
        stamp = line[line.index("[") + 1 : line.index("]")]
        request = line.split('"')[1].split()
        day, month, rest = stamp.split("/")
        year, hh, mm, ss = rest.split(" ")[0].split(":")
        ts = calendar.timegm(
            (int(year), MONTHS.index(month) + 1, int(day), int(hh), int(mm), int(ss))
        )
        return request[1], ts
    except (ValueError, IndexError):
        return None


def translate(record: Any) -> Any:
    """The spout's record translator: a view, or the raw line on the "malformed" stream."""
    line = record.value().decode()
    parsed = parse(line)
    if parsed is None:
        return KafkaTuple([line], "malformed")
    return list(parsed)


class PageViews(WindowedBolt):
    """Per page in each window: the views."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, window: Any) -> None:
        views = collections.Counter(t["page"] for t in window.get())
        for page, n in views.items():
            self.collector.emit([page, n, window.end_timestamp])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["page", "views", "window_end"])


class WindowKey(RedisStoreMapper):
    """``SET lecture:views:<window end>:<page> views``: idempotent, so a replayed window
    writes the same value again."""

    def get_key_from_tuple(self, tuple: Any) -> Any:
        return f"lecture:views:{int(tuple['window_end'])}:{tuple['page']}"

    def get_value_from_tuple(self, tuple: Any) -> Any:
        return tuple["views"]


class OnePerLine(RedisStoreMapper):
    """``INCRBY lecture:malformed 1`` for every malformed line."""

    def get_key_from_tuple(self, tuple: Any) -> Any:
        return "lecture:malformed"

    def get_value_from_tuple(self, tuple: Any) -> Any:
        return 1


def build(servers: str, redis: RedisConfig) -> tuple[Any, Config]:
    translator = RecordTranslator(translate, ["page", "ts"], streams={"malformed": ["line"]})
    config = KafkaSpoutConfig(
        servers,
        [TOPIC],
        group_id="lecture-pipeline",
        first_poll_offset_strategy=FirstPollOffsetStrategy.EARLIEST,
        record_translator=translator,
        offset_commit_period_ms=1000,
    )
    builder = TopologyBuilder()
    builder.set_spout("logs", KafkaSpout(config), PARTITIONS)
    views = (
        PageViews()
        .with_window(Duration(WINDOW_SECS), Duration(SLIDE_SECS))
        .with_timestamp_field("ts")
        .with_lag(LAG_SECS)
        .with_watermark_interval(0.05)
    )
    builder.set_bolt("views", views, 2).fields_grouping("logs", Fields("page"))
    store = RedisStoreBolt(redis, WindowKey(RedisDataType.STRING, "page", "views"))
    builder.set_bolt("store", store).shuffle_grouping("views")
    malformed = RedisStoreBolt(redis, OnePerLine(RedisDataType.COUNTER, "line", "line"))
    builder.set_bolt("malformed", malformed).shuffle_grouping("logs", "malformed")
    conf = Config()
    conf.set_max_spout_pending(5_000)
    conf.set_message_timeout_secs(WINDOW_SECS + SLIDE_SECS + 60)
    return builder.create_topology(), conf


def produce_lines(servers: str) -> int:
    """Create the topic and produce the lines; returns how many must be acked."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": servers})
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS)]).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5})
    for partition, line in make_lines():
        producer.produce(TOPIC, line.encode(), partition=partition)
    if producer.flush(30):
        raise RuntimeError(f"lecture_pipeline: not every line reached {servers}")
    return LINES


async def run(topology: Any, conf: Config, expect_acked: int) -> None:
    async with run_topology(topology, conf, name="lecture-pipeline") as running:
        deadline = time.monotonic() + 600
        while running.info().components["logs"].acked < expect_acked:
            if time.monotonic() > deadline:
                raise TimeoutError("lecture_pipeline: lines not all acked in 600 s")
            await asyncio.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    import redis

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", default=None, help="default: start a broker")
    parser.add_argument("--redis-url", default=None, help="default: start a redis-server")
    args = parser.parse_args(argv)
    if not args.redis_url and shutil.which("redis-server") is None:
        sys.exit(
            "lecture_pipeline: give --redis-url, or install redis-server "
            "(apt-get install redis-server)"
        )
    with ExitStack() as stack:
        servers = args.bootstrap_servers
        if servers is None:
            servers = stack.enter_context(LocalKafkaBroker()).bootstrap_servers
        url = args.redis_url
        if url is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory())
            url = stack.enter_context(LocalRedisServer(tmp)).url
        lines = produce_lines(servers)
        topology, conf = build(servers, RedisConfig(url=url))
        uvloop.run(run(topology, conf, lines))
        client = redis.Redis.from_url(url, decode_responses=True)
        keys = client.keys("lecture:views:*")
        latest = max(int(k.split(":")[2]) for k in keys)
        top = sorted(
            ((int(client.get(k) or 0), k.split(":", 3)[3]) for k in keys if f":{latest}:" in k),
            reverse=True,
        )[:5]
        print(
            f"{len(keys)} (window, page) counts in Redis; malformed lines: "
            f"{client.get('lecture:malformed')}"
        )
        print(f"top pages of the window ending {time.strftime('%H:%M:%S', time.gmtime(latest))}:")
        for views, page in top:
            print(f"  {views:>5}  {page}")
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
