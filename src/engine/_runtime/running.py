"""The running handle: ``RunningTopology``, and ``start_topology`` / ``run_topology``, the
embedding API (``async with run_topology(topology, conf) as running``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from .._model.errors import TopologyStateError
from .._model.faults import Fault, MessageReport
from .._model.topology import StormTopology
from .._monitor.stats import TopologyInfo
from .._time.clock import Clock
from .._time.virtual import clock_for_running_loop
from .lifecycle import MAX_POLL_SECS, POLL_SECS, Runtime

__all__ = ["RunningTopology", "run_topology", "start_topology"]


class RunningTopology:
    """A handle on a topology running inside the current event loop."""

    def __init__(self, runtime: Runtime, task: asyncio.Task[None]) -> None:
        self._runtime = runtime
        self._task = task

    @property
    def name(self) -> str:
        """The topology's name."""
        return self._runtime.name

    @property
    def seed(self) -> int:
        """The seed the run uses (``topology.seed``, or drawn when unset)."""
        return self._runtime.seed

    @property
    def runtime(self) -> Runtime:
        """The ``Runtime`` behind the handle (tests and tools)."""
        return self._runtime

    @property
    def topology(self) -> StormTopology:
        """The topology that runs."""
        return self._runtime.topology

    @property
    def conf(self) -> Mapping[str, Any]:
        """The topology's effective configuration (defaults merged in)."""
        return self._runtime.conf

    @property
    def status(self) -> str:
        """``ACTIVE``, ``INACTIVE``, ``KILLED`` or ``COMPLETED``."""
        return self._runtime.status

    @property
    def clock(self) -> Clock:
        """The topology's clock (virtual under ``simulate``)."""
        return self._runtime.clock

    async def rebalance(
        self, component_id: str, num_executors: int, wait_secs: float | None = None
    ) -> int:
        """Spread ``component_id``'s tasks over ``num_executors`` executors (Storm's
        rebalance), waiting up to ``wait_secs`` for in-flight trees first; returns the
        executors applied (at most the component's task count)."""
        return await self._runtime.reconfiguration.rebalance(
            component_id, num_executors, wait_secs=wait_secs
        )

    def info(self) -> TopologyInfo:
        """Per component and task: emitted, transferred, executed, acked, failed, ..."""
        return self._runtime.info()

    def task_objects(self, component_id: str) -> dict[int, Any]:
        """The live component object of each of ``component_id``'s tasks, by task id.

        In-process only: read final state after ``wait_until_complete`` (tests, examples).
        """
        objects = {
            t: obj
            for ex in self._runtime.executors
            if ex.component_id == component_id
            for t, obj in ex.instances.items()
        }
        if not objects:
            raise TopologyStateError(
                f"topology {self.name!r} has no component {component_id!r} "
                f"(components: {sorted(self._runtime.topology.components)})"
            )
        return dict(sorted(objects.items()))

    def inject(self, fault: Fault) -> None:
        """Inject a fault now (crashes happen at their ``at`` time)."""
        self._check_alive()
        self._runtime.inject(fault)

    def report(self) -> dict[str, MessageReport]:
        """What became of every spout message so far (needs ``trace=True``)."""
        trace = self._runtime.trace
        if trace is None:
            raise TopologyStateError(
                f"topology {self.name!r} was started without trace=True: no message report"
            )
        return trace.report(self._runtime.in_flight_roots())

    def activate(self) -> None:
        """Activate the spouts (Storm's ``activate``)."""
        self._runtime.set_active(True)

    def deactivate(self) -> None:
        """Deactivate the spouts: they stop calling ``next_tuple``."""
        self._runtime.set_active(False)

    def _check_alive(self) -> None:
        if self._task.done():
            if not self._task.cancelled():
                error = self._task.exception()
                if error is not None:
                    raise error
            raise TopologyStateError(f"topology {self.name!r} is no longer running")

    async def wait_until_idle(self, timeout: float | None = None) -> None:
        """Until nothing is queued, executing or pending (Storm's tracked topology)."""
        await self._wait_for(self._runtime.is_idle, timeout, "idle")

    async def wait_until_complete(self, timeout: float | None = None) -> None:
        """Until every spout is exhausted (``Spout.is_exhausted``) and nothing is pending."""
        await self._wait_for(self._runtime.is_complete, timeout, "complete")
        self._runtime.status = "COMPLETED"

    async def _wait_for(
        self, condition: Callable[[], bool], timeout: float | None, what: str
    ) -> None:
        clock = self._runtime.clock
        deadline = None if timeout is None else clock.now_ns() + int(timeout * 1e9)
        # Two consecutive observations, so a batch handed between two executors in the
        # same loop turn cannot slip past.
        seen = 0
        poll = POLL_SECS
        while seen < 2:
            self._check_alive()
            seen = seen + 1 if condition() else 0
            if deadline is not None and clock.now_ns() >= deadline:
                info = self._runtime.info()
                errors = info.errors
                last = (
                    f"; {info.error_count:,} error(s), last error: [{errors[-1].component} "
                    f"task {errors[-1].task}] {errors[-1].error}"
                    if errors
                    else ""
                )
                raise TimeoutError(
                    f"topology {self.name!r} did not become {what} within {timeout} s "
                    f"(pending trees: {self._runtime.pending()}{last})"
                )
            await clock.sleep(poll)
            poll = POLL_SECS if seen else min(poll * 2, MAX_POLL_SECS)

    async def kill(self, wait_secs: float | None = 0) -> None:
        """Deactivate, let in-flight trees finish for up to ``wait_secs``, then stop.

        The status is ``KILLED`` from the start, as in Storm: while the trees finish,
        ``activate``, ``deactivate`` and ``rebalance`` raise ``TopologyStateError``."""
        if self._task.done():
            return
        if self._runtime.status == "ACTIVE":
            self._runtime.set_active(False)
        if self._runtime.status != "COMPLETED":
            self._runtime.status = "KILLED"
        if wait_secs:
            with contextlib.suppress(TimeoutError):
                await self.wait_until_idle(wait_secs)
        self._runtime.shutdown()
        await self._task


