"""The engine logs through ``logging``: a logger per component (also ``self.logger``),
errors with their tracebacks, a warning when user code blocks the loop, ``topology.debug``."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any

import pytest

from engine import BasicBatchBolt, BasicBolt, Spout, TopologyBuilder, run_topology
from engine._execution.executor import StepTimer
from engine.testing import FiniteSpout, simulate


class Picky(BasicBolt):
    """Fails message 3 the first time it sees it (the spout replays it)."""

    def prepare(self, conf: Any, context: Any) -> None:
        self.logger.info("prepared task %d", context.get_this_task_id())
        self.failed_once = False

    def execute(self, tuple: Any, collector: Any) -> None:
        if tuple["id"] == 3 and not self.failed_once:
            self.failed_once = True
            raise ValueError("no threes")


class Sleepy(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        time.sleep(0.03)  # blocks the event loop: what the warning is about


def _run(bolt: Any, conf: dict[str, Any], n: int = 6) -> None:
    builder = TopologyBuilder()
    builder.set_spout("numbers", FiniteSpout(n))
    builder.set_bolt("bolt", bolt).shuffle_grouping("numbers")

    async def scenario() -> None:
        async with run_topology(builder.create_topology(), {"topology.seed": 1, **conf}) as r:
            await r.wait_until_complete(timeout=60)

    simulate(scenario())


def test_errors_are_logged_with_their_traceback_on_the_components_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="engine"):
        _run(Picky(), {})
    records = [r for r in caplog.records if r.name == "engine.component.bolt"]
    assert any(r.levelno == logging.INFO and r.getMessage() == "prepared task 1" for r in records)
    errors = [r for r in records if r.levelno == logging.ERROR]
    assert errors, [r.getMessage() for r in caplog.records]
    message = errors[0].getMessage()
    assert message.startswith("task 1: ValueError('no threes')\nTraceback (most recent call")
    assert 'raise ValueError("no threes")' in message


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def _blocked(kind: str, component: str, task: int, where: str, warn_secs: str) -> str:
    """The blocking warning, as a pattern (the seconds measured vary)."""
    return (
        rf"{kind} '{component}' task {task} blocked the event loop for \d+\.\d{{3}} s in "
        rf"{re.escape(where)} \(topology\.blocking\.warn\.secs = {re.escape(warn_secs)}\): "
        rf"make blocking calls async or run them in a thread \(asyncio\.to_thread\)"
    )


def test_a_bolt_that_blocks_the_loop_is_warned_about_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="engine"):
        _run(Sleepy(), {"topology.blocking.warn.secs": 0.01})
    warnings = _warnings(caplog)
    assert len(warnings) == 1, warnings  # at most one per executor every 10 s
    assert re.fullmatch(_blocked("bolt", "bolt", 1, "one call of execute", "0.01"), warnings[0])


class SleepsOnce(BasicBolt):
    """One call holds the loop for 0.3 s (a blocking client, say); the others are quick."""

    def prepare(self, conf: Any, context: Any) -> None:
        self.slept = False

    def execute(self, tuple: Any, collector: Any) -> None:
        if not self.slept:
            self.slept = True
            time.sleep(0.3)


def test_one_call_that_holds_the_loop_is_warned_about_naming_component_task_and_method(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="engine"):
        _run(SleepsOnce(), {}, n=20)
    (warning,) = _warnings(caplog)
    assert re.fullmatch(_blocked("bolt", "bolt", 1, "one call of execute", "0.25"), warning)
    took = float(warning.split(" for ")[1].split(" s ")[0])
    assert 0.3 <= took < 0.5  # that one call, not the batch it was in


class AwaitsABlockingCall(BasicBatchBolt):
    """An async batch bolt that awaits 0.3 s of real work done in a thread: the loop runs
    everything else meanwhile."""

    async def execute_batch(self, batch: Any, collector: Any) -> None:
        await asyncio.to_thread(time.sleep, 0.3)


def test_an_async_call_that_awaits_is_not_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="engine"):
        _run(AwaitsABlockingCall(), {}, n=3)
    assert _warnings(caplog) == []


class BlocksBetweenAwaits(BasicBatchBolt):
    """Awaits, then holds the loop for 0.3 s in one synchronous stretch."""

    async def execute_batch(self, batch: Any, collector: Any) -> None:
        await asyncio.sleep(0.01)
        time.sleep(0.3)
        await asyncio.sleep(0.01)


def test_an_async_call_that_holds_the_loop_between_two_awaits_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="engine"):
        _run(BlocksBetweenAwaits(), {}, n=1)
    (warning,) = _warnings(caplog)
    assert re.fullmatch(
        _blocked("bolt", "bolt", 1, "async execute_batch between two awaits", "0.25"), warning
    )


class OneBigBatch(Spout):
    """Emits ``n`` rows in one ``emit_batch``: one batch, one turn of the bolt."""

    def __init__(self, n: int) -> None:
        self.n = n

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.done = False

    def next_tuple(self) -> None:
        if not self.done:
            self.done = True
            self.collector.emit_batch([list(range(self.n))], msg_ids=range(self.n))

    def is_exhausted(self) -> bool:
        return self.done

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id"])


class Quick(BasicBolt):
    """30 us of work per tuple: 10,000 of them hold one turn for 0.3 s, no call for long."""

    def prepare(self, conf: Any, context: Any) -> None:
        self.executed = 0

    def execute(self, tuple: Any, collector: Any) -> None:
        self.executed += 1
        end = time.perf_counter_ns() + 30_000
        while time.perf_counter_ns() < end:
            pass


def test_many_quick_calls_in_one_turn_are_not_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    builder = TopologyBuilder()
    builder.set_spout("numbers", OneBigBatch(10_000))
    builder.set_bolt("bolt", Quick()).shuffle_grouping("numbers")

    async def scenario() -> tuple[int, int]:
        async with run_topology(builder.create_topology(), {"topology.seed": 1}) as running:
            await running.wait_until_complete(timeout=60)
            (bolt,) = running.task_objects("bolt").values()
            return bolt.executed, running.info().components["bolt"].tasks[1].executed

    with caplog.at_level(logging.WARNING, logger="engine"):
        executed, counted = simulate(scenario())
    assert executed == counted == 10_000
    assert _warnings(caplog) == []


@pytest.mark.parametrize(("rate", "expect_all"), [(1.0, True), (0.3, False)])
def test_debug_logs_the_tuples_each_executor_sends(
    caplog: pytest.LogCaptureFixture, rate: float, expect_all: bool
) -> None:
    with caplog.at_level(logging.DEBUG, logger="engine"):
        _run(Picky(), {"topology.debug": True, "topology.debug.sample.rate": rate}, n=40)
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.name == "engine.component.numbers" and r.getMessage().startswith("Emitting:")
    ]
    assert all(
        line.startswith("Emitting: numbers task 2 stream default -> task 1: [") for line in lines
    )
    if expect_all:
        assert len(lines) >= 40  # every tuple sent, replays included
    else:
        assert 0 < len(lines) < 40


def test_without_debug_nothing_is_logged_per_tuple(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="engine"):
        _run(Picky(), {}, n=10)
    assert not [r for r in caplog.records if r.getMessage().startswith("Emitting:")]


class _Checks:
    """What ``StepTimer`` needs of an executor: the threshold, and where a step goes."""

    block_warn_ns = 50_000_000

    def __init__(self) -> None:
        self.steps: list[tuple[int, float, str]] = []

    def check_blocking(self, task: int, took_ns: int, where: str) -> None:
        self.steps.append((task, took_ns / 1e9, where))


def test_the_step_timer_times_steps_and_passes_results_errors_and_cancellation() -> None:
    checks = _Checks()

    async def work(fail: bool) -> str:
        time.sleep(0.06)  # first step: held
        await asyncio.sleep(1)  # awaited: never counted
        await asyncio.sleep(0)  # a step of no length
        if fail:
            raise ValueError("bad row")
        return "done"

    async def hangs() -> None:
        await asyncio.sleep(3600)

    async def scenario() -> None:
        timer = StepTimer(work(False), checks, 3, "async execute between two awaits")  # type: ignore[arg-type]
        assert await timer == "done"
        with pytest.raises(ValueError, match=r"^bad row$"):
            await StepTimer(work(True), checks, 3, "x")  # type: ignore[arg-type]
        task = asyncio.ensure_future(StepTimer(hangs(), checks, 3, "y"))  # type: ignore[arg-type]
        await asyncio.sleep(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    simulate(scenario())
    assert [(task, where) for task, _, where in checks.steps] == [
        (3, "async execute between two awaits"),
        (3, "x"),
    ]
    assert all(0.06 <= took < 0.5 for _, took, _ in checks.steps)


class BlocksOnceSpout(FiniteSpout):
    """Its first ``next_tuple`` holds the loop for 0.3 s."""

    def next_tuple(self) -> None:
        if not getattr(self, "slept", False):
            self.slept = True
            time.sleep(0.3)
        super().next_tuple()


def test_a_spout_that_holds_the_loop_is_warned_about_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    builder = TopologyBuilder()
    builder.set_spout("slow", BlocksOnceSpout(5))
    builder.set_bolt("bolt", Picky()).shuffle_grouping("slow")

    async def scenario() -> None:
        async with run_topology(builder.create_topology(), {"topology.seed": 1}) as running:
            await running.wait_until_complete(timeout=60)

    with caplog.at_level(logging.WARNING, logger="engine"):
        simulate(scenario())
    (warning,) = _warnings(caplog)
    assert re.fullmatch(_blocked("spout", "slow", 2, "one call of next_tuple", "0.25"), warning)
