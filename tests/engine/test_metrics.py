"""Metrics agree with counted truth; user metrics; the Prometheus endpoint."""

from __future__ import annotations

import asyncio
import urllib.request
from typing import Any

from engine import BasicBolt, Bolt, CountMetric, TopologyBuilder, run_topology

from .topologies import ListSpout, run


class CountingBolt(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.seen = context.register_counter("seen")
        self.held: list[Any] = []
        context.register_gauge("held", lambda: len(self.held))
        self.custom = context.register_metric("custom", CountMetric())

    def execute(self, tuple: Any, collector: Any) -> None:
        self.seen.incr()
        self.custom.incr_by(2)
        collector.emit([tuple[0]])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id"])


class RichSink(Bolt):
    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tuple: Any) -> None:
        self.collector.ack(tuple)


def topology(n: int) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("src", ListSpout([[i, f"s{i}"] for i in range(n)]))
    builder.set_bolt("counting", CountingBolt(), 2).shuffle_grouping("src")
    builder.set_bolt("sink", RichSink()).shuffle_grouping("counting")
    return builder.create_topology()


def test_metrics_agree_with_counted_truth() -> None:
    n = 3000

    async def main() -> None:
        async with run_topology(topology(n)) as running:
            await running.wait_until_complete(timeout=30)
            info = running.info()
            src = info.components["src"]
            counting = info.components["counting"]
            sink = info.components["sink"]
            assert src.emitted == src.transferred == src.acked == n
            assert counting.executed == counting.acked == counting.emitted == n
            assert sink.executed == sink.acked == n
            assert sum(t.metrics["seen"] for t in counting.tasks.values()) == n
            assert sum(t.metrics["custom"] for t in counting.tasks.values()) == 2 * n
            assert all(t.metrics["held"] == 0 for t in counting.tasks.values())
            [spout_task] = src.tasks.values()
            assert spout_task.complete_latency.count == n
            lat = spout_task.complete_latency
            assert 0 < lat.p50_ms <= lat.p99_ms <= lat.max_ms
            for t in counting.tasks.values():
                assert t.execute_latency.count == t.executed
                assert t.process_latency == t.execute_latency  # basic bolt
                assert 0 < t.capacity < 1
            [sink_task] = sink.tasks.values()
            assert sink_task.execute_latency.count == n
            # Rich bolts sample one tuple in 64 of each batch for process latency.
            assert 0 < sink_task.process_latency.count <= n // 64 + 64

    run(main())


def test_prometheus_endpoint_serves_the_topology() -> None:
    from engine.prometheus import serve_prometheus

    async def main() -> str:
        async with run_topology(topology(200), name="wc") as running:
            await running.wait_until_complete(timeout=30)
            exporter = serve_prometheus(running)
            try:
                url = f"http://127.0.0.1:{exporter.port}/metrics"

                def scrape() -> str:
                    with urllib.request.urlopen(url, timeout=10) as response:
                        return response.read().decode()

                return await asyncio.to_thread(scrape)
            finally:
                exporter.close()

    text = run(main())
    assert 'squall_executed_total{component="sink",task="3",topology="wc"} 200.0' in text
    assert 'squall_acked_total{component="src",task="4",topology="wc"} 200.0' in text
    assert (
        'squall_emitted_total{component="src",stream="default",task="4",topology="wc"} 200.0'
        in text
    )
    assert 'squall_latency_seconds{component="src",kind="complete",quantile="0.99"' in text
    assert 'squall_user_metric{component="counting",name="seen"' in text
