"""Recent windows: counts diffed between sampler snapshots, in the topology's (virtual) time."""

from __future__ import annotations

from typing import Any

import pytest

from engine import run_topology
from engine.testing import advance_time, simulate
from engine.ui import StatsSampler
from engine.ui._sampler import Counts

from .paced import paced_topology


def run_sampled(seconds: int, horizon: float = 30.0) -> tuple[Any, StatsSampler]:
    async def scenario() -> tuple[Any, StatsSampler]:
        # One sentence per 10 ms of virtual time: 100 spout tuples per second.
        async with run_topology(paced_topology(pause=0.01), {"topology.seed": 1}) as running:
            sampler = StatsSampler(horizon_secs=horizon)
            sampler.record(running.info())
            for _ in range(seconds):
                await advance_time(1.0)
                sampler.record(running.info())
            return running.info(), sampler

    return simulate(scenario())


def test_a_window_counts_only_its_last_seconds() -> None:
    info, sampler = run_sampled(40)
    whole = sampler.window(info, None)
    assert whole.component("sentences").emitted == info.components["sentences"].emitted
    assert whole.component("count").executed == info.components["count"].executed
    last10 = sampler.window(info, 10)
    assert 10.0 <= last10.span_secs < 11.0
    emitted = last10.component("sentences").emitted
    assert 900 <= emitted <= 1100  # 100/s for 10 s
    assert last10.component("split").executed == pytest.approx(emitted, abs=20)
    assert last10.component("count").executed == pytest.approx(5 * emitted, rel=0.05)
    assert last10.component("sentences").complete_latency_ms is not None


def test_the_ring_keeps_only_the_horizon() -> None:
    info, sampler = run_sampled(40, horizon=10.0)
    times = [s.time_secs for s in sampler.samples]
    assert len(times) <= 12
    assert times[0] <= info.uptime_secs - 10.0 < times[1]
    # A window longer than the run so far covers the whole run.
    young, young_sampler = run_sampled(3)
    span = young_sampler.window(young, 600)
    assert span.span_secs == young.uptime_secs
    assert span.component("sentences").emitted == young.components["sentences"].emitted


def test_series_gives_spout_rates_per_interval() -> None:
    info, sampler = run_sampled(20)
    series = sampler.series({"sentences"})
    assert len(series) == 20
    for point in series[2:]:
        assert point["emitted"] == pytest.approx(100, rel=0.15)
        assert point["acked"] == pytest.approx(100, rel=0.15)
        assert point["completeLatency"] is not None
    # The count bolt raises now and then: the failures per second add up to the total.
    failed = info.components["sentences"].failed
    assert failed > 0
    assert sum(p["failed"] for p in series) == pytest.approx(failed, abs=0.5)
    assert len(sampler.series({"sentences"}, max_points=5)) == 5


def test_a_restarted_task_counts_from_zero() -> None:
    before = Counts(emitted=500, acked=480, executed=0)
    after_crash = Counts(emitted=30, acked=25)
    assert after_crash.minus(before) == after_crash
    assert Counts(emitted=600, acked=590).minus(before) == Counts(emitted=100, acked=110)


def test_bad_arguments_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"^horizon_secs must be > 0, got 0$"):
        StatsSampler(horizon_secs=0)
    info, sampler = run_sampled(1)
    with pytest.raises(ValueError, match=r"^window_secs must be > 0, got -5$"):
        sampler.window(info, -5)
