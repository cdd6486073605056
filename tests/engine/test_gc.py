"""The managed GC policy: collections every interval, held to a share of the time."""

from __future__ import annotations

import gc
import sys

import pytest

from engine._runtime.gc import ManagedGC


class FakeTimer:
    """A wall clock that moves only when told; each ``gc.collect`` takes ``cost`` seconds."""

    def __init__(self) -> None:
        self.now = 0.0
        self.cost = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def collections(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeTimer, list[int]]:
    timer = FakeTimer()
    done: list[int] = []

    def collect(generation: int = 2) -> int:
        done.append(generation)
        timer.now += timer.cost
        return 0

    monkeypatch.setattr(gc, "collect", collect)
    monkeypatch.setattr(ManagedGC, "_collect_first", False)  # whatever ran before
    return timer, done


def test_cheap_collections_run_every_call(collections: tuple[FakeTimer, list[int]]) -> None:
    timer, done = collections
    timer.cost = 0.001  # 1 ms: within 2 % of a 1 s interval
    with ManagedGC(timer=timer) as managed:
        ran = []
        for _ in range(20):
            timer.now += 1.0
            ran.append(managed.collect())
    assert ran == [True] * 20
    # the young generations, and every tenth collection a full one
    assert done == [1] * 9 + [2] + [1] * 9 + [2]


def test_a_costly_collection_defers_the_next_ones(
    collections: tuple[FakeTimer, list[int]],
) -> None:
    timer, done = collections
    timer.cost = 0.125  # (a second of window tuples to walk): the next one 4 s later
    with ManagedGC(time_share=1 / 32, timer=timer) as managed:
        ran = []
        for _ in range(12):
            timer.now += 1.0
            ran.append(managed.collect())
    # collected at 1 s (done at 1.125 s), skipped until 5.125 s, and so on
    assert ran == [True, False, False, False] * 3
    assert len(done) == 3
    timer.cost = 0.0
    # and once collections are cheap again, every call collects
    with ManagedGC(timer=timer) as cheap:
        assert [cheap.collect() for _ in range(3)] == [True] * 3


def test_the_collector_state_is_restored_by_the_last_topology_out() -> None:
    was = gc.isenabled()
    gc.enable()
    try:
        with ManagedGC():
            assert not gc.isenabled()
            assert gc.get_freeze_count() > 0
            with ManagedGC():
                assert not gc.isenabled()
            assert not gc.isenabled()  # the first one still runs
        assert gc.isenabled()
        assert gc.get_freeze_count() == 0
    finally:
        if not was:
            gc.disable()


def test_after_a_long_run_the_next_topology_collects_before_it_freezes(
    collections: tuple[FakeTimer, list[int]],
) -> None:
    # A dropped topology is cyclic garbage; freezing it would keep its memory while the
    # next topology runs. After a short run the next start does not pay a collection.
    from engine._runtime.gc import LONG_RUN_SECS

    timer, done = collections
    with ManagedGC(timer=timer):
        timer.now += LONG_RUN_SECS / 2
    with ManagedGC(timer=timer):
        assert done == []  # after a short run: no collection
        timer.now += LONG_RUN_SECS
    with ManagedGC(timer=timer):
        assert done == [2]  # a full collection, before the freeze
        with ManagedGC(timer=timer):  # a second one in freezes nothing: no collection
            timer.now += LONG_RUN_SECS
        assert done == [2]
    with ManagedGC(timer=timer):  # the inner one ran long: the next first one collects
        assert done == [2, 2]


def test_after_a_run_that_raised_the_peak_memory_the_next_one_collects_first(
    collections: tuple[FakeTimer, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine._runtime import gc as managed

    timer, done = collections
    peak = [10 << 30]
    monkeypatch.setattr(managed, "_peak_rss_bytes", lambda: peak[0])
    with ManagedGC(timer=timer):
        peak[0] += managed.LARGE_RUN_BYTES // 2  # a short run, a little memory
    with ManagedGC(timer=timer):
        assert done == []
        peak[0] += managed.LARGE_RUN_BYTES  # a short run that took a lot
    with ManagedGC(timer=timer):
        assert done == [2]


def test_the_peak_memory_is_read_from_the_platform() -> None:
    from engine._runtime import gc as managed

    before = managed._peak_rss_bytes()
    ballast = bytearray(32 << 20)
    ballast[::4096] = b"x" * len(ballast[::4096])  # resident: every page written
    assert managed._peak_rss_bytes() >= before
    assert managed._peak_rss_bytes() > 32 << 20 or sys.platform == "win32"
    del ballast
