"""Errors: every one counted (per task and component), the last few kept with tracebacks,
identical ones grouped, and the log throttled as Storm throttles error reports."""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

import pytest

from engine import BasicBolt, TopologyBuilder, run_topology
from engine._command.cli import main
from engine._model.config import merged_config
from engine._monitor.error_log import ErrorLog
from engine._monitor.stats import ErrorInfo
from engine._time.virtual import VirtualClock
from engine.testing import FiniteSpout, simulate
from engine.ui._api import topology_summary_json

ERRORS = 1_457


class FailsEachOnce(BasicBolt):
    """Raises the first time it sees each id: ``ValueError`` for odd ids, ``KeyError`` for
    even ones (replays then pass), so the run reports exactly one error per id."""

    def prepare(self, conf: Any, context: Any) -> None:
        self.seen: set[int] = set()

    def execute(self, tuple: Any, collector: Any) -> None:
        n = tuple["id"]
        if n not in self.seen:
            self.seen.add(n)
            if n % 2:
                raise ValueError("odd row")
            raise KeyError("even row")


def erring() -> Any:
    builder = TopologyBuilder()
    builder.set_spout("numbers", FiniteSpout(ERRORS))
    builder.set_bolt("picky", FailsEachOnce()).shuffle_grouping("numbers")
    return builder.create_topology(), {"topology.seed": 3}


def _error_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "engine.component.picky" and r.levelno == logging.ERROR
    ]


def test_every_error_is_counted_the_last_kept_and_identical_ones_grouped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    topology, conf = erring()

    async def scenario() -> Any:
        async with run_topology(topology, conf) as running:
            await running.wait_until_complete(timeout=60)
            return running.info()

    with caplog.at_level(logging.ERROR, logger="engine"):
        info = simulate(scenario())
    picky = info.components["picky"]
    assert info.error_count == picky.error_count == picky.tasks[2].error_count == ERRORS
    assert info.components["numbers"].error_count == 0
    # The last ``topology.error.history.size`` (10), with their tracebacks.
    assert len(info.errors) == len(picky.tasks[2].errors) == 10
    assert all(e.traceback.startswith("Traceback (most recent call last)") for e in info.errors)
    groups = {g.error: g for g in info.error_groups}
    assert sorted(groups) == ["KeyError('even row')", "ValueError('odd row')"]
    assert groups["ValueError('odd row')"].count == ERRORS // 2
    assert groups["KeyError('even row')"].count == ERRORS // 2 + 1
    for g in groups.values():
        assert (g.component, g.last_task) == ("picky", 2)
        assert 0 <= g.first_secs <= g.last_secs <= info.uptime_secs
        assert 'raise KeyError("even row")' in g.traceback or 'raise ValueError("odd row")' in (
            g.traceback
        )
    assert topology_summary_json(info)["errors"] == ERRORS
    # Logged: the first 5 of the 10 s interval with tracebacks, then one line for the rest.
    lines = _error_lines(caplog)
    assert len(lines) == 6, lines
    assert all(re.match(r"task 2: (ValueError|KeyError)\(.*\)\nTraceback", x) for x in lines[:5])
    assert re.fullmatch(
        r"task 2: suppressed 1,452 more error\(s\) in 10 s, the last: "
        r"(ValueError\('odd row'\)|KeyError\('even row'\)) \(at most 5 are logged per 10 s: "
        r"topology\.max\.error\.report\.per\.interval, topology\.error\.throttle\.interval\.secs\); "
        r"every error is counted in the stats",
        lines[5],
    )


def test_the_command_line_reports_the_true_count(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "tests.engine.test_error_log:erring", "--interval", "0.2"], runner=simulate)
    assert code == 1
    out, err = capsys.readouterr()
    assert f"errors ({ERRORS:,}; last 3):" in out
    assert (
        f"squall: {ERRORS:,} tuple tree(s) failed or timed out and {ERRORS:,} error(s) were "
        f"reported (exit 1; --fail-on never exits 0)"
    ) in err
    progress = [line for line in err.splitlines() if "spout emitted" in line]
    assert progress[-1].endswith(f"errors {ERRORS:,}")
    # 5 errors with their tracebacks and one summary, not 1,457 tracebacks.
    assert err.count("Traceback (most recent call last)") == 5
    assert err.count("suppressed 1,452 more error(s)") == 1


def _info(n: int) -> ErrorInfo:
    return ErrorInfo("bolt", 7, 0.0, f"ValueError('row {n % 2}')", "Traceback ...\n")


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        # Errors every 0.375 s, 60 in all: 27 in each 10 s interval (the first opens it).
        ({}, [(5, 22), (5, 22), (5, 1)]),
        (
            {
                "topology.max.error.report.per.interval": 2,
                "topology.error.throttle.interval.secs": 2.9,
            },
            [(2, 6)] * 7 + [(2, 2)],
        ),
    ],
)
def test_errors_are_logged_throttled_per_interval_and_summed_up_when_it_ends(
    caplog: pytest.LogCaptureFixture, conf: dict[str, Any], expected: list[tuple[int, int]]
) -> None:
    async def scenario() -> ErrorLog:
        loop = asyncio.get_running_loop()
        log = ErrorLog(merged_config(conf), VirtualClock(loop))  # type: ignore[arg-type]
        for n in range(60):
            log.record(_info(n))
            await asyncio.sleep(0.375)
        await asyncio.sleep(30)  # the last interval ends: its summary
        return log

    with caplog.at_level(logging.ERROR, logger="engine"):
        log = simulate(scenario())
    assert log.count(7) == 60
    assert [(g.error, g.count) for g in log.groups("bolt")] == [
        ("ValueError('row 0')", 30),
        ("ValueError('row 1')", 30),
    ]
    assert log.groups("other") == ()
    logged = [r.getMessage() for r in caplog.records if r.name == "engine.component.bolt"]
    intervals: list[tuple[int, int]] = []
    full = 0
    for line in logged:
        if line.startswith("task 7: ValueError"):
            full += 1
            continue
        suppressed = re.match(
            r"task 7: suppressed (\d+) more error\(s\) in [\d.]+ s, the last: ", line
        )
        assert suppressed, line
        intervals.append((full, int(suppressed[1])))
        full = 0
    if full:
        intervals.append((full, 0))
    assert intervals == expected
    assert sum(a + b for a, b in intervals) == 60


def test_closing_the_log_sums_up_the_interval_still_open(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        log = ErrorLog(merged_config({}), VirtualClock(asyncio.get_running_loop()))  # type: ignore[arg-type]
        for n in range(8):
            log.record(_info(n))
        log.close()
        await asyncio.sleep(20)  # no second summary when the interval would have ended

    with caplog.at_level(logging.ERROR, logger="engine"):
        simulate(scenario())
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 6
    assert messages[5].startswith("task 7: suppressed 3 more error(s) in 10 s, the last: ")


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("topology.max.error.report.per.interval", 0, "a positive int"),
        ("topology.error.throttle.interval.secs", 0, "a positive number"),
    ],
)
def test_throttle_settings_are_checked(key: str, value: Any, expected: str) -> None:
    with pytest.raises(Exception, match=re.escape(f"{key!r} must be {expected}, got {value!r}")):
        merged_config({key: value})
