"""A Prometheus endpoint for a running topology (needs the ``metrics`` extra).

>>> from engine.prometheus import serve_prometheus
>>> # async with run_topology(topology) as running:
>>> #     exporter = serve_prometheus(running, port=9464)   # http://127.0.0.1:9464/metrics
>>> #     ...
>>> #     exporter.close()

Counters and latency quantiles are read from ``RunningTopology.info()`` on the topology's
own event loop at each scrape, so scraping never races the executors.
"""

from __future__ import annotations

import asyncio
import numbers
from collections.abc import Iterator
from typing import Any

from ._monitor.stats import LatencySummary, TopologyInfo
from ._runtime import RunningTopology

__all__ = ["PrometheusExporter", "serve_prometheus", "topology_metric_families"]


def topology_metric_families(info: TopologyInfo) -> Iterator[Any]:
    """Prometheus metric families for one ``TopologyInfo`` snapshot."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    labels = ["topology", "component", "task"]
    counters = {
        name: CounterMetricFamily(
            f"squall_{name}", f"Tuples {name} (Storm's {name})", labels=labels
        )
        for name in ("transferred", "executed", "acked", "failed", "timed_out")
    }
    emitted = CounterMetricFamily(
        "squall_emitted", "Tuples emitted, per stream", labels=[*labels, "stream"]
    )
    capacity = GaugeMetricFamily(
        "squall_capacity", "Share of the uptime a bolt task spent executing", labels=labels
    )
    pending = GaugeMetricFamily("squall_pending", "Spout trees in flight", labels=labels)
    latency = GaugeMetricFamily(
        "squall_latency_seconds",
        "Latency quantiles: complete (spouts), execute and process (bolts)",
        labels=[*labels, "kind", "quantile"],
    )
    user = GaugeMetricFamily(
        "squall_user_metric", "Metrics registered on TopologyContext", labels=[*labels, "name"]
    )

    def add_latency(base: list[str], kind: str, summary: LatencySummary) -> None:
        if summary.count:
            for q, value in (("0.5", summary.p50_ms), ("0.99", summary.p99_ms)):
                latency.add_metric([*base, kind, q], value / 1e3)

    for cid, comp in info.components.items():
        for task, stats in comp.tasks.items():
            base = [info.name, cid, str(task)]
            for name, family in counters.items():
                family.add_metric(base, getattr(stats, name))
            for stream, n in stats.emitted.items():
                emitted.add_metric([*base, stream], n)
            if comp.kind == "spout":
                pending.add_metric(base, stats.pending)
                add_latency(base, "complete", stats.complete_latency)
            else:
                capacity.add_metric(base, stats.capacity)
                add_latency(base, "execute", stats.execute_latency)
                add_latency(base, "process", stats.process_latency)
            for name, value in stats.metrics.items():
                if isinstance(value, numbers.Real):
                    user.add_metric([*base, name], float(value))
    yield from counters.values()
    yield from (emitted, capacity, pending, latency, user)


class PrometheusExporter:
    """Serves ``/metrics`` for one running topology; ``close()`` stops it."""

    def __init__(self, running: RunningTopology, port: int, addr: str) -> None:
        from prometheus_client import start_http_server
        from prometheus_client.registry import CollectorRegistry

        self._running = running
        self._loop = asyncio.get_running_loop()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self._server, self._thread = start_http_server(port, addr, registry=self.registry)
        self.port = self._server.server_port

    def _snapshot(self) -> TopologyInfo:
        try:
            running_here = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            running_here = False
        if running_here:
            return self._running.info()

        async def snapshot() -> TopologyInfo:
            return self._running.info()

        return asyncio.run_coroutine_threadsafe(snapshot(), self._loop).result(timeout=10)

    def collect(self) -> Iterator[Any]:
        """prometheus_client's collector hook, called on its HTTP thread per scrape: one
        consistent snapshot of the topology, taken on the topology's own loop (its counters
        are not safe to read from another thread)."""
        yield from topology_metric_families(self._snapshot())

    def close(self) -> None:
        """Stop serving and free the port; the topology keeps running."""
        self._server.shutdown()
        self._server.server_close()


def serve_prometheus(
    running: RunningTopology, port: int = 0, addr: str = "127.0.0.1"
) -> PrometheusExporter:
    """Expose ``running``'s metrics at ``http://addr:port/metrics`` (port 0: any free one).

    Call from the topology's event loop (inside ``run_topology``).
    """
    return PrometheusExporter(running, port, addr)
