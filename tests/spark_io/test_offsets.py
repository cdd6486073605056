"""Offset bookkeeping and retry backoff, without Spark: a fake clock drives every time."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_io import FirstPollStrategy, RetryPolicy, SparkConfigError
from spark_io._offsets import (
    Chunk,
    OffsetTracker,
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


class ModelPartition:
    """Obviously correct: the commit is the lowest offset read and not done."""

    def __init__(self, start: int) -> None:
        self.start = start
        self.read: list[int] = []
        self.done: set[int] = set()
        self.end = start

    def commit_point(self) -> int:
        pending = [o for o in self.read if o not in self.done]
        return min(pending) if pending else self.end


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_tracker_commits_the_done_prefix_like_the_model(data: st.DataObject) -> None:
    start = data.draw(st.integers(0, 50))
    tracker = OffsetTracker(start)
    model = ModelPartition(start)
    lo = start
    chunks: list[Chunk] = []
    emitted: list[int] = []
    for _ in range(data.draw(st.integers(1, 30))):
        op = data.draw(st.sampled_from(["chunk", "emit", "emit", "ack", "ack", "commit"]))
        if op == "chunk":
            lo += data.draw(st.integers(0, 5))  # a gap the reader skipped
            width = data.draw(st.integers(1, 8))
            offsets = sorted(data.draw(st.sets(st.integers(lo, lo + width - 1), max_size=width)))
            chunk = tracker.add(Chunk(lo, lo + width, offsets, [f"r{o}" for o in offsets]))
            chunks.append(chunk)
            model.read.extend(offsets)
            model.end = lo + width
            lo += width
        elif op == "emit":
            for chunk in chunks:
                if chunk.emitted < chunk.size:
                    emitted.append(chunk.offsets[chunk.emitted])
                    chunk.emitted += 1
                    break
        elif op == "ack":
            candidates = sorted(set(emitted) - model.done)
            if candidates:
                offset = data.draw(st.sampled_from(candidates))
                tracker.done(offset)
                model.done.add(offset)
        else:
            assert tracker.commit_point() == model.commit_point()
    point = tracker.commit_point()
    assert point == model.commit_point()
    # Nothing below the commit point is still pending.
    assert all(o in model.done for o in model.read if o < point)


def test_tracker_example_from_the_docstring() -> None:
    tracker = OffsetTracker(start=0)
    chunk = tracker.add(Chunk(0, 10, [0, 1, 4], ["a", "b", "e"]))
    chunk.emitted = 3
    tracker.done(1)
    assert tracker.commit_point() == 0
    tracker.done(0)
    assert tracker.commit_point() == 4
    assert tracker.uncommitted() == 1
    tracker.done(4)
    assert tracker.commit_point() == 10
    assert tracker.is_empty()


def test_unemitted_rows_hold_the_commit_back() -> None:
    tracker = OffsetTracker(start=0)
    chunk = tracker.add(Chunk(0, 5, [0, 1, 2], ["a", "b", "c"]))
    chunk.emitted = 1
    tracker.done(0)
    assert tracker.commit_point() == 1  # 1 was read but not emitted yet


def test_an_empty_chunk_moves_the_commit_past_a_gap() -> None:
    tracker = OffsetTracker(start=0)
    tracker.add(Chunk(0, 100, [], []))
    assert tracker.commit_point() == 100


def test_overlapping_chunks_are_refused() -> None:
    tracker = OffsetTracker(start=10)
    with pytest.raises(
        ValueError, match=r"chunk \[5, 20\) overlaps what was already read \(read up to 10\)"
    ):
        tracker.add(Chunk(5, 20, [], []))


def test_emitted_point_without_acks() -> None:
    tracker = OffsetTracker(start=0)
    chunk = tracker.add(Chunk(0, 10, [2, 3, 7], ["a", "b", "c"]))
    assert tracker.emitted_point() == 2
    chunk.emitted = 2
    assert tracker.emitted_point() == 7
    chunk.emitted = 3
    assert tracker.emitted_point() == 10
    tracker.drop_emitted()
    assert tracker.is_empty()


def test_row_lookup_for_replays() -> None:
    tracker = OffsetTracker(start=0)
    tracker.add(Chunk(0, 10, [1, 5], ["one", "five"]))
    tracker.add(Chunk(10, 20, [12], ["twelve"]))
    assert tracker.chunk_of(12).row_of(12) == "twelve"  # type: ignore[union-attr]
    assert tracker.chunk_of(5).row_of(5) == "five"  # type: ignore[union-attr]
    assert tracker.chunk_of(25) is None
    with pytest.raises(KeyError):
        tracker.chunk_of(3).row_of(3)  # type: ignore[union-attr]
