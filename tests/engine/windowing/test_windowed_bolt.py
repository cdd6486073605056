"""Windowed bolts end to end under ``simulate``: acking when tuples leave, anchoring, event
time with watermarks over several streams, late tuples routed or counted, the timeout
refusal, the memory bound; per-tuple and batch input, at parallelism 1 and 3."""

from __future__ import annotations

import collections
from typing import Any

import pytest

from engine import InvalidComponentError, InvalidConfigError, TopologyBuilder, run_topology
from engine.testing import CrashTask, advance_time, simulate
from engine.windowing import Count, Duration, WindowedBolt, WindowedBoltExecutor

from .components import EventSpout, RecordingWindow, Sink

CONF = {"topology.seed": 11}


def build(
    bolt: Any, spouts: dict[str, EventSpout], parallelism: int = 1, late: str | None = None
) -> Any:
    b = TopologyBuilder()
    for name, spout in spouts.items():
        b.set_spout(name, spout)
    d = b.set_bolt("win", bolt, parallelism)
    for name in spouts:
        d.shuffle_grouping(name)
    s = b.set_bolt("sink", Sink()).shuffle_grouping("win")
    if late:
        s.shuffle_grouping("win", late)
    return b.create_topology()


def windows_of(running: Any) -> list[tuple[list[int], list[int], list[int], float, float]]:
    out = []
    for ex in running.task_objects("win").values():
        assert isinstance(ex, WindowedBoltExecutor)
        out += ex.bolt.windows
    return out


@pytest.mark.parametrize("batch", [False, True], ids=["per_tuple", "batch"])
def test_duration_window_acks_each_tuple_once_after_it_left(parallelism: int, batch: bool) -> None:
    events = [(i, i % 3, 0.0) for i in range(60)]
    spout = EventSpout(events, interval_secs=0.25, per_call=2 if batch else 1, batch=batch)
    bolt = RecordingWindow().with_window(Duration(2), Duration(1))
    topology = build(bolt, {"events": spout}, parallelism)

    async def main() -> Any:
        async with run_topology(topology, CONF, trace=True) as running:
            await advance_time(20)
            trace = running.runtime.trace.events
            return running.report(), running.task_objects("events")[1], windows_of(running), trace

    report, spout_task, windows, trace = simulate(main())
    r = report["events"]
    assert (r.messages, r.acked, r.failed, r.lost, r.in_flight) == (60, 60, 0, 0, 0)
    assert sorted(spout_task.acked) == list(range(60))  # each once
    new = [i for w in windows for i in w[1]]
    assert sorted(new) == list(range(60))  # every tuple was new in exactly one window
    expired = [i for w in windows for i in w[2]]
    assert len(expired) == len(set(expired))
    emitted = {
        m: t for t, kind, *_, m, _ in [(e[0], e[1], e[4], e[5]) for e in trace] if kind == "emit"
    }
    acked = {
        m: t for t, kind, *_, m, _ in [(e[0], e[1], e[4], e[5]) for e in trace] if kind == "ack"
    }
    # acked once out of the window: after the last window end that can hold it,
    # the first E >= arrival + length - slide
    assert all(acked[m] >= emitted[m] + 1 for m in range(60))
    for ids, new_ids, _, start, end in windows:
        assert end - start == 2 and set(new_ids) <= set(ids)


@pytest.mark.parametrize("batch", [False, True], ids=["per_tuple", "batch"])
def test_emits_are_anchored_to_every_tuple_of_the_window(batch: bool) -> None:
    """A sink that fails the windows' output fails every tuple of those windows: the
    spout replays them."""

    class FailFirst(Sink):
        def execute(self, tuple: Any) -> None:
            if not getattr(self, "failed_one", False):
                self.failed_one = True
                self.collector.fail(tuple)
                return
            super().execute(tuple)

    events = [(i, 0, 0.0) for i in range(6)]
    bolt = RecordingWindow().with_tumbling_window(Count(3))
    b = TopologyBuilder()
    b.set_spout("events", EventSpout(events, per_call=3 if batch else 1, batch=batch))
    b.set_bolt("win", bolt).shuffle_grouping("events")
    b.set_bolt("sink", FailFirst()).shuffle_grouping("win")

    async def main() -> Any:
        async with run_topology(b.create_topology(), CONF) as running:
            await advance_time(5)
            return running.task_objects("events")[1]

    spout = simulate(main())
    assert sorted(spout.failed) == [0, 1, 2]  # the whole first window's trees failed
    assert sorted(set(spout.acked)) == [0, 1, 2, 3, 4, 5]  # replayed: a window of their own


