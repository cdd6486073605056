"""``Inbox``: an executor's receive queue.

Two lanes behind one wake-up: a bounded *data* lane of tuple batches, whose bound counts
tuples (not batches) and is never exceeded, and an unbounded *control* lane (acks and fails
for spouts, tick tuples) that is always served first, so control never waits behind data
and a full data lane can never deadlock the acker against a spout.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .._columnar.batch import TupleBatch
from .._model.tuple import Tuple

__all__ = ["Delivery", "Destination", "Inbox", "InboxStatistics", "OutBuffer"]

#: What the data lane carries for one task: a run of per-tuple emits, or a batch (columnar
#: emits, and per-tuple ones a collector gathered into columns). ``len`` counts tuples.
Delivery = list[Tuple] | TupleBatch
#: A sending executor's buffer for one target task: per-tuple emits and batches in emit
#: order, which ``Executor.flush`` cuts into deliveries.
OutBuffer = list[Tuple | TupleBatch]


class Destination(Protocol):
    """Where a sending executor hands its batches for one target task: the task's ``Inbox``,
    or a wrapper around it that the wiring puts in place (fault injection's faulty edge)."""

    @property
    def capacity(self) -> int:
        """The most tuples one batch may hold (longer runs are cut to it)."""
        ...

    def put_nowait(self, task: int, batch: Delivery, stamp: int = 0) -> bool:
        """Take ``batch`` for ``task`` now, or refuse it (False) and take nothing."""
        ...

    async def put(self, task: int, batch: Delivery, stamp: int = 0) -> None:
        """Take ``batch`` for ``task``, waiting while there is no room."""
        ...


@dataclass(frozen=True)
class InboxStatistics:
    """A snapshot of one inbox (trio's ``statistics()`` habit): how full it is, and how
    often producers had to wait, which is where backpressure shows."""

    capacity: int
    queued_tuples: int
    queued_batches: int
    queued_control: int
    max_queued_tuples: int
    blocked_puts: int
    tasks_waiting_get: int
    tasks_waiting_put: int


class Inbox:
    """One executor's receive queue, with the two lanes the module describes."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        #: (task, list of tuples, stamp) batches; ``stamp`` is the producer's clock reading
        self.data: deque[tuple[int, Delivery, int]] = deque()
        self.control: deque[Any] = deque()
        self.size = 0  # tuples in ``data``
        self.max_size = 0
        self.blocked_puts = 0
        self.closed = False
        self.dropped = 0  # tuples put after close (their executor crashed)
        self._getter: asyncio.Future[None] | None = None
        self._putters: deque[asyncio.Future[None]] = deque()

    def __len__(self) -> int:
        return self.size

    def _wake_getter(self) -> None:
        getter = self._getter
        if getter is not None:
            self._getter = None
            if not getter.done():
                getter.set_result(None)

    def _wake_putter(self) -> None:
        while self._putters:
            putter = self._putters.popleft()
            if not putter.done():
                putter.set_result(None)
                return

    def put_nowait(self, task: int, batch: Delivery, stamp: int = 0) -> bool:
        """Queue ``batch`` (at most ``capacity`` tuples) for ``task``; False if it does not
        fit now. Nothing is queued when False is returned. ``stamp`` (the time it was
        queued) comes back with the batch."""
        n = len(batch)
        if self.closed:
            self.dropped += n
            return True
        if self.size + n > self.capacity or self._putters:
            return False
        self.data.append((task, batch, stamp))
        self.size += n
        if self.size > self.max_size:
            self.max_size = self.size
        self._wake_getter()
        return True

    async def put(self, task: int, batch: Delivery, stamp: int = 0) -> None:
        """Queue ``batch``, waiting while the lane is full (backpressure). Batches longer
        than the capacity are split, so the bound always holds."""
        cap = self.capacity
        if len(batch) > cap:
            for i in range(0, len(batch), cap):
                part: Delivery
                if isinstance(batch, TupleBatch):  # (it has rows, not list slices)
                    part = batch.take(np.arange(i, min(i + cap, batch.n), dtype=np.int64))
                else:
                    part = batch[i : i + cap]
                await self.put(task, part, stamp)
            return
        if self.put_nowait(task, batch, stamp):
            return
        self.blocked_puts += 1
        loop = asyncio.get_running_loop()
        n = len(batch)
        while True:
            putter = loop.create_future()
            self._putters.append(putter)
            try:
                await putter
            except BaseException:
                if putter.done() and not putter.cancelled():
                    self._wake_putter()  # we were woken, then cancelled: pass the turn on
                elif putter in self._putters:
                    self._putters.remove(putter)
                raise
            if self.closed:
                self.dropped += n
                return
            if self.size + n <= cap:
                self.data.append((task, batch, stamp))
                self.size += n
                if self.size > self.max_size:
                    self.max_size = self.size
                self._wake_getter()
                if self.size < cap:
                    self._wake_putter()
                return

    def close(self) -> None:
        """The consumer is gone (a crashed executor): what is queued and whatever is put
        from now on is lost, and producers waiting for room are released."""
        self.closed = True
        self.dropped += self.size
        self.data.clear()
        self.size = 0
        while self._putters:
            putter = self._putters.popleft()
            if not putter.done():
                putter.set_result(None)

    def put_control(self, item: Any) -> None:
        """Queue an ack, a fail or a tick on the control lane: never refused, never waits
        (its volume is bounded by the data already in flight)."""
        self.control.append(item)
        self._wake_getter()

    def take_data(self) -> tuple[int, Delivery, int] | None:
        """The oldest data batch, or None; frees room for waiting producers."""
        if not self.data:
            return None
        item = self.data.popleft()
        self.size -= len(item[1])
        if self._putters:
            self._wake_putter()
        return item

    async def wait(self, timeout: float | None = None) -> None:
        """Until either lane has something (or ``timeout`` seconds pass)."""
        if self.data or self.control:
            return
        loop = asyncio.get_running_loop()
        getter = loop.create_future()
        self._getter = getter
        handle = None
        if timeout is not None:
            handle = loop.call_later(timeout, _resolve, getter)
        try:
            await getter
        finally:
            if handle is not None:
                handle.cancel()
            if self._getter is getter:
                self._getter = None

    def wake(self) -> None:
        """Wake the consumer without queuing anything (shutdown, activation changes)."""
        self._wake_getter()

    def statistics(self) -> InboxStatistics:
        """The inbox as it is now, with the waiting producers and consumer counted."""
        return InboxStatistics(
            capacity=self.capacity,
            queued_tuples=self.size,
            queued_batches=len(self.data),
            queued_control=len(self.control),
            max_queued_tuples=self.max_size,
            blocked_puts=self.blocked_puts,
            tasks_waiting_get=int(self._getter is not None),
            tasks_waiting_put=len(self._putters),
        )


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