async def start_topology(
    topology: StormTopology,
    conf: Mapping[str, Any] | None = None,
    *,
    name: str = "topology",
    clock: Clock | None = None,
    faults: Sequence[Fault] = (),
    trace: bool = False,
) -> RunningTopology:
    """Start ``topology`` in the running loop; returns once every task is open/prepared.

    The caller owns the result and must ``await running.kill()``; prefer ``run_topology``.
    """
    runtime = Runtime(
        topology,
        conf,
        name=name,
        clock=clock or clock_for_running_loop(),
        trace=trace,
        faults=faults,
    )
    task = asyncio.ensure_future(runtime.run())
    started = asyncio.ensure_future(runtime.started.wait())
    try:
        await asyncio.wait([task, started], return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # the caller gave up (a timeout): no handle, so nothing runs on
        started.cancel()
        task.cancel()
        await asyncio.wait([task])  # what opened is closed
        raise
    if task.done():
        started.cancel()
        task.result()  # open() or prepare() failed: raise it here
    return RunningTopology(runtime, task)


@contextlib.asynccontextmanager
async def run_topology(
    topology: StormTopology,
    conf: Mapping[str, Any] | None = None,
    *,
    name: str = "topology",
    clock: Clock | None = None,
    faults: Sequence[Fault] = (),
    trace: bool = False,
    ui: int | None = None,
) -> AsyncIterator[RunningTopology]:
    """Run ``topology`` in the running event loop for the duration of the block; with
    ``ui=PORT`` it is shown on the web UI at ``http://127.0.0.1:PORT/`` (``engine.ui``).

    >>> async def main(topology):
    ...     async with run_topology(topology, {"topology.max.spout.pending": 1000}) as running:
    ...         await running.wait_until_complete(timeout=60)
    ...         print(running.info().components["count"].executed)
    """
    running = await start_topology(
        topology, conf, name=name, clock=clock, faults=faults, trace=trace
    )
    try:
        if ui is None:
            yield running
        else:
            from ..ui import attach_ui  # the ui extra (aiohttp); the UI needs only the model

            async with attach_ui(running, ui):
                yield running
    finally:
        await running.kill(0)
    # The block ended well, but the topology may have stopped on an error before
    # (a restarted task's failing prepare, say): that error is the block's.
    error = None if running._task.cancelled() else running._task.exception()
    if error is not None:
        raise error