def test_count_window_holds_the_last_n_and_acks_the_others() -> None:
    events = [(i, 0, 0.0) for i in range(20)]
    bolt = RecordingWindow().with_window(Count(5), Count(2))
    topology = build(bolt, {"events": EventSpout(events)})

    async def main() -> Any:
        async with run_topology(topology, CONF, trace=True) as running:
            await advance_time(5)
            (ex,) = running.task_objects("win").values()
            return running.report(), running.task_objects("events")[1], ex

    report, spout, ex = simulate(main())
    # fired at every 2nd tuple; each firing keeps the newest 5 - 2 = 3 for the next one
    assert sorted(spout.acked) == list(range(17))
    assert [e["id"] for e, _ in ex.manager.events()] == [17, 18, 19]
    assert (report["events"].in_flight, report["events"].lost) == (3, 0)
    assert [w[0] for w in ex.bolt.windows][:3] == [[0, 1], [0, 1, 2, 3], [1, 2, 3, 4, 5]]
    assert [w[2] for w in ex.bolt.windows][:3] == [[], [], [0]]


def late_events() -> list[tuple[int, int, float]]:
    # timestamps 0..9 one per second, then ids 10 and 11 far behind the watermark
    return [(i, 0, float(i)) for i in range(10)] + [(10, 0, 2.0), (11, 0, 9.5)]


@pytest.mark.parametrize("batch", [False, True], ids=["per_tuple", "batch"])
def test_late_tuples_go_to_the_late_stream_and_are_acked(batch: bool) -> None:
    """(In batches of 3, the late tuple arrives beside two on time.)"""
    bolt = (
        RecordingWindow()
        .with_tumbling_window(Duration(2))
        .with_timestamp_field("ts")
        .with_lag(1)
        .with_watermark_interval(0.5)
        .with_late_tuple_stream("late")
    )
    spout = EventSpout(late_events(), interval_secs=1, per_call=3 if batch else 1, batch=batch)
    topology = build(bolt, {"events": spout}, late="late")

    async def main() -> Any:
        async with run_topology(topology, CONF, trace=True) as running:
            await advance_time(20)
            sink = running.task_objects("sink")
            info = running.info().components["win"]
            return running.report(), sink, info, windows_of(running)

    report, sink, info, windows = simulate(main())
    (sink_task,) = sink.values()
    assert sink_task.seen["late"] == [[[10, 0, 2.0], 2.0]]
    assert sum(t.metrics["late_tuples"] for t in info.tasks.values()) == 1
    # 0..8 left with their windows, 10 was acked late; 9 and 11 wait for watermark 10
    assert (report["events"].acked, report["events"].in_flight) == (10, 2)
    seen = sorted(i for w in windows for i in w[1])
    assert 10 not in seen and seen == list(range(9))  # windows up to watermark 8.5 fired
    assert [(w[3], w[4]) for w in windows] == [
        (-2.0, 0.0),
        (0.0, 2.0),
        (2.0, 4.0),
        (4.0, 6.0),
        (6.0, 8.0),
    ]


def test_late_tuples_without_a_stream_are_counted_reported_and_acked() -> None:
    bolt = RecordingWindow().with_tumbling_window(Duration(2)).with_timestamp_field("ts")
    topology = build(bolt, {"events": EventSpout(late_events(), interval_secs=1)})

    async def main() -> Any:
        async with run_topology(topology, CONF) as running:
            await advance_time(20)
            return running.info().components["win"], running.task_objects("events")[1]

    info, spout = simulate(main())
    (task,) = info.tasks.values()
    assert task.metrics["late_tuples"] == 1
    assert 10 in spout.acked and not spout.failed
    (error,) = task.errors
    assert error.error == (
        "windowed bolt 'win': late tuple Tuple([10, 0, 2.0], source='events':'default'@1) "
        "(timestamp 2 <= watermark 9) acked without entering a window; counted in the "
        "'late_tuples' metric (this is reported once); route late tuples with "
        "with_late_tuple_stream(stream) or raise with_lag"
    )


