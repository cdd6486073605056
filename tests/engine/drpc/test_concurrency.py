"""Many concurrent DRPC calls with random bolt failures: each ends, with its result or a
clear error, and none hangs."""

from __future__ import annotations

import asyncio
import random
import re
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from engine import LocalCluster, run_topology
from engine.drpc import DRPCRequestFailed, LocalDRPC

from ..topologies import run
from .bolts import expected_upper, upper_words

CALLS = 100
FAILED = re.compile(
    r"DRPC request \d+ to function 'upper' failed: bolt 'bolt1' raised FailedException: "
    r"injected"
)


def requests(seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join(f"w{rng.randrange(50)}" for _ in range(rng.randrange(6))) for _ in range(CALLS)
    ]


def check(args: list[str], outcomes: list[object], fail_rate: float) -> None:
    failed = 0
    for a, outcome in zip(args, outcomes, strict=True):
        if isinstance(outcome, DRPCRequestFailed):
            assert FAILED.fullmatch(str(outcome)), str(outcome)
            assert a.split(), "a call without words touches no failing bolt"
            failed += 1
        else:
            assert outcome == expected_upper(a)
    if fail_rate == 0:
        assert failed == 0


@settings(max_examples=6, deadline=None)
@given(
    parallelism=st.integers(1, 3),
    fail_rate=st.sampled_from([0.0, 0.05, 0.3]),
    seed=st.integers(0, 2**16),
)
def test_concurrent_awaited_calls_each_end_with_a_result_or_a_clear_error(
    parallelism: int, fail_rate: float, seed: int
) -> None:
    args = requests(seed)

    async def main() -> list[object]:
        with LocalDRPC(request_timeout_secs=20) as drpc:
            topology = upper_words(drpc, parallelism, fail_rate, seed=seed)
            conf = {"topology.seed": seed, "topology.message.timeout.secs": 10}
            async with run_topology(topology, conf):
                calls = [drpc.execute_async("upper", a) for a in args]
                # 30 s: far beyond any call's own bound; reaching it means something hung
                outcomes = await asyncio.wait_for(
                    asyncio.gather(*calls, return_exceptions=True), 30
                )
            stats = drpc.statistics()
            assert stats.succeeded + stats.failed == CALLS
            assert stats.timed_out == 0 and stats.queued == 0 and stats.in_flight == 0
            return outcomes

    check(args, run(main()), fail_rate)


def test_concurrent_blocking_calls_from_threads_against_a_local_cluster() -> None:
    args = requests(7)
    outcomes: list[object] = [None] * CALLS

    def call(i: int) -> None:
        try:
            outcomes[i] = drpc.execute("upper", args[i])
        except DRPCRequestFailed as exc:
            outcomes[i] = exc

    with LocalDRPC(request_timeout_secs=20) as drpc, LocalCluster() as cluster:
        cluster.submit_topology("upper", {"topology.seed": 7}, upper_words(drpc, 2, 0.1, seed=7))
        threads = [threading.Thread(target=call, args=(i,)) for i in range(CALLS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads)
    check(args, outcomes, 0.1)
    assert any(isinstance(o, DRPCRequestFailed) for o in outcomes)
