"""Site statistics: page views through Spark -> a sliding event-time window -> Redis.

    python examples/site_stats.py                  # starts its own redis-server if needed
    python examples/site_stats.py --redis-url redis://127.0.0.1:6379/0

It writes ``out/site_stats/views.parquet``: 20,000 page-view events (``offset``, event time
``ts`` in seconds, ``page``, ``visitor``) over ten minutes, 2 % of them two minutes behind
the others (late data, counted late when the watermark has passed them on arrival), then a
few end-of-stream markers (pages ``~end/...``, time 700 s) that move every task's watermark
past the last real window, as a live source's newer events would. The topology:

    views (SparkOffsetSpout, 2 tasks)
      -> stats (WindowedBolt: 60 s windows sliding by 10 s on the event time ``ts``, 5 s lag,
                per page: views and unique visitors; late tuples to the stream "late")
      -> top_pages (RedisStoreBolt: ZADD site:top_pages page views, the latest window)
      -> views_by_page (RedisStoreBolt: HSET site:views page views)
      -> visitors_by_page (RedisStoreBolt: HSET site:visitors page unique visitors)
    stats/late -> late_views (RedisStoreBolt: INCRBY site:late_views 1 per late tuple)

Every view is acked once its windows have left it and Redis confirmed what it fed; a late
view is counted in Redis, never dropped without a trace. The run ends once every view was
acked (the markers' windows never close); it prints the top pages of the latest window read
back from Redis and the late count, checked against the windowed bolts' own count.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

from engine import Config, Fields, run_topology
from engine.redis import (
    LocalRedisServer,
    RedisConfig,
    RedisDataType,
    RedisStoreBolt,
    RedisStoreMapper,
)
from engine.windowing import Duration, WindowedBolt
from spark_io import SessionConfig, SparkOffsetSpout, SparkSource, spark_session

EVENTS = 20_000
PAGES = [f"/page/{i}" for i in range(40)]
WINDOW_SECS, SLIDE_SECS, LAG_SECS = 60, 10, 5
#: end-of-stream markers: enough distinct pages to reach every ``stats`` task
END_PAGES = [f"~end/{i}" for i in range(8)]
END_TS = 700.0


def make_events(path: Path) -> int:
    """Write the events as parquet; returns how many are late (behind the watermark)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows: dict[str, list[Any]] = collections.defaultdict(list)
    late = 0
    for i in range(EVENTS):
        ts = i * 600 / EVENTS  # ten minutes of traffic, in order
        if i % 50 == 49 and ts > 120:  # 2 %: arrive two minutes behind the others
            ts -= 120
            late += 1
        rows["offset"].append(i)
        rows["ts"].append(ts)
        rows["page"].append(PAGES[(i * i + 7 * i) % len(PAGES) // (1 + i % 3)])
        rows["visitor"].append(f"v{(i * 31) % 997}")
    for j, page in enumerate(END_PAGES):
        rows["offset"].append(EVENTS + j)
        rows["ts"].append(END_TS)
        rows["page"].append(page)
        rows["visitor"].append("-")
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(rows), path)
    return late


class PageStats(WindowedBolt):
    """Per page in each window: views and unique visitors."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, window: Any) -> None:
        views: collections.Counter[str] = collections.Counter()
        visitors: dict[str, set[str]] = collections.defaultdict(set)
        for t in window.get():
            views[t["page"]] += 1
            visitors[t["page"]].add(t["visitor"])
        for page, n in views.items():
            self.collector.emit([page, n, len(visitors[page]), window.end_timestamp])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["page", "views", "visitors", "window_end"])
        # the late stream ("late_tuple", "timestamp") is declared by with_late_tuple_stream


class OnePerTuple(RedisStoreMapper):
    """``INCRBY site:late_views 1`` for every late tuple: a computed key and value."""

    def get_key_from_tuple(self, tuple: Any) -> Any:
        return "site:late_views"

    def get_value_from_tuple(self, tuple: Any) -> Any:
        return 1


def build(data: Path, out: Path, redis: RedisConfig, session: SessionConfig) -> Any:
    from engine import TopologyBuilder

    builder = TopologyBuilder()
    builder.set_spout(
        "views",
        SparkOffsetSpout(
            SparkSource.files(data, "parquet"),
            "offset",
            ["offset", "ts", "page", "visitor"],
            checkpoint_dir=out / "checkpoint",
            session=session,
        ),
        2,
    )
    stats = (
        PageStats()
        .with_window(Duration(WINDOW_SECS), Duration(SLIDE_SECS))
        .with_timestamp_field("ts")
        .with_lag(LAG_SECS)
        .with_watermark_interval(0.05)
        .with_late_tuple_stream("late")
    )
    builder.set_bolt("stats", stats, 2).fields_grouping("views", Fields("page"))
    stores = {
        "top_pages": RedisDataType.SORTED_SET,
        "views_by_page": RedisDataType.HASH,
        "visitors_by_page": RedisDataType.HASH,
    }
    values = {"top_pages": "views", "views_by_page": "views", "visitors_by_page": "visitors"}
    names = {
        "top_pages": "site:top_pages",
        "views_by_page": "site:views",
        "visitors_by_page": "site:visitors",
    }
    for cid, data_type in stores.items():
        mapper = RedisStoreMapper(data_type, "page", values[cid], additional_key=names[cid])
        builder.set_bolt(cid, RedisStoreBolt(redis, mapper)).fields_grouping(
            "stats", Fields("page")
        )
    late = OnePerTuple(RedisDataType.COUNTER, "late_tuple", "timestamp")
    builder.set_bolt("late_views", RedisStoreBolt(redis, late)).shuffle_grouping("stats", "late")
    conf = Config()
    # At most ~2 minutes of event time in flight (more than a window + slide + lag): the
    # spout waits for windows to close, and meanwhile watermark ticks catch up with what it
    # emitted, so views two minutes behind arrive behind the watermark whatever the speed.
    conf.set_max_spout_pending(4_000)
    conf.set_message_timeout_secs(WINDOW_SECS + SLIDE_SECS + 60)
    return builder.create_topology(), conf


def main(argv: list[str] | None = None) -> int:
    import redis

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", default=None, help="default: start a redis-server")
    parser.add_argument("--out", type=Path, default=Path("out/site_stats"))
    args = parser.parse_args(argv)
    out = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    late_expected = make_events(out / "views.parquet")
    if not args.redis_url and shutil.which("redis-server") is None:
        sys.exit(
            "site_stats: give --redis-url, or install redis-server (apt-get install redis-server)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        server = None if args.redis_url else LocalRedisServer(tmp)
        if server is not None:
            server.start()
        url = args.redis_url if server is None else server.url
        try:
            session = SessionConfig(app_name="squall-site-stats", warehouse_dir=str(out / "wh"))
            spark_session(session)
            topology, conf = build(out / "views.parquet", out, RedisConfig(url=url), session)

            async def run() -> int:
                async with run_topology(topology, conf, name="site-stats") as running:
                    # every view acked: its windows closed and Redis has what it fed
                    deadline = time.monotonic() + 600
                    while running.info().components["views"].acked < EVENTS:
                        if time.monotonic() > deadline:
                            raise TimeoutError("site_stats: views not all acked in 600 s")
                        await asyncio.sleep(0.05)
                    return sum(b.late_tuples for b in running.task_objects("stats").values())

            late_seen = uvloop.run(run())
            with redis.Redis.from_url(url, decode_responses=True) as r:
                top = r.zrevrange("site:top_pages", 0, 9, withscores=True)
                late = int(r.get("site:late_views") or 0)
                visitors = r.hgetall("site:visitors")
        finally:
            if server is not None:
                server.kill()
    print("top pages (views in the latest window):")
    for page, views in top:
        print(f"  {page:<12}{int(views):>8,}  unique visitors {visitors.get(page)}")
    print(
        f"late views counted in Redis: {late:,} (the windows saw {late_seen:,} late; the input "
        f"has {late_expected:,} views two minutes behind)"
    )
    return 0 if late == late_seen and top else 1


if __name__ == "__main__":
    sys.exit(main())