def test_the_watermark_is_the_minimum_over_input_streams() -> None:
    fast = EventSpout([(i, 0, float(i)) for i in range(10)], interval_secs=0.1)
    slow = EventSpout([(100 + i, 0, float(i)) for i in range(10)], interval_secs=1)
    bolt = RecordingWindow().with_tumbling_window(Duration(2)).with_timestamp_field("ts")
    topology = build(bolt, {"fast": fast, "slow": slow})

    async def main() -> Any:
        async with run_topology(topology, CONF) as running:
            await advance_time(3.5)  # fast is at ts 9, slow at ts 3
            early = [w[4] for w in windows_of(running)]
            await advance_time(20)
            return early, windows_of(running)

    early, windows = simulate(main())
    assert early == [0.0, 2.0]
    assert [w[4] for w in windows] == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert sorted(windows[1][0]) == [1, 2, 101, 102]


def test_a_message_timeout_shorter_than_the_window_is_refused() -> None:
    bolt = RecordingWindow().with_window(Duration(20), Duration(15))
    topology = build(bolt, {"events": EventSpout([])})

    async def main() -> None:
        async with run_topology(topology, {"topology.message.timeout.secs": 30}):
            pass

    with pytest.raises(InvalidConfigError) as err:
        simulate(main())
    assert str(err.value) == (
        "windowed bolt 'win': topology.message.timeout.secs = 30 is shorter than the "
        "window's length + slide (35 s): its tuples would time out before they leave the "
        "window; set the timeout above 35 s or shorten the window"
    )
    topology_ok = build(
        RecordingWindow().with_window(Duration(20), Duration(15)), {"events": EventSpout([])}
    )

    async def fine() -> bool:
        async with run_topology(topology_ok, {"topology.message.timeout.secs": 36}):
            return True

    assert simulate(fine())


def test_a_count_slide_counts_the_eviction_tick_in_the_timeout() -> None:
    """A duration window sliding by count evicts by time on ticks every half length: a
    tuple that arrives just after one is held up to 1.5 lengths. A timeout between the
    length and that would replay every such tuple while the window still holds it."""

    def run(timeout: float) -> Any:
        events = [(i, 0, 0.0) for i in range(20)]
        bolt = RecordingWindow().with_window(Duration(4), Count(1000))
        topology = build(bolt, {"events": EventSpout(events, interval_secs=0.5)})

        async def main() -> Any:
            conf = {**CONF, "topology.message.timeout.secs": timeout}
            async with run_topology(topology, conf, trace=True) as running:
                await advance_time(30)
                return running.report()["events"]

        return simulate(main())

    with pytest.raises(InvalidConfigError) as err:
        run(5.5)
    assert str(err.value) == (
        "windowed bolt 'win': topology.message.timeout.secs = 5.5 is shorter than the "
        "window's length + the period of the ticks that evict from it under a count slide, "
        "half its length (6 s): its tuples would time out before they leave the window; set "
        "the timeout above 6 s or shorten the window"
    )
    r = run(6.5)
    assert (r.messages, r.acked, r.failed, r.timed_out, r.lost) == (20, 20, 0, 0, 0)


def test_a_full_duration_window_fails_new_tuples_until_some_leave() -> None:
    events = [(i, 0, 0.0) for i in range(10)]
    bolt = RecordingWindow().with_tumbling_window(Duration(1)).with_max_events_in_memory(3)
    topology = build(bolt, {"events": EventSpout(events, interval_secs=0.05)})

    async def main() -> Any:
        async with run_topology(topology, CONF, trace=True) as running:
            await advance_time(30)
            return running.report(), running.info().components["win"], windows_of(running)

    report, info, windows = simulate(main())
    assert report["events"].acked == 10 and report["events"].lost == 0
    assert report["events"].failed > 0
    (task,) = info.tasks.values()
    assert task.metrics["window_refused_tuples"] == report["events"].failed
    assert all(len(w[0]) <= 3 for w in windows)
    assert "with_max_events_in_memory(3) tuples; new tuples fail" in task.errors[0].error


