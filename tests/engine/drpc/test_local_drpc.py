"""LocalDRPC end to end: results, timeouts, failures, shutdown; blocking and async callers.

Awaited calls run on virtual time (``simulate``): timeouts cost nothing and events are
ordered explicitly, never by sleeping on the wall clock."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from engine import InvalidConfigError, LocalCluster, SquallRuntimeError, run_topology
from engine.drpc import (
    DRPCExecutionError,
    DRPCRequest,
    DRPCRequestFailed,
    DRPCStatistics,
    DRPCTimeout,
    LinearDRPCTopologyBuilder,
    LocalDRPC,
)
from engine.testing import simulate

from .bolts import CountChars, Hold, NoSum, Picky, exclaim, expected_upper, upper_words


async def queued(drpc: LocalDRPC, n: int) -> None:
    """Until ``n`` requests wait in ``drpc``'s queues (no time passes)."""
    for _ in range(100):
        if drpc.statistics().queued == n:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{drpc.statistics()}: expected {n} queued")


def test_blocking_calls_against_a_local_cluster() -> None:
    with LocalDRPC() as drpc, LocalCluster() as cluster:
        cluster.submit_topology("exclaim", {}, exclaim(drpc, 2))
        cluster.submit_topology("upper", {}, upper_words(drpc))
        assert drpc.execute("exclaim", "hello") == "hello!"
        assert drpc.execute("upper", "storm is fast") == "FAST IS STORM"
        assert drpc.execute("upper", "") == ""  # no words: the join finishes empty
        results: list[str] = []
        callers = [
            threading.Thread(target=lambda i=i: results.append(drpc.execute("exclaim", f"t{i}")))
            for i in range(8)
        ]
        for t in callers:
            t.start()
        for t in callers:
            t.join(30)
        assert sorted(results) == sorted(f"t{i}!" for i in range(8))
        assert drpc.serves("upper") and not drpc.serves("nothing")
        stats = drpc.statistics()
        assert stats == DRPCStatistics(queued=0, in_flight=0, succeeded=11, failed=0, timed_out=0)


def test_awaited_calls_in_the_topologys_own_loop() -> None:
    async def main() -> list[str]:
        with LocalDRPC() as drpc:
            async with run_topology(upper_words(drpc, 3)):
                args = [f"w{i} v{i % 7} x" for i in range(300)]
                results = await asyncio.gather(*(drpc.execute_async("upper", a) for a in args))
                assert results == [expected_upper(a) for a in args]
                return results

    assert len(simulate(main())) == 300


def test_a_request_nobody_serves_times_out() -> None:
    async def main() -> None:
        with LocalDRPC(request_timeout_secs=0.05) as drpc:
            with pytest.raises(DRPCTimeout) as info:
                await drpc.execute_async("nobody", "x")
            assert str(info.value) == (
                "DRPC request 1 to function 'nobody' got no result within 0.05 s "
                "(request_timeout_secs)"
            )
            assert (info.value.function, info.value.request_id) == ("nobody", "1")
            assert isinstance(info.value, TimeoutError)
            assert drpc.statistics().timed_out == 1
            assert drpc.fetch_request("nobody") is None  # withdrawn from the queue

    simulate(main())
    with LocalDRPC(request_timeout_secs=0.05) as drpc:
        with pytest.raises(DRPCTimeout) as sync_info:
            drpc.execute("nobody", "x")
        assert str(sync_info.value) == (
            "DRPC request 1 to function 'nobody' got no result within 0.05 s (request_timeout_secs)"
        )


def test_a_request_stuck_in_the_topology_times_out() -> None:
    builder = LinearDRPCTopologyBuilder("stuck")
    builder.add_bolt(Hold())

    async def main() -> None:
        with LocalDRPC(request_timeout_secs=0.2) as drpc:
            async with run_topology(builder.create_local_topology(drpc)):
                with pytest.raises(DRPCTimeout):
                    await drpc.execute_async("stuck", "x")

    simulate(main())


def test_a_request_whose_tree_times_out_in_the_topology_fails() -> None:
    builder = LinearDRPCTopologyBuilder("stuck")
    builder.add_bolt(Hold())

    async def main() -> None:
        with LocalDRPC(request_timeout_secs=30) as drpc:
            conf = {"topology.message.timeout.secs": 0.2}
            async with run_topology(builder.create_local_topology(drpc), conf):
                with pytest.raises(DRPCRequestFailed) as info:
                    await drpc.execute_async("stuck", "x")
                assert str(info.value) == (
                    "DRPC request 1 to function 'stuck' failed: its tuple tree timed out in the "
                    "topology (no result within topology.message.timeout.secs = 0.2 s)"
                )

    simulate(main())


def test_a_failed_tuple_fails_only_its_request() -> None:
    async def main() -> tuple[list[Any], Any]:
        with LocalDRPC() as drpc:
            async with run_topology(upper_words(drpc, 2, poison=frozenset({"bad"}))):
                outcomes = await asyncio.gather(
                    drpc.execute_async("upper", "a bad word"),
                    drpc.execute_async("upper", "good words"),
                    return_exceptions=True,
                )
                return outcomes, drpc.statistics()

    (failed, ok), stats = simulate(main())
    assert isinstance(failed, DRPCRequestFailed) and failed.function == "upper"
    assert str(failed) == (  # the bolt's own error, not only "its tree failed"
        "DRPC request 1 to function 'upper' failed: bolt 'bolt1' raised FailedException: injected"
    )
    assert ok == "GOOD WORDS"
    assert (stats.succeeded, stats.failed) == (1, 1)


