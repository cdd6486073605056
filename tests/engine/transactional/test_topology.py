"""Transactional topologies end to end: commits strictly in txid order, identical replays,
and an exact final state under random failures and restarts; on virtual time, although the
log's coordinator is always ready, so transactions (empty ones once the log is read) follow
each other without the loop ever waiting."""

from __future__ import annotations

import asyncio
import random
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import BasicBolt, run_topology
from engine.testing import advance_time, simulate
from engine.transactional import (
    FileMapState,
    FileStateStore,
    TransactionalCoordinator,
    TransactionalEmitter,
    TransactionalSpout,
    TransactionalTopologyBuilder,
    TransactionalValue,
)

from .counting import COMMITS, EMITS, LOGS, build


def make_log(name: str, seed: int, partitions: int, size: int) -> tuple[int, int]:
    rng = random.Random(seed)
    LOGS[name] = [
        [rng.randrange(1000) for _ in range(rng.randrange(size // 2, size + 1))]
        for _ in range(partitions)
    ]
    values = [v for part in LOGS[name] for v in part]
    return len(values), sum(values)


async def run_until(
    topology: Any, conf: dict[str, Any], state: FileMapState, count: int, timeout: float = 30
) -> None:
    """Run ``topology`` until the stored count reaches ``count``, or fail after ``timeout``
    virtual seconds. It looks at every turn of the loop, so it stops mid-flight: work takes
    no virtual time, and the whole log may be committed within one virtual millisecond."""
    async with run_topology(topology, conf):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            stored = state.multi_get(["count"])[0]
            if stored is not None and stored.value >= count:
                return
            assert loop.time() < deadline, f"stuck at {stored} of {count}"
            await asyncio.sleep(0)


def check_commit_log(name: str) -> list[int]:
    """Commits came strictly in txid order: each new txid is the last one + 1, a repeat is
    a replay of the last (skipped), and every attempt of a txid saw the same batch."""
    log = COMMITS[name]
    applied = [txid for txid, _, _, applied in log if applied]
    assert applied == list(range(1, len(applied) + 1))
    seen: dict[int, tuple[int, int]] = {}
    last = 0
    for txid, count, total, was_applied in log:
        assert txid in (last, last + 1), f"commit {txid} after {last}"
        assert was_applied == (txid == last + 1)
        assert seen.setdefault(txid, (count, total)) == (count, total)
        last = txid
    metas: dict[tuple[int, int], Any] = {}
    for txid, partition, meta, _ in EMITS[name]:
        assert metas.setdefault((txid, partition), meta) == meta, "a replay differed"
    return applied


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 2**16),
    pending=st.integers(1, 4),
    parallelism=st.integers(1, 3),
    fail_rate=st.sampled_from([0.0, 0.003, 0.02]),
    commit_fail_rate=st.sampled_from([0.0, 0.2]),
)
def test_exact_under_random_failures_and_a_restart(
    tmp_path: Path,
    seed: int,
    pending: int,
    parallelism: int,
    fail_rate: float,
    commit_fail_rate: float,
) -> None:
    name = uuid.uuid4().hex
    count, total = make_log(name, seed, partitions=3, size=120)
    store = FileStateStore(tmp_path / name / "state", fsync=False)
    state = FileMapState(tmp_path / name / "count.pickle", fsync=False)
    conf = {
        "topology.max.spout.pending": pending,
        "topology.message.timeout.secs": 5,
        "topology.seed": seed,
    }

    def topology() -> Any:
        return build(
            name,
            store,
            state,
            spout_parallelism=parallelism,
            parallelism=parallelism,
            batch=15,
            fail_rate=fail_rate,
            commit_fail_rate=commit_fail_rate,
            seed=seed,
        )

    async def main() -> None:
        await run_until(topology(), conf, state, count // 2)  # then stop, mid-flight
        await run_until(topology(), conf, state, count)  # and resume

    simulate(main())
    stored = state.multi_get(["count", "total"])
    assert [v.value for v in stored] == [count, total]
    applied = check_commit_log(name)
    assert stored[0].txid == applied[-1]


def test_the_committed_txid_is_persisted_and_a_restart_resumes_after_it(tmp_path: Path) -> None:
    name = uuid.uuid4().hex
    count, total = make_log(name, 3, partitions=2, size=100)
    store = FileStateStore(tmp_path / "state", fsync=False)
    state = FileMapState(tmp_path / "count.pickle", fsync=False)

    async def main() -> None:
        await run_until(build(name, store, state, batch=10), {}, state, 30)
        committed = store.open("count", "coordinator").get_data("currtx") - 1
        before = len(COMMITS[name])
        await run_until(build(name, store, state, batch=10), {}, state, count)
        first_after = COMMITS[name][before][0]
        # the next transaction, or the last one again if its commit was not acked yet
        assert first_after in (committed, committed + 1)

    simulate(main())
    assert state.multi_get(["count", "total"]) == [
        TransactionalValue(check_commit_log(name)[-1], count),
        TransactionalValue(check_commit_log(name)[-1], total),
    ]


def test_batches_are_processed_in_parallel_but_committed_in_order(tmp_path: Path) -> None:
    name = uuid.uuid4().hex
    count, _ = make_log(name, 5, partitions=4, size=200)
    store = FileStateStore(tmp_path / "state", fsync=False)
    state = FileMapState(tmp_path / "count.pickle", fsync=False)
    conf = {"topology.max.spout.pending": 4}

    async def main() -> int:
        topology = build(name, store, state, batch=5)
        async with run_topology(topology, conf) as running:
            (coordinator,) = running.task_objects("log/coordinator").values()
            most = 0
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while (state.multi_get(["count"])[0] or TransactionalValue(0, 0)).value < count:
                most = max(most, len(coordinator._active))
                assert loop.time() < deadline
                await asyncio.sleep(0)
            assert coordinator.committed == list(range(1, len(coordinator.committed) + 1))
            return most

    most_active = simulate(main())
    assert 1 < most_active <= 4
    check_commit_log(name)


@pytest.mark.timeout(30)
def test_an_always_ready_coordinator_with_one_pending_transaction_lets_virtual_time_pass(
    tmp_path: Path,
) -> None:
    # The log's coordinator is always ready: with max.spout.pending 1 each commit's ack
    # starts the next transaction at once, so the loop never waits on a timer. Virtual
    # time must pass all the same (the simulation once spun here for good).
    name = uuid.uuid4().hex
    count, total = make_log(name, 11, partitions=2, size=60)
    store = FileStateStore(tmp_path / "state", fsync=False)
    state = FileMapState(tmp_path / "count.pickle", fsync=False)

    async def main() -> tuple[list[int], float]:
        topology = build(name, store, state, batch=10)
        async with run_topology(topology, {"topology.max.spout.pending": 1}) as running:
            loop = asyncio.get_running_loop()
            await advance_time(0.05)
            (coordinator,) = running.task_objects("log/coordinator").values()
            return list(coordinator.committed), loop.time()

    committed, now = simulate(main())
    assert now == pytest.approx(0.05, abs=0.002)
    assert [v.value for v in state.multi_get(["count", "total"])] == [count, total]
    assert committed == check_commit_log(name)
    # The log's 6 transactions, then empty ones: 1,000 busy turns are free, then each
    # costs 1 ms, so 0.05 s is some 1,050 turns (the loop once spun here for good).
    assert 12 < len(committed) < 1_000


class _EveryOtherCall(TransactionalCoordinator):
    """Ready on every second call only, as a source whose data comes and goes between
    two calls: a transaction may find it not ready and the next one ready."""

    def __init__(self) -> None:
        self.calls = 0

    def is_ready(self) -> bool:
        self.calls += 1
        return self.calls % 2 == 0

    def initialize_transaction(self, txid: int, prev: Any) -> Any:
        return txid


class _OneTuple(TransactionalEmitter):
    def emit_batch(self, tx: Any, meta: Any, collector: Any) -> None:
        collector.emit([tx, meta])


class _Flickering(TransactionalSpout):
    def get_coordinator(self, conf: Any, context: Any) -> TransactionalCoordinator:
        return _EveryOtherCall()

    def get_emitter(self, conf: Any, context: Any) -> TransactionalEmitter:
        return _OneTuple()

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["tx", "n"])


class _Drop(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        pass

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["tx"])


def test_a_coordinator_not_ready_for_one_txid_starts_no_later_one() -> None:
    # With three transactions allowed, the coordinator once asked is_ready for each txid
    # in turn: "no" for txid 2 and "yes" for txid 3 initialized 3 before 2, which the
    # ordered metadata refuses (TransactionalStateError on every few next_tuple calls).
    builder = TransactionalTopologyBuilder("flicker", "numbers", _Flickering())
    builder.set_bolt("drop", _Drop()).shuffle_grouping("numbers")

    async def main() -> tuple[list[int], int, list[str]]:
        conf = {"topology.max.spout.pending": 3}
        async with run_topology(builder.build_topology(), conf) as running:
            await advance_time(0.05)
            (coordinator,) = running.task_objects("numbers/coordinator").values()
            info = running.info()
            return list(coordinator.committed), info.error_count, [e.error for e in info.errors]

    committed, error_count, errors = simulate(main())
    assert (error_count, errors) == (0, [])
    assert committed[:5] == [1, 2, 3, 4, 5]