@pytest.mark.parametrize(
    ("bolt", "message"),
    [
        (
            RecordingWindow(),
            "windowed bolt 'win' (RecordingWindow) has no window: call "
            "with_window(length, slide) or with_tumbling_window(length)",
        ),
        (
            RecordingWindow().with_window(Count(3)).with_timestamp_field("ts"),
            "windowed bolt 'win' (RecordingWindow): event-time windows need Duration length "
            "and slide, got Count(n=3) / Count(n=1)",
        ),
        (
            RecordingWindow().with_window(Duration(3)).with_lag(2),
            "windowed bolt 'win' (RecordingWindow): with_lag needs event time; add "
            "with_timestamp_field(name) or with_timestamp_extractor(fn)",
        ),
        (
            RecordingWindow().with_window(Count(10)).with_max_events_in_memory(5),
            "windowed bolt 'win' (RecordingWindow): the window holds 10 tuples but "
            "with_max_events_in_memory(5) allows fewer; raise the limit or shorten the window",
        ),
    ],
)
def test_misdeclared_windows_are_refused_at_create_topology(bolt: Any, message: str) -> None:
    with pytest.raises(InvalidComponentError) as err:
        build(bolt, {"events": EventSpout([])})
    assert str(err.value) == message


def test_builder_errors_name_the_bolt_class() -> None:
    with pytest.raises(InvalidComponentError) as err:
        RecordingWindow().with_window(Count(2), Count(3))
    assert str(err.value) == (
        "windowed bolt RecordingWindow: slide Count(n=3) is longer than the window "
        "Count(n=2): tuples between two windows would never be seen; make the slide at "
        "most the length"
    )

    class NoExecute(WindowedBolt):
        def declare_output_fields(self, declarer: Any) -> None:
            declarer.declare(["size", "end"])

    with pytest.raises(InvalidComponentError, match=r"does not implement execute\(window\)"):
        build(NoExecute().with_window(Count(2)), {"events": EventSpout([])})


def test_an_error_in_execute_is_reported_and_the_tuples_still_leave() -> None:
    class Broken(RecordingWindow):
        def execute(self, window: Any) -> None:
            raise RuntimeError("boom")

    events = [(i, 0, 0.0) for i in range(6)]
    topology = build(Broken().with_tumbling_window(Count(2)), {"events": EventSpout(events)})

    async def main() -> Any:
        async with run_topology(topology, CONF, trace=True) as running:
            await advance_time(5)
            return running.report(), running.info().components["win"]

    report, info = simulate(main())
    assert report["events"].acked == 6 and report["events"].failed == 0  # left, acked
    assert collections.Counter(e.error for t in info.tasks.values() for e in t.errors) == {
        "RuntimeError('boom')": 3
    }


def test_a_crashed_window_task_loses_nothing(parallelism: int) -> None:
    """The window lives in memory: a crash loses what the task held; those trees time out
    and their spouts replay them into the restarted task's windows."""
    events = [(i, i % 3, 0.0) for i in range(80)]
    bolt = RecordingWindow().with_window(Duration(2), Duration(1))
    topology = build(bolt, {"events": EventSpout(events, interval_secs=0.25)}, parallelism)
    faults = [CrashTask(component="win", at=5.1)]
    conf = {**CONF, "topology.message.timeout.secs": 5}

    async def main() -> Any:
        async with run_topology(topology, conf, trace=True, faults=faults) as running:
            await advance_time(60)
            return running.report(), next(iter(running.task_objects("events").values()))

    report, spout = simulate(main())
    r = report["events"]
    assert (r.messages, r.lost, r.in_flight) == (80, 0, 0)
    assert r.timed_out > 0 and r.replayed == r.failed  # what the crash held came back
    assert sorted(set(spout.acked)) == list(range(80))


def double_ts(t: Any) -> float:
    return 2 * t["ts"]


