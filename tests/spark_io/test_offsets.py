"""Offset bookkeeping and retry backoff, without Spark: a fake clock drives every time."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_io import FirstPollStrategy, RetryPolicy, SparkConfigError
from spark_io._offsets import (
    Batch,
    PositionTracker,
    RetrySchedule,
    chunk_owner,
    first_position,
    next_owned_chunk_start,
)

SEC = 10**9


# --- retry policy: Storm's KafkaSpoutRetryExponentialBackoff --------------------------------


def storm_next_time_ns(policy: RetryPolicy, fails: int, now_ns: int) -> int:
    """KafkaSpoutRetryExponentialBackoff.nextTime, transcribed."""
    if fails == 1:
        next_ns = now_ns + int(policy.initial_delay_secs * SEC)
    else:
        next_ns = now_ns + int(policy.delay_period_secs * SEC) * 2 ** (fails - 1)
    return min(next_ns, now_ns + int(policy.max_delay_secs * SEC))


def test_the_defaults_back_off_for_real() -> None:
    # storm-kafka-client's defaults (no initial delay, a 2 ms period) retried a row a dozen
    # times in 16 s; these wait 0.5 s, then double up to Storm's cap of 10 s, forever.
    policy = RetryPolicy()
    assert (policy.initial_delay_secs, policy.delay_period_secs) == (0.5, 0.5)
    assert (policy.max_retries, policy.max_delay_secs) == (None, 10.0)
    assert [policy.delay_secs(f) for f in range(1, 8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert not policy.retries_exhausted(10**9)


@given(
    initial=st.integers(0, 5_000),
    period=st.integers(1, 3_000),
    max_delay=st.integers(0, 60_000),
    fails=st.integers(1, 40),
)
def test_backoff_matches_storms_formula(
    initial: int, period: int, max_delay: int, fails: int
) -> None:
    policy = RetryPolicy(initial / 1000, period / 1000, None, max_delay / 1000)
    schedule = RetrySchedule(policy)
    now = 7 * SEC
    for _ in range(fails - 1):
        schedule.fail("k", now)
        assert schedule.pop_due(10**30) == "k"
    assert schedule.fail("k", now)
    expected = storm_next_time_ns(policy, fails, now)
    assert abs(schedule.next_due_ns() - expected) <= 1  # float seconds -> ns rounding


def test_retry_is_not_due_before_its_time_and_due_after() -> None:
    schedule = RetrySchedule(RetryPolicy(initial_delay_secs=1.0, delay_period_secs=2.0))
    assert schedule.fail(5, now_ns=0)
    assert schedule.pop_due(SEC - 1) is None
    assert schedule.pop_due(SEC) == 5
    assert schedule.fail(5, now_ns=10 * SEC)  # second failure: 2.0 * 2**1 = 4 s later
    assert schedule.pop_due(14 * SEC - 1) is None
    assert schedule.pop_due(14 * SEC) == 5


def test_max_retries_drops_the_next_failure() -> None:
    schedule = RetrySchedule(RetryPolicy(max_retries=2))
    assert schedule.fail("a", 0)
    assert schedule.fail("a", 0)
    assert not schedule.fail("a", 0)  # third failure, two retries spent
    assert schedule.fails["a"] == 3


def test_max_retries_zero_never_retries() -> None:
    assert not RetrySchedule(RetryPolicy(max_retries=0)).fail("a", 0)


def test_due_retries_come_out_earliest_first() -> None:
    schedule = RetrySchedule(RetryPolicy(initial_delay_secs=1.0))
    schedule.fail("late", 5 * SEC)
    schedule.fail("early", 1 * SEC)
    assert [schedule.pop_due(10 * SEC) for _ in range(3)] == ["early", "late", None]


def test_forget_clears_the_failure_count() -> None:
    schedule = RetrySchedule(RetryPolicy(max_retries=1))
    schedule.fail("a", 0)
    schedule.forget("a")
    assert schedule.fail("a", 0)  # counted from scratch


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"initial_delay_secs": -1},
            "RetryPolicy.initial_delay_secs must be a number >= 0, got -1",
        ),
        (
            {"delay_period_secs": float("nan")},
            "RetryPolicy.delay_period_secs must be a number >= 0, got nan",
        ),
        ({"max_delay_secs": "1"}, "RetryPolicy.max_delay_secs must be a number >= 0, got '1'"),
        (
            {"max_retries": -1},
            "RetryPolicy.max_retries must be an int >= 0 or None (retry forever), got -1",
        ),
        (
            {"max_retries": 1.5},
            "RetryPolicy.max_retries must be an int >= 0 or None (retry forever), got 1.5",
        ),
    ],
)
def test_retry_policy_is_validated(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(SparkConfigError) as info:
        RetryPolicy(**kwargs)  # type: ignore[arg-type]
    assert str(info.value) == message


# --- first poll -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "committed", "expected"),
    [
        (FirstPollStrategy.EARLIEST, None, 10),
        (FirstPollStrategy.EARLIEST, 50, 10),  # ignores the commit
        (FirstPollStrategy.LATEST, None, 100),
        (FirstPollStrategy.LATEST, 50, 100),
        (FirstPollStrategy.UNCOMMITTED_EARLIEST, None, 10),
        (FirstPollStrategy.UNCOMMITTED_EARLIEST, 50, 50),  # the commit wins
        (FirstPollStrategy.UNCOMMITTED_LATEST, None, 100),
        (FirstPollStrategy.UNCOMMITTED_LATEST, 50, 50),
    ],
)
def test_first_position(strategy: FirstPollStrategy, committed: int | None, expected: int) -> None:
    assert first_position(strategy, committed, earliest=10, latest=99) == expected


def test_first_position_of_an_empty_source() -> None:
    assert first_position(FirstPollStrategy.LATEST, None, None, None) is None
    assert first_position(FirstPollStrategy.EARLIEST, None, None, None) is None


# --- partitions -------------------------------------------------------------------------------


@given(st.integers(0, 10**12), st.integers(1, 1000), st.integers(1, 8), st.data())
def test_next_owned_chunk_start(
    offset: int, chunk: int, partitions: int, data: st.DataObject
) -> None:
    partition = data.draw(st.integers(0, partitions - 1))
    start = next_owned_chunk_start(offset, chunk, partitions, partition)
    assert start >= offset
    assert chunk_owner(start, chunk, partitions) == partition
    # No offset between ``offset`` and ``start`` belongs to ``partition``.
    for probe in (offset, max(offset, start - 1)):
        if probe < start:
            assert chunk_owner(probe, chunk, partitions) != partition


def test_chunks_are_dealt_round_robin() -> None:
    assert [chunk_owner(o, 10, 3) for o in (0, 9, 10, 25, 30, 59)] == [0, 0, 1, 2, 0, 2]


# --- the tracker against a model ---------------------------------------------------------------


class ModelTask:
    """Obviously correct: passes in order, each committed once every row of it is done."""

    def __init__(self, start: int) -> None:
        self.commit = start
        #: per pass: [positions read, ended, hi]
        self.passes: list[list[Any]] = []
        self.done: set[int] = set()

    def commit_point(self) -> int:
        for positions, ended, hi in self.passes:
            if not ended or not positions <= self.done:
                break
            self.commit = hi
        return self.commit


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_tracker_commits_passes_like_the_model(data: st.DataObject) -> None:
    start = data.draw(st.integers(0, 50))
    tracker = PositionTracker(start)
    model = ModelTask(start)
    position = 0
    low = start  # where the open pass starts
    batches: list[Batch] = []
    emitted: list[int] = []
    for _ in range(data.draw(st.integers(1, 40))):
        op = data.draw(
            st.sampled_from(["batch", "end", "emit", "emit", "ack", "ack", "acks", "commit"])
        )
        if not model.passes or model.passes[-1][1]:
            model.passes.append([set(), False, low])
        current = model.passes[-1]
        if op == "batch":
            size = data.draw(st.integers(1, 6))
            offsets = data.draw(st.lists(st.integers(low, low + 30), min_size=size, max_size=size))
            batch = tracker.add(Batch(position, np.array(offsets, np.int64), [offsets]))
            batches.append(batch)
            current[0].update(range(position, position + size))
            current[2] = max(current[2], max(offsets) + 1)
            position += size
        elif op == "end":
            tracker.end_pass(current[2])
            current[1] = True
            low = current[2]
        elif op == "emit":
            for batch in batches:
                if batch.emitted < batch.size:
                    emitted.append(batch.lo + batch.emitted)
                    batch.emitted += 1
                    tracker.emitted(1)
                    break
        elif op in ("ack", "acks"):
            candidates = sorted(set(emitted) - model.done)
            if candidates:
                some = data.draw(st.lists(st.sampled_from(candidates), min_size=1, unique=True))
                if op == "ack":
                    some = some[:1]
                tracker.done_all(some)
                model.done.update(some)
        else:
            assert tracker.commit_point() == model.commit_point()
        assert tracker.inflight == len(set(emitted) - model.done)
    assert tracker.commit_point() == model.commit_point()


def test_tracker_example_from_the_docstring() -> None:
    tracker = PositionTracker(start=0)
    batch = tracker.add(Batch(0, np.array([7, 3, 5]), [["h", "d", "f"]]))
    tracker.end_pass(8)
    batch.emitted = 3
    tracker.emitted(3)
    tracker.done_all([0, 2])
    assert tracker.commit_point() == 0
    assert tracker.inflight == 1
    tracker.done(1)
    assert tracker.commit_point() == 8
    assert tracker.is_empty()


def test_a_pass_is_committed_only_once_it_ended() -> None:
    tracker = PositionTracker(start=0)
    batch = tracker.add(Batch(0, np.array([0, 1]), [["a", "b"]]))
    batch.emitted = 2
    tracker.emitted(2)
    tracker.done_all([0, 1])
    assert tracker.commit_point() == 0  # more rows of the pass may come, with lower offsets
    tracker.end_pass(2)
    assert tracker.commit_point() == 2


def test_an_empty_pass_moves_the_commit_past_a_gap() -> None:
    tracker = PositionTracker(start=0)
    tracker.end_pass(100)
    assert tracker.commit_point() == 100


def test_rows_of_several_batches_are_acked_at_once_and_looked_up_for_replays() -> None:
    tracker = PositionTracker(start=0)
    one = tracker.add(Batch(0, np.array([9, 1]), [["nine", "one"]]))
    two = tracker.add(Batch(2, np.array([12]), [["twelve"]]))
    assert tracker.batch_of(2).row(2) == ["twelve"]
    assert tracker.batch_of(1).offset(1) == 1
    one.emitted, two.emitted = 2, 1
    tracker.emitted(3)
    tracker.done_all([2, 0])  # one row of each
    assert tracker.batches == [one]  # the other one is done and forgotten
    with pytest.raises(KeyError):
        tracker.batch_of(2)


def test_a_task_that_does_not_know_its_start_commits_nothing() -> None:
    tracker = PositionTracker()
    assert tracker.commit_point() is None
    tracker.rebase(40)
    assert tracker.commit_point() == 40
