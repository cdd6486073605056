"""``LocalCluster``: Storm's in-process cluster, synchronous, its loop on its own thread."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine, Mapping
from types import TracebackType
from typing import Any, TypeVar

from .._model.errors import TopologyStateError
from .._model.topology import StormTopology
from .._monitor.stats import TopologyInfo
from .._time.loop import new_event_loop
from .running import RunningTopology, start_topology

__all__ = ["LocalCluster"]

T = TypeVar("T")


class LocalCluster:
    """Runs topologies on a uvloop event loop in a background thread.

    Storm's ``LocalCluster``, for code that is not async itself (a script, a notebook, a
    test): every method blocks until the loop thread has done it, and the topologies run
    between calls. Inside a running event loop, use ``run_topology`` instead.

    >>> from engine import LocalCluster, TopologyBuilder
    >>> from engine.testing import BasicPassBolt, FiniteSpout
    >>> builder = TopologyBuilder()
    >>> builder.set_spout("numbers", FiniteSpout(10))
    SpoutDeclarer('numbers')
    >>> builder.set_bolt("pass", BasicPassBolt(), 2).shuffle_grouping("numbers")
    BoltDeclarer('pass')
    >>> with LocalCluster() as cluster:
    ...     cluster.submit_topology("demo", {"topology.seed": 1}, builder.create_topology())
    ...     cluster.wait_until_complete("demo", timeout=60)
    ...     cluster.get_topology_info("demo").components["pass"].executed
    10
    """

    def __init__(self, ui: int | None = None) -> None:
        """With ``ui=PORT`` every topology submitted here is shown on the web UI at
        ``http://127.0.0.1:PORT/`` (the ``ui`` extra; ``cluster.ui_url``)."""
        self._loop = new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="squall-local-cluster", daemon=True
        )
        self._thread.start()
        self._running: dict[str, RunningTopology] = {}
        self._closed = False
        self._ui: Any = None
        if ui is not None:
            from ..ui import serve_ui  # the UI reads only the model and the stats

            self._ui = self._call(serve_ui(ui))

    @property
    def ui_url(self) -> str | None:
        """Where the web UI serves, if this cluster was made with ``ui=PORT``."""
        return None if self._ui is None else self._ui.url

    async def _show(self, running: RunningTopology) -> None:
        self._ui.register(running)

    async def _hide(self, name: str) -> None:
        self._ui.unregister(name)

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if self._closed:
            coro.close()
            raise TopologyStateError("this LocalCluster was shut down")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            # Since Python 3.11 this is also the builtin TimeoutError: when the call itself
            # raised one (the engine's own, precise message), that is the answer.
            if future.done():
                return future.result()
            future.cancel()
            raise TimeoutError(f"the cluster did not answer within {timeout} s") from None

    def _get(self, name: str) -> RunningTopology:
        try:
            return self._running[name]
        except KeyError:
            raise TopologyStateError(
                f"no topology named {name!r} is running (running: {sorted(self._running)})"
            ) from None

    def submit_topology(
        self, name: str, conf: Mapping[str, Any] | None, topology: StormTopology
    ) -> None:
        """Start ``topology`` under ``name``; returns once every task is open / prepared."""
        if name in self._running:
            raise TopologyStateError(f"a topology named {name!r} is already running")

        self._running[name] = self._call(start_topology(topology, conf, name=name))
        if self._ui is not None:
            self._call(self._show(self._running[name]))

    def kill_topology(self, name: str, wait_secs: float | None = None) -> None:
        """Deactivate, wait up to ``wait_secs`` (default: the message timeout) for in-flight
        trees to finish, then stop the topology and call ``cleanup`` / ``close``."""
        running = self._get(name)
        if wait_secs is None:
            wait_secs = running.runtime.conf["topology.message.timeout.secs"]
        self._call(running.kill(wait_secs))
        del self._running[name]
        if self._ui is not None:
            self._call(self._hide(name))

    def activate(self, name: str) -> None:
        """Resume calling the spouts' ``next_tuple``; raises here if it cannot (a topology
        that completed, say)."""
        running = self._get(name)

        async def go() -> None:
            running.activate()

        self._call(go())

    def deactivate(self, name: str) -> None:
        """Stop calling the spouts' ``next_tuple`` (in-flight trees still complete); raises
        here if it cannot."""
        running = self._get(name)

        async def go() -> None:
            running.deactivate()

        self._call(go())

    def rebalance(
        self, name: str, num_executors: Mapping[str, int], wait_secs: float | None = None
    ) -> dict[str, int]:
        """Change how many executors run each named component's tasks; returns the
        executors applied per component.

        A component's task count is fixed when it is submitted and an executor runs at
        least one task: more executors than tasks are capped at the task count (the
        returned number says so). As Storm's ``rebalance -w``: the topology is deactivated
        and gets up to ``wait_secs`` (default: the message timeout plus one acker sweep;
        at most a day) to become idle per component moved; past that a ``TimeoutError``
        names what is still pending and nothing more is moved. Every value is checked
        before anything moves: ``InvalidRebalanceError`` names the one out of range."""
        running = self._get(name)

        async def go() -> dict[str, int]:
            plan = running.runtime.reconfiguration.check_rebalance(num_executors, wait_secs)
            return {
                cid: await running.rebalance(cid, n, wait_secs=plan.wait_secs)
                for cid, n in plan.requested.items()
            }

        return self._call(go())

    def get_topology_info(self, name: str) -> TopologyInfo:
        """A snapshot of the topology's stats (counters, latencies, errors, queues), taken
        on its loop so that the counters agree with each other."""
        running = self._get(name)

        async def info() -> TopologyInfo:
            return running.info()

        return self._call(info())

    def get_topology_names(self) -> list[str]:
        """The topologies running here (killed ones are gone), sorted."""
        return sorted(self._running)

    def wait_until_complete(self, name: str, timeout: float | None = None) -> None:
        """Block until the topology's spouts are exhausted and nothing is pending."""
        self._call(self._get(name).wait_until_complete(timeout))

    def wait_until_idle(self, name: str, timeout: float | None = None) -> None:
        """Block until nothing is queued, executing or pending: the moment to read what a
        topology fed by hand (or whose spouts are quiet) made of its input. Unlike
        ``wait_until_complete`` it does not need the spouts to end."""
        self._call(self._get(name).wait_until_idle(timeout))

    def shutdown(self) -> None:
        """Kill every topology at once and stop the loop thread."""
        if self._closed:
            return
        for name in list(self._running):
            self._call(self._running.pop(name).kill(0))
        if self._ui is not None:
            self._call(self._ui.close())
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()