def test_a_timestamp_extractor_gives_event_time() -> None:
    events = [(i, 0, float(i)) for i in range(10)]  # event time 0, 2, ..., 18
    bolt = RecordingWindow().with_tumbling_window(Duration(4)).with_timestamp_extractor(double_ts)
    topology = build(bolt, {"events": EventSpout(events, interval_secs=1)})

    async def main() -> Any:
        async with run_topology(topology, CONF) as running:
            await advance_time(20)
            return windows_of(running)

    windows = simulate(main())
    assert [(w[0], w[3], w[4]) for w in windows] == [
        ([0], -4.0, 0.0),
        ([1, 2], 0.0, 4.0),
        ([3, 4], 4.0, 8.0),
        ([5, 6], 8.0, 12.0),
        ([7, 8], 12.0, 16.0),
    ]


def test_a_count_window_as_long_as_the_memory_bound_takes_every_tuple() -> None:
    """Only a duration window fills up: a count window of exactly
    ``with_max_events_in_memory(n)`` tuples lets one go for each that arrives."""
    events = [(i, 0, 0.0) for i in range(12)]
    bolt = RecordingWindow().with_window(Count(3), Duration(1)).with_max_events_in_memory(3)
    topology = build(bolt, {"events": EventSpout(events, interval_secs=0.1)})

    async def main() -> Any:
        async with run_topology(topology, CONF, trace=True) as running:
            await advance_time(10)
            return running.report(), running.info().components["win"], windows_of(running)

    report, info, windows = simulate(main())
    (task,) = info.tasks.values()
    assert (report["events"].acked, report["events"].failed) == (9, 0)  # 3 still held
    assert task.metrics["window_refused_tuples"] == 0 and not task.errors
    assert windows[-1][0] == [9, 10, 11]


class ColumnWindow(RecordingWindow):
    """Records each window's ids as tuples and as columns (by name and by index)."""

    def execute(self, window: Any) -> None:
        super().execute(window)
        self.columns = getattr(self, "columns", [])
        self.columns.append(
            (
                list(window.column("id")),
                list(window.new_column(0)),
                list(window.expired_column("id")),
            )
        )


class ColumnsOnly(RecordingWindow):
    """Reads columns only, and emits on a stream nobody subscribes to."""

    def execute(self, window: Any) -> None:
        self.windows.append((list(window.column("id")), [], [], 0.0, 0.0))
        self.collector.emit([len(window), window.end_timestamp])


@pytest.mark.parametrize("batch", [False, True], ids=["per_tuple", "batch"])
def test_columns_are_the_windows_tuples_field_by_field(batch: bool) -> None:
    events = [(i, i % 3, 0.0) for i in range(40)]
    spout = EventSpout(events, interval_secs=0.25, per_call=3 if batch else 1, batch=batch)
    topology = build(ColumnWindow().with_window(Duration(2), Duration(1)), {"events": spout})

    async def main() -> Any:
        async with run_topology(topology, CONF) as running:
            await advance_time(20)
            (ex,) = running.task_objects("win").values()
            return ex.bolt

    bolt = simulate(main())
    assert [(w[0], w[1], w[2]) for w in bolt.windows] == bolt.columns
    assert sorted(i for w in bolt.columns for i in w[1]) == list(range(40))


def test_a_window_read_as_columns_makes_no_tuple_per_row() -> None:
    """Batches in, columns read, emits that go nowhere: no ``Tuple`` views are made, and
    what left the window was acked by the row arrays."""
    events = [(i, 0, 0.0) for i in range(30)]
    b = TopologyBuilder()
    b.set_spout("events", EventSpout(events, interval_secs=0.25, per_call=5, batch=True))
    b.set_bolt("win", ColumnsOnly().with_window(Count(10), Count(5))).shuffle_grouping("events")

    async def main() -> Any:
        async with run_topology(b.create_topology(), CONF, trace=True) as running:
            await advance_time(5)
            (ex,) = running.task_objects("win").values()
            return running.report(), ex

    report, ex = simulate(main())
    assert [w[0] for w in ex.bolt.windows][:3] == [
        [0, 1, 2, 3, 4],
        list(range(10)),
        list(range(5, 15)),
    ]
    assert (report["events"].acked, report["events"].failed) == (25, 0)  # 5 kept for the next
    assert all(seg.items is None for seg in ex.manager.rows.segments())


