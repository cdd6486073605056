"""``LocalDRPC``: an in-process DRPC server (Storm's ``LocalDRPC`` and ``DRPC`` daemon).

Callers ``execute(function, args)`` (blocking, from any thread without a running event
loop) or ``await execute_async(function, args)`` (from any event loop: a service, an HTTP
endpoint). Each request waits in its function's queue until a ``DRPCSpout`` of a running
topology fetches it; the topology's ``ReturnResults`` bolt hands the result back with
``result(request_id, result)``, and the spout reports a failed tuple tree with
``fail_request(request_id)``. Every call ends: with the result, a ``DRPCRequestFailed``
or, after ``request_timeout_secs``, a ``DRPCTimeout``.

An awaited call's timeout runs on the ``Clock`` of the topology serving its function (the
spout registers ``context.clock`` when it opens), or on the caller's loop clock while no
topology serves it: under ``simulate`` both are virtual. A blocking ``execute`` has no
loop and waits on the wall clock.

Thread-safe: topologies may run on another thread's loop (``LocalCluster``) or on the
caller's own (``run_topology``); results are handed to the caller's loop either way.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import threading
import uuid
import weakref
from collections import deque
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from .._model.errors import InvalidConfigError
from .._time.clock import Clock
from .._time.virtual import clock_for_running_loop
from ._errors import DRPCExecutionError, DRPCRequestFailed, DRPCTimeout

__all__ = ["DRPC_REQUEST_TIMEOUT_SECS", "DRPCRequest", "DRPCStatistics", "LocalDRPC", "lookup"]

#: Storm's ``drpc.request.timeout.secs`` default.
DRPC_REQUEST_TIMEOUT_SECS = 600.0

logger = logging.getLogger("engine.drpc")

_SERVICES: weakref.WeakValueDictionary[str, LocalDRPC] = weakref.WeakValueDictionary()


def lookup(service_id: str) -> LocalDRPC | None:
    """The live ``LocalDRPC`` with this service id in this process (Storm's
    ``ServiceRegistry``): how pickled spouts and bolts find their server."""
    return _SERVICES.get(service_id)


@dataclass(frozen=True)
class DRPCRequest:
    """A request as a spout fetches it (Storm's ``DRPCRequest``)."""

    request_id: str
    args: str


@dataclass(frozen=True)
class DRPCStatistics:
    """Requests waiting for a spout, being processed, and how the finished ones ended."""

    queued: int
    in_flight: int
    succeeded: int
    failed: int
    timed_out: int


class _Request:
    __slots__ = ("args", "bound", "function", "future", "id", "loop", "reason", "timer")

    def __init__(
        self,
        rid: str,
        function: str,
        args: str,
        loop: asyncio.AbstractEventLoop | None,
        future: Any,
    ) -> None:
        self.id = rid
        self.function = function
        self.args = args
        self.loop = loop  # None: a blocking caller waiting on a concurrent future
        self.future = future
        self.timer: asyncio.Task[None] | None = None  # the timeout, on the function's clock
        self.reason: str | None = None  # why the topology failed it, if a bolt said so
        self.bound: list[Any] = []  # the topology's ids for this request


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _settle(req: _Request, result: str | None, error: BaseException | None) -> None:
    """On the caller's loop: cancel the timer and resolve the caller's future."""
    if req.timer is not None:
        req.timer.cancel()
    future = req.future
    if not future.done():
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class LocalDRPC:
    """An in-process DRPC server.

    >>> from engine import LocalCluster
    >>> from engine.drpc import LinearDRPCTopologyBuilder, LocalDRPC
    >>> # with LocalDRPC() as drpc, LocalCluster() as cluster:
    >>> #     builder = LinearDRPCTopologyBuilder("exclaim")
    >>> #     builder.add_bolt(Exclaim(), 2)
    >>> #     cluster.submit_topology("drpc", {}, builder.create_local_topology(drpc))
    >>> #     drpc.execute("exclaim", "hello")          # -> "hello!"
    >>> #     await drpc.execute_async("exclaim", "hi")  # from a coroutine

    ``request_timeout_secs`` (Storm's ``drpc.request.timeout.secs``, 600 by default) bounds
    every call, whether or not a topology serves its function.
    """

    def __init__(self, request_timeout_secs: float = DRPC_REQUEST_TIMEOUT_SECS) -> None:
        if (
            not isinstance(request_timeout_secs, (int, float))
            or isinstance(request_timeout_secs, bool)
            or not request_timeout_secs > 0
        ):
            raise InvalidConfigError(
                f"request_timeout_secs must be a positive number, got {request_timeout_secs!r}"
            )
        self.request_timeout_secs = float(request_timeout_secs)
        self.service_id = f"local-drpc-{uuid.uuid4().hex[:16]}"
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._queues: dict[str, deque[_Request]] = {}
        self._requests: dict[str, _Request] = {}  # every unfinished request, by id
        self._waiters: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]] = {}
        self._spouts: dict[str, int] = {}  # function -> open spouts serving it
        self._clocks: dict[str, Clock] = {}  # function -> the serving topology's clock
        self._bound: dict[Any, _Request] = {}  # the topology's request id -> request
        self._counts = [0, 0, 0]  # succeeded, failed, timed out
        self._closed = False
        _SERVICES[self.service_id] = self

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._requests)} unfinished"
        return f"<LocalDRPC {self.service_id} ({state})>"

    # --- the client side ----------------------------------------------------------------
    def execute(self, function: str, args: str) -> str:
        """Call ``function`` with ``args`` and block until its result.

        Raises ``DRPCRequestFailed`` or ``DRPCTimeout``. Not from inside a running event
        loop (it would block it): await ``execute_async`` there.
        """
        if _running_loop() is not None:
            raise RuntimeError(
                "LocalDRPC.execute() would block the running event loop; "
                "await LocalDRPC.execute_async() instead"
            )
        future: concurrent.futures.Future[str] = concurrent.futures.Future()
        req = self._submit(function, args, None, future)
        done, _ = concurrent.futures.wait([future], self.request_timeout_secs)
        if not done:
            self._complete(req, None, self._timeout_error(req))
        return future.result()  # the result, the failure, or the timeout if it came first

    async def execute_async(self, function: str, args: str) -> str:
        """Call ``function`` with ``args`` and await its result (any event loop).

        Raises ``DRPCRequestFailed`` or ``DRPCTimeout``; cancelling the call withdraws the
        request.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        req = self._submit(function, args, loop, future)
        clock = self._clocks.get(function) or clock_for_running_loop()
        req.timer = loop.create_task(self._expire_after(clock, req))
        try:
            return await future
        except asyncio.CancelledError:
            self._withdraw(req)
            raise
        finally:
            if req.timer is not None:
                req.timer.cancel()

    async def _expire_after(self, clock: Clock, req: _Request) -> None:
        await clock.sleep(self.request_timeout_secs)
        req.timer = None  # done: nothing to cancel
        self._expire(req)

    def _submit(self, function: str, args: str, loop: Any, future: Any) -> _Request:
        if not isinstance(function, str) or not function:
            raise TypeError(f"the DRPC function must be a non-empty string, got {function!r}")
        if not isinstance(args, str):
            raise TypeError(
                f"DRPC arguments are a string (Storm's DRPC protocol), got "
                f"{type(args).__name__}: {args!r}"
            )
        with self._lock:
            if self._closed:
                raise DRPCRequestFailed(
                    f"DRPC call to function {function!r} failed: {self.service_id} is shut down",
                    function,
                    None,
                )
            rid = str(next(self._ids))
            req = self._requests[rid] = _Request(rid, function, args, loop, future)
            queue = self._queues.get(function)
            if queue is None:
                queue = self._queues[function] = deque()
            queue.append(req)
            waiters = self._waiters.pop(function, None)
        if waiters:
            self._wake_all(waiters)
        return req

    def _wake_all(
        self, waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]
    ) -> None:
        here = _running_loop()
        for loop, future in waiters:
            if loop is here:
                _wake(future)
            else:
                # RuntimeError: that loop is closed, nobody waits there any more
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_wake, future)

    def _timeout_error(self, req: _Request) -> DRPCTimeout:
        return DRPCTimeout(
            f"DRPC request {req.id} to function {req.function!r} got no result within "
            f"{self.request_timeout_secs:g} s (request_timeout_secs)",
            req.function,
            req.id,
        )

    def _expire(self, req: _Request) -> None:
        self._complete(req, None, self._timeout_error(req))

    def _withdraw(self, req: _Request) -> None:
        with self._lock:
            self._requests.pop(req.id, None)
        if req.timer is not None:
            req.timer.cancel()

    def _complete(
        self, req: _Request, result: str | None, error: DRPCExecutionError | None
    ) -> bool:
        """Resolve ``req`` exactly once; False if something else resolved it first."""
        with self._lock:
            if self._requests.pop(req.id, None) is None:
                return False
            for bound in req.bound:
                self._bound.pop(bound, None)
            if error is None:
                self._counts[0] += 1
            elif isinstance(error, DRPCTimeout):
                self._counts[2] += 1
            else:
                self._counts[1] += 1
        if req.loop is None:
            if error is None:
                req.future.set_result(result)
            else:
                req.future.set_exception(error)
        elif req.loop is _running_loop():
            _settle(req, result, error)
        else:
            # RuntimeError: the caller's loop is gone, and the caller with it
            with contextlib.suppress(RuntimeError):
                req.loop.call_soon_threadsafe(_settle, req, result, error)
        return True

    # --- the topology side ----------------------------------------------------------------
    def fetch_request(self, function: str) -> DRPCRequest | None:
        """The oldest request for ``function`` still waiting, or None (Storm's
        ``fetchRequest``)."""
        with self._lock:
            queue = self._queues.get(function)
            while queue:
                req = queue.popleft()
                if req.id in self._requests:  # not timed out or withdrawn meanwhile
                    return DRPCRequest(req.id, req.args)
        return None

    async def wait_for_request(
        self, function: str, timeout: float, clock: Clock | None = None
    ) -> None:
        """Return once a request for ``function`` may be waiting, or after ``timeout`` s
        of ``clock`` (default: the running loop's)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._queues.get(function) or self._closed:
                return
            future: asyncio.Future[None] = loop.create_future()
            entry = (loop, future)
            self._waiters.setdefault(function, []).append(entry)
        timer = loop.create_task((clock or clock_for_running_loop()).sleep(timeout))
        timer.add_done_callback(lambda _: _wake(future))
        try:
            await future
        finally:
            timer.cancel()
            with self._lock:
                waiting = self._waiters.get(function)
                if waiting and entry in waiting:
                    waiting.remove(entry)

    def result(self, request_id: str, result: str) -> bool:
        """Deliver ``request_id``'s result; False if the request is no longer waiting
        (it timed out, failed or was withdrawn)."""
        req = self._requests.get(request_id)
        if req is None:
            return False
        return self._complete(req, str(result), None)

    def fail_request(self, request_id: str, reason: str | None = None) -> bool:
        """The request's tuple tree failed: its caller gets ``DRPCRequestFailed`` saying
        why (a bolt's error noted with ``note_error`` first, else ``reason``)."""
        req = self._requests.get(request_id)
        if req is None:
            return False
        why = req.reason or reason or "its tuple tree failed or timed out in the topology"
        message = f"DRPC request {req.id} to function {req.function!r} failed: {why}"
        logger.warning("%s", message)
        return self._complete(req, None, DRPCRequestFailed(message, req.function, req.id))

    def bind(self, request_id: str, topology_id: Any) -> None:
        """The topology calls request ``request_id`` ``topology_id`` (``PrepareRequest``'s
        random id): errors noted for ``topology_id`` are told to the caller."""
        with self._lock:
            req = self._requests.get(request_id)
            if req is not None:
                self._bound[topology_id] = req
                req.bound.append(topology_id)

    def note_error(self, topology_id: Any, reason: str) -> None:
        """A bolt failed the request the topology calls ``topology_id``: the first reason
        noted is the one its caller reads if the request fails."""
        with self._lock:
            req = self._bound.get(topology_id)
            if req is not None and req.reason is None:
                req.reason = reason

    def failure_reason(self, request_id: str) -> str | None:
        """The reason noted for ``request_id`` so far, if any."""
        req = self._requests.get(request_id)
        return None if req is None else req.reason

    def register_spout(self, function: str, clock: Clock | None = None) -> None:
        """A spout serving ``function`` opened (see ``serves``); ``clock``, its topology's
        ``Clock``, times the calls to ``function`` from now on."""
        with self._lock:
            self._spouts[function] = self._spouts.get(function, 0) + 1
            if clock is not None:
                self._clocks[function] = clock

    def unregister_spout(self, function: str) -> None:
        """A spout serving ``function`` closed; when it was the last, calls to ``function``
        go back to their own loop's clock."""
        with self._lock:
            left = self._spouts.get(function, 0) - 1
            if left > 0:
                self._spouts[function] = left
            else:
                self._spouts.pop(function, None)
                self._clocks.pop(function, None)

    def serves(self, function: str) -> bool:
        """True while an open ``DRPCSpout`` of a running topology serves ``function``."""
        return self._spouts.get(function, 0) > 0

    # --- life cycle -------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """``shutdown`` ran: new calls fail at once."""
        return self._closed

    def statistics(self) -> DRPCStatistics:
        """The requests now, counted under the lock so that the figures agree."""
        with self._lock:
            queued = sum(1 for q in self._queues.values() for r in q if r.id in self._requests)
            succeeded, failed, timed_out = self._counts
            return DRPCStatistics(
                queued, len(self._requests) - queued, succeeded, failed, timed_out
            )

    def shutdown(self) -> None:
        """Fail every unfinished call with ``DRPCRequestFailed``; refuse new ones."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            unfinished = list(self._requests.values())
            waiters = [w for ws in self._waiters.values() for w in ws]
            self._waiters.clear()
            self._queues.clear()
        for req in unfinished:
            self._complete(
                req,
                None,
                DRPCRequestFailed(
                    f"DRPC request {req.id} to function {req.function!r} failed: "
                    f"{self.service_id} was shut down",
                    req.function,
                    req.id,
                ),
            )
        self._wake_all(waiters)
        _SERVICES.pop(self.service_id, None)

    def __enter__(self) -> LocalDRPC:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()
