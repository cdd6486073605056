"""``WindowManager`` against the naive model (``naive.py``), with Hypothesis: random
timestamps, watermarks (lags show up as watermarks trailing the timestamps), lengths and
slides, count and duration, tumbling and sliding, processing and event time; events added
one by one (``add``) and in batches (``add_ids``, the arrays kernel the windowed executor
drives), held as Python objects and as the columns of ``TupleBatch`` segments."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Fields
from engine._columnar.batch import TupleBatch
from engine._model.tuple import Source
from engine.windowing import Count, Duration, TupleWindow, WindowManager
from engine.windowing._rows import RowTable

from .naive import Fired, NaiveWindows

S = 10**9


@st.composite
def lengths_and_slides(draw: st.DrawFn, event_time: bool) -> tuple[Count | Duration, ...]:
    kinds = ("dd",) if event_time else ("cc", "cd", "dc", "dd")
    kind = draw(st.sampled_from(kinds))
    if kind[0] == "c":
        length: Count | Duration = Count(draw(st.integers(1, 6)))
    else:
        length = Duration(draw(st.integers(1, 8)) / 2)
    if kind[1] == "c":
        top = length.n if isinstance(length, Count) else 5
        slide: Count | Duration = Count(draw(st.integers(1, top)))
    else:
        top = int(length.seconds * 2) if isinstance(length, Duration) else 8
        slide = Duration(draw(st.integers(1, top)) / 2)
    if draw(st.booleans()):  # tumbling
        slide = length if type(length) is type(slide) else slide
    return length, slide


@st.composite
def processing_ops(draw: st.DrawFn) -> list[tuple[str, int]]:
    ops, now = [], 0
    for _ in range(draw(st.integers(0, 60))):
        now += draw(st.sampled_from([0, 0, 1, 2, 5, 10, 37])) * S // 10
        ops.append((draw(st.sampled_from(["add", "add", "add", "advance"])), now))
    return ops


@st.composite
def event_ops(draw: st.DrawFn) -> list[tuple[str, int]]:
    ops = []
    for _ in range(draw(st.integers(0, 60))):
        t = draw(st.integers(0, 120)) * S // 4
        ops.append((draw(st.sampled_from(["add", "add", "add", "advance"])), t))
    return ops


def as_fired(w: TupleWindow) -> Fired:
    return Fired(
        w.get(),
        w.get_new(),
        w.get_expired(),
        round(w.start_timestamp * 1e9),
        round(w.end_timestamp * 1e9),
    )


def check(
    length: Count | Duration, slide: Count | Duration, event_time: bool, ops: list[tuple[str, int]]
) -> None:
    origin = 0 if event_time else 3 * S // 10
    m = WindowManager(length, slide, event_time=event_time, origin_ns=origin)
    naive = NaiveWindows(length, slide, event_time, origin)
    ids = 0
    for op, t in ops:
        if op == "add":
            expected = naive.add(ids, t)
            if m.is_late(t):
                assert naive.late[-1:] == [ids]
                got: list[Fired] = []
            else:
                got = [as_fired(w) for w in m.add(ids, t)]
            ids += 1
        else:
            expected = naive.advance(t)
            got = [as_fired(w) for w in m.advance(t)]
        assert got == expected, (op, t)
        assert m.take_evicted() == naive.take_evicted()
        assert [e for e, _ in m.events()] == [e.id for e in naive.present()]


@st.composite
def batched(draw: st.DrawFn, ops: list[tuple[str, int]], event_time: bool) -> list[Any]:
    """``ops`` with runs of adds grouped into batches: ``("batch", [ts, ...])``; in
    processing time a batch's events arrive at one instant (the last one's)."""
    out: list[Any] = []
    i = 0
    while i < len(ops):
        op, t = ops[i]
        if op != "add":
            out.append((op, t))
            i += 1
            continue
        k = draw(st.integers(1, 12))
        run = [ts for o, ts in ops[i : i + k] if o == "add"]
        run = run[: next((j for j, (o, _) in enumerate(ops[i : i + k]) if o != "add"), k)]
        i += len(run)
        out.append(("batch", run if event_time else [run[-1]] * len(run)))
    return out


ID_SOURCE = Source("events", "default", 1, Fields("id"))


def check_batches(
    length: Count | Duration,
    slide: Count | Duration,
    event_time: bool,
    ops: list[Any],
    columns: bool,
) -> None:
    """Batches through ``add_ids`` against the model fed one event at a time. With
    ``columns`` the events are rows of ``TupleBatch`` segments, read back as columns (and,
    every other window, as ``Tuple`` views)."""
    origin = 0 if event_time else 3 * S // 10
    table = RowTable()
    m = WindowManager(length, slide, event_time=event_time, origin_ns=origin, rows=table)
    naive = NaiveWindows(length, slide, event_time, origin)
    next_id = 0
    fired = 0

    def seen(w: TupleWindow) -> Fired:
        nonlocal fired
        fired += 1
        if not columns:
            return as_fired(w)
        if fired % 2:
            parts = [list(w.column("id")), list(w.new_column(0)), list(w.expired_column("id"))]
        else:
            parts = [[t["id"] for t in x] for x in (w.get(), w.get_new(), w.get_expired())]
        return Fired(*parts, round(w.start_timestamp * 1e9), round(w.end_timestamp * 1e9))

    for op, arg in ops:
        if op == "batch":
            batch_ids = list(range(next_id, next_id + len(arg)))
            next_id += len(arg)
            expected = [f for i, t in zip(batch_ids, arg, strict=True) for f in naive.add(i, t)]
            keep = [j for j, t in enumerate(arg) if not m.is_late(t)]
            if columns:
                seg = table.add_batch(TupleBatch(ID_SOURCE, [batch_ids]))
                first = seg.base
            else:
                seg, first = table.add_items(batch_ids)
            seg.live += len(keep)
            ids = np.array([first + j for j in keep], np.int64)
            stamps: Any = np.array([arg[j] for j in keep], np.int64)
            if not event_time and len(set(arg)) == 1:
                stamps = arg[0]  # one arrival instant for the whole batch
            got = [seen(w) for w in m.add_ids(ids, stamps)]
        else:
            expected = naive.advance(arg)
            got = [seen(w) for w in m.advance(arg)]
        assert got == expected, (op, arg)
        gone = m.take_evicted_rows()
        evicted = list(gone.column("id")) if columns else gone.items()
        table.release(gone)
        assert evicted == naive.take_evicted()
        held = m.held()
        assert (list(held.column("id")) if columns else held.items()) == [
            e.id for e in naive.present()
        ]


@settings(max_examples=300, deadline=None)
@given(data=st.data(), columns=st.booleans())
def test_batches_match_the_model_fed_one_event_at_a_time(
    data: st.DataObject, columns: bool
) -> None:
    event_time = data.draw(st.booleans())
    length, slide = data.draw(lengths_and_slides(event_time=event_time))
    ops = data.draw(event_ops() if event_time else processing_ops())
    check_batches(length, slide, event_time, data.draw(batched(ops, event_time)), columns)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_processing_time_windows_match_the_model(data: st.DataObject) -> None:
    length, slide = data.draw(lengths_and_slides(event_time=False))
    check(length, slide, False, data.draw(processing_ops()))


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_event_time_windows_match_the_model(data: st.DataObject) -> None:
    length, slide = data.draw(lengths_and_slides(event_time=True))
    check(length, slide, True, data.draw(event_ops()))


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_every_event_is_seen_once_new_and_leaves_once(data: st.DataObject) -> None:
    """Each non-late event is in ``get_new()`` of exactly one window (slide <= length) and,
    once it left, in ``get_expired()`` of at most one and ``take_evicted()`` exactly once."""
    event_time = data.draw(st.booleans())
    length, slide = data.draw(lengths_and_slides(event_time=event_time))
    ops = data.draw(event_ops() if event_time else processing_ops())
    m = WindowManager(length, slide, event_time=event_time)
    new: list[int] = []
    expired: list[int] = []
    evicted: list[int] = []
    added = []
    for i, (op, t) in enumerate(ops):
        if op == "add":
            if m.is_late(t):
                continue
            added.append(i)
            windows = m.add(i, t)
        else:
            windows = m.advance(t)
        for w in windows:
            new += w.get_new()
            expired += w.get_expired()
            assert set(w.get_new()) <= set(w.get())
            assert not set(w.get_expired()) & set(w.get())
        evicted += m.take_evicted()
    assert len(new) == len(set(new)) and len(evicted) == len(set(evicted))
    assert set(expired) <= set(evicted)
    held = {e for e, _ in m.events()}
    assert set(evicted) | held == set(added) and not set(evicted) & held
    if type(length) is type(slide):
        # an event left only after a window showed it (with a count length and a duration
        # slide, or the reverse, an event may leave before the next firing, as in Storm)
        assert set(evicted) <= set(new)


def test_duration_window_bounds_and_membership() -> None:
    m = WindowManager(Duration(10), Duration(5), event_time=True)
    for ts in (1, 3, 7, 12):
        m.add(ts, ts * S)
    w1, w2 = m.advance(12 * S)
    assert (w1.get(), w1.start_timestamp, w1.end_timestamp) == ([1, 3], -5.0, 5.0)
    assert (w2.get(), w2.get_new(), w2.get_expired()) == ([1, 3, 7], [7], [])
    assert m.is_late(12 * S) and not m.is_late(12 * S + 1)
    assert m.take_evicted() == [1, 3]  # window 15 = (5, 15] cannot hold them: acked now
    (w3,) = m.advance(16 * S)
    assert (w3.get(), w3.get_new(), w3.get_expired()) == ([7, 12], [12], [1, 3])
    assert m.take_evicted() == [7]


def test_time_is_needed_while_events_are_held_or_a_firing_owes_those_that_left() -> None:
    m = WindowManager(Duration(2), Duration(1))
    assert not m.needs_time
    m.add("a", S // 2)
    assert m.needs_time
    assert [w.get() for w in m.advance(2 * S)] == [["a"], ["a"]]  # and "a" left
    assert len(m) == 0 and m.needs_time
    (w,) = m.advance(3 * S)
    assert (w.get(), w.get_expired(), m.needs_time) == ([], ["a"], False)
    counted = WindowManager(Duration(2), Count(2))  # a count slide fires on events only
    counted.add("a", 0)
    assert counted.needs_time
    assert counted.advance(3 * S) == [] and not counted.needs_time


def test_event_time_needs_durations() -> None:
    with pytest.raises(ValueError, match="event-time windows need a Duration length"):
        WindowManager(Count(3), Duration(1), event_time=True)


def test_saved_events_restore_the_window() -> None:
    m = WindowManager(Count(3), Count(1))
    for i in range(5):
        m.add(i, i)
    again = WindowManager(Count(3), Count(1))
    again.restore(m.events())
    assert [e for e, _ in again.events()] == [3, 4]  # the next window is 3, 4 and the next
    assert [w.get() for w in again.add(5, 5)] == [[3, 4, 5]]
    assert again.take_evicted() == [3]


def test_columns_over_several_batches_keep_their_kind() -> None:
    """A run over several batches reads as one column: a list when any batch carries a
    list column (in row order, whatever the mix), a numpy array when all carry numpy."""
    table = RowTable()
    table.add_batch(TupleBatch(ID_SOURCE, [[0, 1, 2]]))
    table.add_batch(TupleBatch(ID_SOURCE, [np.array([3, 4, 5])]))
    table.add_batch(TupleBatch(ID_SOURCE, [[6, 7]]))
    table.add_batch(TupleBatch(ID_SOURCE, [np.array([8, 9])]))
    mixed = table.span(1, 7).column("id")
    assert type(mixed) is list and mixed == [1, 2, 3, 4, 5, 6]
    numeric = table.span(4, 10)
    numeric = type(numeric)([numeric.pieces[0], numeric.pieces[2]], 4)  # rows 4-5 and 8-9
    col = numeric.column(0)
    assert isinstance(col, np.ndarray) and col.tolist() == [4, 5, 8, 9]
    assert table.span(0, 8).column("id", skip=5) == [5, 6, 7]


def test_a_pickled_manager_holds_only_its_events_and_goes_on_as_the_original() -> None:
    import pickle

    m = WindowManager(Count(5), Count(5))
    for i in range(3000):  # the arrays grow far beyond the 5 events a window holds
        m.add(i, i)
    m.take_evicted()
    m.add(3000, 3000)
    copy = pickle.loads(pickle.dumps(m))
    assert copy._ids.shape[0] == len(copy) == len(m) == 1
    assert m._ids.shape[0] > 1000
    for i in range(3001, 3020):
        fired, fired_copy = m.add(i, i), copy.add(i, i)
        assert [w.get() for w in fired] == [w.get() for w in fired_copy]
        assert m.take_evicted() == copy.take_evicted()