def test_rows_of_a_batch_without_a_timestamp_fail_alone() -> None:
    events: list[Any] = [(i, 0, float(i)) for i in range(8)]
    events[5] = (5, 0, "five")
    spout = EventSpout(events, interval_secs=1, per_call=4, batch=True)
    bolt = RecordingWindow().with_tumbling_window(Duration(2)).with_timestamp_field("ts")
    topology = build(bolt, {"events": spout})

    async def main() -> Any:
        async with run_topology(topology, CONF) as running:
            await advance_time(3.5)
            return (
                running.info().components["win"],
                running.task_objects("events")[1],
                windows_of(running),
            )

    info, spout_task, windows = simulate(main())
    assert set(spout_task.failed) == {5}
    assert sorted(i for w in windows for i in w[1]) == [0, 1, 2, 3, 4, 6]  # up to watermark 7
    (task,) = info.tasks.values()
    assert task.errors[0].error == (
        "TypeError(\"windowed bolt 'win': the timestamp of Tuple([5, 0, 'five'], "
        "source='events':'default'@1) is 'five'; timestamps are numbers (seconds)\")"
    )


@pytest.mark.parametrize("batch", [False, True], ids=["per_tuple", "batch"])
def test_tuples_read_anchored_to_and_kept_are_acked_once_when_they_leave(batch: bool) -> None:
    """Rows the bolt read as ``Tuple`` views and anchored emits to leave in one array
    operation: their trees wait for the anchored children (a child failed downstream
    fails its row's tree, which is replayed), and a view kept past its window counts as
    acked (acking it again is refused, not sent twice)."""

    class Keeper(RecordingWindow):
        kept: Any = None

        def execute(self, window: Any) -> None:
            super().execute(window)
            for t in window.get_new():  # a second emit anchored to each new tuple
                self.collector.emit([1, t["id"]], anchors=t)
            if self.kept is None:
                self.kept = window.get()[0]
            elif len(self.windows) == 4:
                self.collector.ack(self.kept)  # it left with the first window

    class FailFour(Sink):
        def execute(self, tuple: Any) -> None:
            if list(tuple.values) == [1, 4] and not getattr(self, "failed_one", False):
                self.failed_one = True
                self.collector.fail(tuple)
                return
            super().execute(tuple)

    events = [(i, 0, 0.0) for i in range(11)]  # (and 4 replayed: 4 windows)
    # (one input per call: the first window's tuples are acked when that call ends)
    spout = EventSpout(events, interval_secs=0.1, per_call=3 if batch else 1, batch=batch)
    b = TopologyBuilder()
    b.set_spout("events", spout)
    b.set_bolt("win", Keeper().with_tumbling_window(Count(3))).shuffle_grouping("events")
    b.set_bolt("sink", FailFour()).shuffle_grouping("win")

    async def main() -> Any:
        async with run_topology(b.create_topology(), CONF, trace=True) as running:
            await advance_time(5)
            info = running.info().components["win"]
            return running.report(), info, windows_of(running), running.task_objects("events")

    report, info, windows, spouts = simulate(main())
    r = report["events"]
    assert (r.messages, r.acked, r.failed, r.replayed, r.lost, r.in_flight) == (11, 11, 1, 1, 0, 0)
    assert spouts[1].failed == [4]
    assert sorted(spouts[1].acked) == list(range(11))
    assert [w[0] for w in windows[:3]] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    (error,) = [e.error for t in info.tasks.values() for e in t.errors]
    assert error == (
        "TupleStateError(\"component 'win' called ack on Tuple([0, 0, 0.0], "
        "source='events':'default'@1), which was already acked or failed; every tuple is "
        'acked or failed exactly once")'
    )


