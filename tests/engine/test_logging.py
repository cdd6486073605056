"""The engine logs through ``logging``: a logger per component (also ``self.logger``),
errors with their tracebacks, a warning when user code blocks the loop, ``topology.debug``."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from engine import BasicBolt, TopologyBuilder, run_topology
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


def test_a_bolt_that_blocks_the_loop_is_warned_about_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="engine"):
        _run(Sleepy(), {"topology.blocking.warn.secs": 0.01})
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings  # at most one per executor every 10 s
    assert warnings[0].startswith("task 1 blocked the event loop for 0.")
    assert "in execute" in warnings[0]
    assert "make blocking calls async or run them in a thread (asyncio.to_thread)" in warnings[0]


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
