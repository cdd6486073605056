"""``Inbox``: the bounded data lane, the control lane served first, backpressure, close,
and the hand-off of a wake-up when a woken producer is cancelled. Every test runs on
virtual time (``simulate``) and orders events explicitly."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from engine import Fields
from engine._columnar.batch import TupleBatch
from engine._execution.channel import Inbox, InboxStatistics
from engine._model.tuple import Source
from engine.testing import simulate


async def settle() -> None:
    """Let every ready callback and coroutine run (no time passes)."""
    for _ in range(10):
        await asyncio.sleep(0)


def test_capacity_is_checked() -> None:
    with pytest.raises(ValueError) as info:
        Inbox(0)
    assert str(info.value) == "capacity must be >= 1, got 0"


def test_put_nowait_counts_tuples_and_refuses_what_does_not_fit() -> None:
    inbox = Inbox(4)
    assert inbox.put_nowait(1, ["a", "b", "c"], stamp=10)
    assert not inbox.put_nowait(1, ["d", "e"])  # 3 + 2 > 4: nothing queued
    assert len(inbox) == 3 and len(inbox.data) == 1
    assert inbox.put_nowait(2, ["d"])
    assert len(inbox) == 4 and inbox.max_size == 4
    assert inbox.take_data() == (1, ["a", "b", "c"], 10)
    assert inbox.take_data() == (2, ["d"], 0)
    assert inbox.take_data() is None
    assert len(inbox) == 0 and inbox.max_size == 4


def test_control_does_not_count_against_the_bound() -> None:
    inbox = Inbox(1)
    assert inbox.put_nowait(1, ["x"])
    for i in range(100):
        inbox.put_control(("ack", i))
    assert len(inbox) == 1 and len(inbox.control) == 100
    assert inbox.statistics() == InboxStatistics(
        capacity=1,
        queued_tuples=1,
        queued_batches=1,
        queued_control=100,
        max_queued_tuples=1,
        blocked_puts=0,
        tasks_waiting_get=0,
        tasks_waiting_put=0,
    )


def test_a_full_lane_makes_the_producer_wait_and_the_bound_always_holds() -> None:
    async def main() -> None:
        inbox = Inbox(3)
        sizes: list[int] = []
        producer = asyncio.ensure_future(inbox.put(1, list(range(7)), stamp=5))  # split 3+3+1
        await settle()
        assert len(inbox) == 3 and not producer.done()
        assert inbox.statistics().tasks_waiting_put == 1 and inbox.blocked_puts == 1
        got: list[Any] = []
        while not producer.done() or inbox.data:
            item = inbox.take_data()
            if item is not None:
                got.extend(item[1])
                assert item[2] == 5
            await settle()
            sizes.append(len(inbox))
        assert got == list(range(7))
        assert max(sizes) <= 3 and inbox.max_size == 3

    simulate(main())


def test_a_batch_longer_than_the_capacity_is_split_into_batches_of_its_rows() -> None:
    # A TupleBatch has rows, not list slices: the split used to raise TypeError.
    async def main() -> None:
        inbox = Inbox(2)
        source = Source("split", "default", 4, Fields("word"))
        batch = TupleBatch(
            source, [list("abcde")], np.arange(1, 6, dtype=np.uint64), np.ones(5, np.uint64)
        )
        producer = asyncio.ensure_future(inbox.put(1, batch, stamp=5))  # split 2+2+1
        parts: list[TupleBatch] = []
        while not producer.done() or inbox.data:
            item = inbox.take_data()
            if item is not None:
                assert item[0] == 1 and item[2] == 5 and type(item[1]) is TupleBatch
                parts.append(item[1])
            await settle()
        await producer  # (raises what the split raised)
        assert [p.column("word") for p in parts] == [["a", "b"], ["c", "d"], ["e"]]
        assert [p.roots.tolist() for p in parts if p.roots is not None] == [[1, 2], [3, 4], [5]]
        assert inbox.max_size == 2

    simulate(main())


def test_producers_waiting_for_room_go_in_order() -> None:
    async def main() -> None:
        inbox = Inbox(1)
        assert inbox.put_nowait(0, ["first"])
        order: list[str] = []

        async def produce(name: str) -> None:
            await inbox.put(0, [name])
            order.append(name)

        producers = [asyncio.ensure_future(produce(n)) for n in ("a", "b", "c")]
        await settle()
        assert inbox.put_nowait(0, ["late"]) is False  # waiting producers come first
        for _ in range(3):
            inbox.take_data()
            await settle()
        assert order == ["a", "b", "c"]
        await asyncio.gather(*producers)

    simulate(main())


def test_a_woken_producer_that_is_cancelled_hands_its_turn_on() -> None:
    async def main() -> None:
        inbox = Inbox(1)
        assert inbox.put_nowait(0, ["x"])
        first = asyncio.ensure_future(inbox.put(0, ["from first"]))
        second = asyncio.ensure_future(inbox.put(0, ["from second"]))
        await settle()
        assert inbox.statistics().tasks_waiting_put == 2
        inbox.take_data()  # room for one: wakes ``first`` ...
        first.cancel()  # ... which is cancelled before it runs
        await settle()
        assert first.cancelled()
        assert second.done()  # the wake-up was not lost with ``first``
        assert inbox.take_data() == (0, ["from second"], 0)
        assert inbox.statistics().tasks_waiting_put == 0

    simulate(main())


def test_a_waiting_producer_that_is_cancelled_leaves_the_queue() -> None:
    async def main() -> None:
        inbox = Inbox(1)
        assert inbox.put_nowait(0, ["x"])
        waiting = asyncio.ensure_future(inbox.put(0, ["y"]))
        await settle()
        waiting.cancel()
        await settle()
        assert inbox.statistics().tasks_waiting_put == 0
        inbox.take_data()
        assert inbox.put_nowait(0, ["z"])  # nobody is ahead any more
        assert inbox.take_data() == (0, ["z"], 0)

    simulate(main())


def test_close_drops_what_is_queued_and_releases_waiting_producers() -> None:
    async def main() -> None:
        inbox = Inbox(2)
        assert inbox.put_nowait(0, ["a", "b"])
        blocked = asyncio.ensure_future(inbox.put(0, ["c"]))
        await settle()
        inbox.close()
        await settle()
        assert blocked.done() and blocked.exception() is None
        assert inbox.put_nowait(0, ["d", "e", "f"]) is True  # accepted and dropped
        await inbox.put(0, ["g"] * 5)
        assert inbox.dropped == 2 + 1 + 3 + 5
        assert len(inbox) == 0 and inbox.take_data() is None

    simulate(main())


def test_wait_returns_for_data_control_a_wake_or_the_timeout() -> None:
    async def main() -> list[str]:
        inbox = Inbox(2)
        loop = asyncio.get_running_loop()
        seen: list[str] = []

        async def waiter(name: str) -> None:
            await inbox.wait()
            seen.append(name)

        for name, poke in [
            ("data", lambda: inbox.put_nowait(0, ["x"])),
            ("control", lambda: inbox.put_control("ack")),
            ("wake", inbox.wake),
        ]:
            task = asyncio.ensure_future(waiter(name))
            await settle()
            assert not task.done() and inbox.statistics().tasks_waiting_get == 1
            poke()
            await settle()
            assert task.done()
            assert inbox.statistics().tasks_waiting_get == 0
            inbox.take_data()
            inbox.control.clear()  # the executor pops its control lane itself
        start = loop.time()
        await inbox.wait(timeout=2.5)
        assert loop.time() - start == pytest.approx(2.5)
        inbox.put_control("ack")
        await inbox.wait()  # something is there: no wait at all
        assert loop.time() - start == pytest.approx(2.5)
        return seen

    assert simulate(main()) == ["data", "control", "wake"]