@pytest.mark.parametrize("batch", [False, True], ids=["per_tuple", "batch"])
def test_a_tuple_read_only_after_it_left_cannot_be_acked_again(batch: bool) -> None:
    """The bolt reads its windows as columns and the tuples that left as ``Tuple``s, one
    firing after they left and were acked (a batch's rows by the row arrays, before any
    view of them was made): acking one again is refused, whatever the input, instead of
    reaching the acker a second time."""

    class AcksExpired(RecordingWindow):
        def execute(self, window: Any) -> None:
            self.windows.append((list(window.column("id")), [], [], 0.0, 0.0))
            self.expired = getattr(self, "expired", [])
            self.expired.append(list(window.expired_column("id")))
            for t in window.get_expired():
                self.collector.ack(t)  # (wrong: they were acked when they left)

    events = [(i, 0, 0.0) for i in range(12)]
    spout = EventSpout(events, interval_secs=0.25, per_call=2 if batch else 1, batch=batch)
    topology = build(AcksExpired().with_window(Duration(1), Duration(0.5)), {"events": spout})

    async def main() -> Any:
        async with run_topology(topology, CONF, trace=True) as running:
            await advance_time(10)
            (ex,) = running.task_objects("win").values()
            return running.report(), running.info().components["win"], ex.bolt

    report, info, bolt = simulate(main())
    r = report["events"]
    assert (r.messages, r.acked, r.failed, r.lost, r.in_flight) == (12, 12, 0, 0, 0)
    firsts = [ids[0] for ids in bolt.expired if ids]  # each window's loop stops at its first
    assert sorted(i for ids in bolt.expired for i in ids) == list(range(12))
    assert [e.error for t in info.tasks.values() for e in t.errors] == [
        f"TupleStateError(\"component 'win' called ack on Tuple([{i}, 0, 0.0], "
        f"source='events':'default'@1), which was already acked or failed; every tuple is "
        f'acked or failed exactly once")'
        for i in firsts
    ]


@pytest.mark.parametrize("batch", [False, True], ids=["per_tuple", "batch"])
def test_a_tuple_the_bolt_failed_leaves_the_window_anchors_of_later_windows(batch: bool) -> None:
    """The bolt fails a bad tuple itself (its spout replays it) while the tuple stays in
    the next windows: their emits anchor to the window's other tuples, instead of being
    refused for anchoring to a failed tuple (which stopped execute(window) there)."""

    class FailsTwoOnce(RecordingWindow):
        failed_two = False

        def execute(self, window: Any) -> None:
            for t in window.get_new():
                if t["id"] == 2 and not self.failed_two:
                    self.failed_two = True
                    self.collector.fail(t)
            super().execute(window)

    events = [(i, 0, 0.0) for i in range(9)]  # and 2 again: 10 tuples, 5 windows
    spout = EventSpout(events, interval_secs=0.1, per_call=2 if batch else 1, batch=batch)
    topology = build(FailsTwoOnce().with_window(Count(4), Count(2)), {"events": spout})

    async def main() -> Any:
        async with run_topology(topology, CONF, trace=True) as running:
            await advance_time(5)
            info = running.info().components["win"]
            sink = running.task_objects("sink")
            return running.report(), info, windows_of(running), sink, running.task_objects("events")

    report, info, windows, sink, spouts = simulate(main())
    assert [e.error for t in info.tasks.values() for e in t.errors] == []
    assert [w[0] for w in windows] == [
        [0, 1],
        [0, 1, 2, 3],
        [2, 3, 4, 5],
        [4, 5, 6, 7],
        [6, 7, 8, 2],
    ]
    (sink_task,) = sink.values()
    assert [size for size, _ in sink_task.seen["default"]] == [2, 4, 4, 4, 4]  # every window
    assert spouts[1].failed == [2]
    r = report["events"]
    assert (r.messages, r.acked, r.failed, r.replayed, r.lost) == (9, 7, 1, 1, 0)


def test_a_segment_pickled_before_completed_existed_still_makes_its_views() -> None:
    # A Spark runner keeps the window pickled in Spark state: a segment saved by a version
    # without the ``completed`` slot has none after unpickling.
    import pickle

    from engine import Fields, TupleBatch
    from engine.runners import Source
    from engine.windowing._rows import Segment

    seg = Segment(0, TupleBatch(Source("s", "default", 1, Fields("n")), [[1, 2, 3]]), None)
    del seg.completed  # unset, as in a segment pickled by the older version
    old = pickle.loads(pickle.dumps(seg))
    assert not hasattr(old, "completed")
    assert [t[0] for t in old.tuples()] == [1, 2, 3]
    old.complete(slice(0, 2))
    assert old.completed is not None and old.completed.tolist() == [True, True, False]
