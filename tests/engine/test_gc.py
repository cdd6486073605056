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
    monkeypatch.setattr(ManagedGC, "_left", [])  # whatever ran before
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


class _Held:
    """Something a topology holds (an executor)."""


def test_after_a_long_run_whose_objects_are_gone_the_next_start_does_not_collect(
    collections: tuple[FakeTimer, list[int]],
) -> None:
    # The caller's own collection (or refcounting) freed what the long run held: a second
    # full pass over the heap would find nothing of it.
    from engine._runtime.gc import LONG_RUN_SECS

    timer, done = collections
    held = [_Held(), _Held()]
    with ManagedGC(timer=timer, held=lambda: held):
        timer.now += LONG_RUN_SECS
    held.pop()
    with ManagedGC(timer=timer):
        assert done == [2]  # one of them is still there: collect
    held.clear()
    with ManagedGC(timer=timer):
        assert done == [2]  # (a short run)
        timer.now += LONG_RUN_SECS
    with ManagedGC(timer=timer):
        assert done == [2, 2]  # an unknown holding (no ``held``): collect
    with ManagedGC(timer=timer, held=lambda: [_Held()]):
        timer.now += LONG_RUN_SECS
    with ManagedGC(timer=timer):
        assert done == [2, 2]  # all it held is gone: no collection


def test_while_topologies_keep_running_what_stopped_ones_held_is_not_kept_watching(
    collections: tuple[FakeTimer, list[int]],
) -> None:
    # A service that always runs one topology never starts a first one: the weak
    # references of the long runs stopped meanwhile must not pile up.
    from engine._runtime.gc import LONG_RUN_SECS

    timer, _ = collections
    with ManagedGC(timer=timer):
        for _ in range(50):
            with ManagedGC(timer=timer, held=lambda: [_Held(), _Held()]):
                timer.now += LONG_RUN_SECS
        assert len(ManagedGC._left) == 2  # the last run's (they die with it too)


def test_a_stopped_topology_left_as_garbage_is_collected_before_the_next_start() -> None:
    # A dropped runtime is cyclic garbage: alive to a weak reference until a collection,
    # so the next start collects it rather than freezing it.
    import weakref

    from engine._runtime import gc as managed

    class Cyclic:
        def __init__(self) -> None:
            self.me = self

    held = [Cyclic()]
    ref = weakref.ref(held[0])
    saved = managed.ManagedGC._left
    managed.ManagedGC._left = []
    enabled = gc.isenabled()
    gc.disable()  # no automatic collection between the drop and the start
    try:
        with ManagedGC(timer=lambda: 0.0, held=lambda: held):
            pass
        assert managed.ManagedGC._left == []  # a short run: nothing to watch
        timer = FakeTimer()
        with ManagedGC(timer=timer, held=lambda: held):
            timer.now += managed.LONG_RUN_SECS
        held.clear()
        assert ref() is not None  # garbage, not yet collected
        with ManagedGC():
            assert ref() is None  # collected before the freeze
    finally:
        managed.ManagedGC._left = saved
        if enabled:
            gc.enable()


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


def test_a_topology_freed_by_the_callers_collection_costs_the_next_start_no_collection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A runtime names what it holds: once the caller's own collection freed a stopped
    # topology, the next one's start does not walk the heap again; while the stopped one is
    # still garbage, it does (and so frees it before the freeze).
    from engine import TopologyBuilder, run_topology
    from engine._runtime import gc as managed

    from .topologies import CollectBolt, ListSpout, run

    monkeypatch.setattr(managed, "LONG_RUN_SECS", 0.0)  # every run counts as long
    monkeypatch.setattr(managed.ManagedGC, "_left", [])
    starts: list[int] = []
    real_collect = gc.collect

    class Counting:
        def __getattr__(self, name: str) -> object:
            return getattr(gc, name)

        def collect(self, generation: int = 2) -> int:
            if generation == 2 and managed.ManagedGC._users == 0:
                starts.append(generation)  # a start's collection, before its freeze
            return real_collect(generation)

    monkeypatch.setattr(managed, "gc", Counting())

    def one_run() -> None:
        b = TopologyBuilder()
        b.set_spout("items", ListSpout([[i, "s"] for i in range(20)]))
        b.set_bolt("collect", CollectBolt()).shuffle_grouping("items")

        async def go() -> None:
            async with run_topology(b.create_topology(), {}) as running:
                await running.wait_until_complete(timeout=30)

        run(go())

    enabled = gc.isenabled()
    gc.disable()  # no automatic collection between two runs
    try:
        one_run()
        assert starts == []  # nothing ran before
        one_run()
        assert starts == [2]  # the first one's runtime is garbage until collected: collect
        real_collect()  # the caller's own collection frees the second one
        one_run()
        assert starts == [2]
    finally:
        if enabled:
            gc.enable()


def test_a_stop_cut_short_by_a_cancellation_gives_the_collector_back() -> None:
    # Found in review: a cancellation reaching the runtime while it awaited an async
    # cleanup (the caller of kill() cancelled, a timeout around the run) skipped the end of
    # its stop, and with it the managed GC's exit: the process's collector stayed off and
    # its objects frozen for good, every later topology included.
    import asyncio

    from engine import TopologyBuilder, run_topology
    from engine.testing import advance_time, simulate

    from .topologies import CollectBolt, ListSpout

    class SlowCleanup(CollectBolt):
        async def cleanup(self) -> None:
            await asyncio.sleep(1)

    builder = TopologyBuilder()
    builder.set_spout("items", ListSpout([[i, "s"] for i in range(10)]))
    builder.set_bolt("collect", SlowCleanup()).shuffle_grouping("items")
    topology = builder.create_topology()

    async def main() -> None:
        async def run_for_a_second() -> None:
            async with run_topology(topology, {"topology.python.gc.managed": True}):
                await advance_time(1)

        block = asyncio.ensure_future(run_for_a_second())
        await asyncio.sleep(1.5)  # in the bolt's cleanup
        block.cancel()
        await asyncio.wait([block])
        assert block.cancelled()

    enabled = gc.isenabled()
    gc.enable()
    try:
        simulate(main())
        assert gc.isenabled()
        assert gc.get_freeze_count() == 0
        assert ManagedGC._users == 0
    finally:
        ManagedGC._users = 0
        gc.unfreeze()
        if not enabled:
            gc.disable()
