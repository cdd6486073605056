"""Simulation on virtual time: ``simulate``, ``simulated_time``, ``advance_time``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

from .._time.virtual import VirtualTimeLoop

__all__ = ["advance_time", "simulate", "simulated_time"]

T = TypeVar("T")


def simulate(main: Coroutine[Any, Any, T], *, start: float = 0.0) -> T:
    """Run ``main`` on a fresh virtual-time loop and return its result.

    Inside, ``run_topology`` uses the loop's virtual clock: timeouts, ticks, waits and
    ``advance_time`` take no wall time. Seed the topology (``topology.seed``) and the run
    is reproducible, faults included::

        async def scenario():
            async with run_topology(topology, {"topology.seed": 7}, trace=True,
                                    faults=[CrashTask("split", at=5.0)]) as running:
                await advance_time(600)          # ten minutes, in seconds of wall time
                return running.report()

        report = simulate(scenario())
    """
    with simulated_time(start) as loop:
        return loop.run_until_complete(main)


@contextlib.contextmanager
def simulated_time(start: float = 0.0) -> Iterator[VirtualTimeLoop]:
    """A virtual-time event loop for the block (Storm's ``withSimulatedTime``)."""
    loop = VirtualTimeLoop(start)
    try:
        yield loop
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


async def advance_time(secs: float) -> None:
    """Let ``secs`` of (virtual) time pass while the topology runs (Storm's
    ``advanceClusterTime``). On a real loop this simply sleeps."""
    await asyncio.sleep(secs)