def test_a_failure_says_why_to_the_caller_and_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    builder = LinearDRPCTopologyBuilder("picky")
    builder.add_bolt(Picky(), 2)

    async def main() -> None:
        with LocalDRPC() as drpc:
            async with run_topology(builder.create_local_topology(drpc)):
                assert await drpc.execute_async("picky", "ok") == "ok!"
                with pytest.raises(DRPCRequestFailed) as info:
                    await drpc.execute_async("picky", "boom")
                assert await drpc.execute_async("picky", "fine") == "fine!"
        message = (
            "DRPC request 2 to function 'picky' failed: bolt 'bolt0' raised ValueError: "
            "cannot exclaim 'boom'"
        )
        assert str(info.value) == message
        assert [r.getMessage() for r in caplog.records if r.name == "engine.drpc"] == [message]

    with caplog.at_level("WARNING", logger="engine.drpc"):
        simulate(main())


def test_shutdown_fails_every_waiting_call_and_refuses_new_ones() -> None:
    async def main() -> None:
        drpc = LocalDRPC()
        call = asyncio.ensure_future(drpc.execute_async("nobody", "x"))
        await queued(drpc, 1)
        drpc.shutdown()
        with pytest.raises(DRPCRequestFailed) as info:
            await call
        assert str(info.value) == (
            f"DRPC request 1 to function 'nobody' failed: {drpc.service_id} was shut down"
        )
        with pytest.raises(DRPCRequestFailed) as refused:
            await drpc.execute_async("nobody", "x")
        assert str(refused.value) == (
            f"DRPC call to function 'nobody' failed: {drpc.service_id} is shut down"
        )
        assert refused.value.request_id is None
        assert drpc.closed

    simulate(main())


def test_cancelling_a_call_withdraws_the_request() -> None:
    async def main() -> None:
        with LocalDRPC() as drpc:
            call = asyncio.ensure_future(drpc.execute_async("nobody", "x"))
            await queued(drpc, 1)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            assert drpc.fetch_request("nobody") is None
            assert drpc.statistics() == DRPCStatistics(0, 0, 0, 0, 0)

    simulate(main())


def test_the_server_side_protocol() -> None:
    async def main() -> None:
        with LocalDRPC() as drpc:
            call = asyncio.ensure_future(drpc.execute_async("f", "args"))
            await asyncio.sleep(0)
            request = drpc.fetch_request("f")
            assert request == DRPCRequest("1", "args")
            assert drpc.statistics().in_flight == 1
            assert drpc.result("1", "done") is True
            assert drpc.result("1", "again") is False  # resolved exactly once
            assert drpc.fail_request("1") is False
            assert await call == "done"

    simulate(main())


def test_execute_refuses_to_block_a_running_loop() -> None:
    async def main() -> None:
        with LocalDRPC() as drpc:
            with pytest.raises(RuntimeError) as info:
                drpc.execute("f", "x")
            assert str(info.value) == (
                "LocalDRPC.execute() would block the running event loop; "
                "await LocalDRPC.execute_async() instead"
            )

    simulate(main())


def test_arguments_are_checked() -> None:
    with pytest.raises(InvalidConfigError) as config:
        LocalDRPC(request_timeout_secs=0)
    assert str(config.value) == "request_timeout_secs must be a positive number, got 0"
    with LocalDRPC() as drpc:
        with pytest.raises(TypeError) as info:
            drpc.execute("f", 3)  # type: ignore[arg-type]
        assert str(info.value) == (
            "DRPC arguments are a string (Storm's DRPC protocol), got int: 3"
        )
        with pytest.raises(TypeError) as info:
            drpc.execute("", "x")
        assert str(info.value) == "the DRPC function must be a non-empty string, got ''"


def test_errors_are_runtime_errors_of_the_engine() -> None:
    assert issubclass(DRPCRequestFailed, DRPCExecutionError)
    assert issubclass(DRPCTimeout, DRPCExecutionError)
    assert issubclass(DRPCExecutionError, SquallRuntimeError)
    assert issubclass(DRPCTimeout, TimeoutError)
    assert not issubclass(DRPCRequestFailed, TimeoutError)
    import pickle

    err = pickle.loads(pickle.dumps(DRPCTimeout("late", "f", "3")))
    assert (str(err), err.function, err.request_id) == ("late", "f", "3")


def test_a_single_batch_bolt_on_several_tasks_answers_every_request() -> None:
    # The one bolt finishes requests (finish_batch), so it reads the id stream by request
    # id: its arguments once went to any task (none grouping), and the task that got the
    # id finished the request with an empty batch ("0").
    builder = LinearDRPCTopologyBuilder("chars")
    builder.add_bolt(CountChars(), 3)

    async def main() -> list[str]:
        with LocalDRPC() as drpc:
            async with run_topology(builder.create_local_topology(drpc)):
                args = ["x" * n for n in range(1, 21)]
                return await asyncio.gather(*(drpc.execute_async("chars", a) for a in args))

    assert simulate(main()) == [str(n) for n in range(1, 21)]


def test_an_error_in_finish_batch_says_why_to_the_caller() -> None:
    # The error of a batch bolt's finish_batch (finished_id) reached the error log only:
    # the caller read "no bolt reported an error".
    builder = LinearDRPCTopologyBuilder("sum")
    builder.add_bolt(NoSum(), 2)

    async def main() -> None:
        with LocalDRPC() as drpc:
            async with run_topology(builder.create_local_topology(drpc)):
                with pytest.raises(DRPCRequestFailed) as info:
                    await drpc.execute_async("sum", "abc")
        assert str(info.value) == (
            "DRPC request 1 to function 'sum' failed: bolt 'bolt0' raised ValueError: "
            "cannot sum 3 characters"
        )

    simulate(main())
