"""DRPC on the topology's seed and clock: request ids from ``topology.seed``; request
timeouts on the serving topology's ``Clock``."""

from __future__ import annotations

import asyncio

import pytest

from engine import run_topology
from engine.drpc import DRPCTimeout, LinearDRPCTopologyBuilder, LocalDRPC
from engine.testing import simulate

from .bolts import REQUEST_IDS, Hold, RecordingExclaim


def request_ids(label: str, seed: int) -> list[int]:
    async def main() -> None:
        with LocalDRPC() as drpc:
            builder = LinearDRPCTopologyBuilder("exclaim")
            builder.add_bolt(RecordingExclaim(label))
            topology = builder.create_local_topology(drpc)
            async with run_topology(topology, {"topology.seed": seed}):
                for i in range(5):  # one at a time: the order is the order of the calls
                    assert await drpc.execute_async("exclaim", f"x{i}") == f"x{i}!"

    REQUEST_IDS.pop(label, None)
    simulate(main())
    return REQUEST_IDS.pop(label)


def test_request_ids_come_from_the_topology_seed() -> None:
    first, again, other = request_ids("a", 11), request_ids("b", 11), request_ids("c", 12)
    assert len(set(first)) == 5
    assert first == again
    assert set(first).isdisjoint(other)


class FastClock:
    """A ``Clock`` running 1000 times faster than the (virtual) loop it sleeps on."""

    SPEED = 1000

    def now_ns(self) -> int:
        return int(asyncio.get_running_loop().time() * 1e9 * self.SPEED)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds / self.SPEED)


def test_a_request_times_out_on_the_clock_of_the_topology_serving_it() -> None:
    builder = LinearDRPCTopologyBuilder("stuck")
    builder.add_bolt(Hold())
    conf = {"topology.message.timeout.secs": 3600}  # the request timeout comes first

    async def main() -> float:
        loop = asyncio.get_running_loop()
        with LocalDRPC(request_timeout_secs=600) as drpc:
            topology = builder.create_local_topology(drpc)
            async with run_topology(topology, conf, clock=FastClock()):
                start = loop.time()
                with pytest.raises(DRPCTimeout) as info:
                    await drpc.execute_async("stuck", "x")
                assert str(info.value) == (
                    "DRPC request 1 to function 'stuck' got no result within 600 s "
                    "(request_timeout_secs)"
                )
                return loop.time() - start

    # 600 s of the topology's clock are 0.6 s of the loop's
    assert simulate(main()) == pytest.approx(0.6, abs=0.01)


def test_a_request_nobody_serves_times_out_on_the_callers_loop_clock() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        with LocalDRPC(request_timeout_secs=600) as drpc:
            start = loop.time()
            with pytest.raises(DRPCTimeout):
                await drpc.execute_async("nobody", "x")
            return loop.time() - start

    assert simulate(main()) == pytest.approx(600)
