"""``AckerOps`` (the collectors' pending acker operations) and the ``AckerExecutor`` that
applies them: unit tests against a plain model, apart from the end-to-end acking tests."""

from __future__ import annotations

import asyncio
import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acker_kernel import Op, Outcome
from engine._execution.acker import (
    _SMALL,
    ACKED,
    FAILED,
    TIMED_OUT,
    AckerExecutor,
    AckerOps,
    scan_queued_roots,
)
from engine._execution.channel import Inbox
from engine._execution.control import Completions
from engine._time.virtual import clock_for_running_loop
from engine.testing import simulate

U64 = st.integers(0, 2**64 - 1)
KINDS = ("init", "ack", "fail", "reset")


def append(ops: AckerOps, kind: str, root: int, val: int = 0, task: int = 0, at: int = 0) -> None:
    """What the collectors do: one list append per field of the operation."""
    if kind == "init":
        ops.init_roots.append(root)
        ops.init_vals.append(val)
        ops.init_tasks.append(task)
        ops.init_times.append(at)
    elif kind == "ack":
        ops.ack_roots.append(root)
        ops.ack_vals.append(val)
    elif kind == "fail":
        ops.fail_roots.append(root)
    else:
        ops.reset_roots.append(root)


def test_take_groups_the_kinds_in_storms_order_and_empties_the_lists() -> None:
    ops = AckerOps()
    append(ops, "ack", 7, 0b101)
    append(ops, "reset", 9)
    append(ops, "init", 7, 0b110, task=3)
    append(ops, "fail", 8)
    append(ops, "init", 8, 0b1, task=4)
    assert len(ops) == 5
    kinds, roots, vals, tasks = ops.take()
    assert kinds.tolist() == [Op.INIT, Op.INIT, Op.ACK, Op.FAIL, Op.RESET]
    assert roots.tolist() == [7, 8, 7, 8, 9]
    assert vals.tolist() == [0b110, 0b1, 0b101, 0, 0]
    assert tasks.tolist() == [3, 4, 0, 0, 0]
    assert (kinds.dtype, roots.dtype, vals.dtype, tasks.dtype) == (
        np.uint8,
        np.uint64,
        np.uint64,
        np.int32,
    )
    assert len(ops) == 0
    for name in AckerOps.__slots__:
        assert getattr(ops, name) == [], name


def test_array_chunks_follow_the_lists_and_carry_emit_times() -> None:
    ops = AckerOps()
    big = _SMALL + 1  # a few values go to the lists (below); more stay arrays
    inits = np.arange(20, 20 + big, dtype=np.uint64)
    append(ops, "init", 7, 0b110, task=3, at=11)
    ops.add_inits(inits, np.arange(1, 1 + big, dtype=np.uint64), 5, 99)
    ops.add_acks(inits, np.ones(big, np.uint64))
    ops.add_fails(inits)
    ops.add_resets(np.full(big, 7, np.uint64))
    ops.add_acks(np.zeros(0, np.uint64), np.zeros(0, np.uint64))  # nothing: no chunk
    assert len(ops) == 5
    kinds, roots, vals, tasks, starts = ops.take_with_starts()
    n = 1 + 4 * big
    assert (
        kinds.tolist()
        == [Op.INIT] * (1 + big) + [Op.ACK] * big + [Op.FAIL] * big + [Op.RESET] * big
    )
    assert roots.tolist() == [7, *inits.tolist() * 3, *[7] * big]
    assert vals.tolist() == [0b110, *range(1, 1 + big), *[1] * big, *[0] * (2 * big)]
    assert tasks.tolist() == [3, *[5] * big, *[0] * (3 * big)]
    assert starts.tolist() == [11, *[99] * big, *[0] * (3 * big)]
    assert roots.shape == (n,)
    assert len(ops) == 0 and ops.chunks == []


def test_a_few_array_operations_join_the_lists() -> None:
    ops = AckerOps()
    append(ops, "init", 7, 0b110, task=3, at=11)
    ops.add_inits(np.array([20, 21], np.uint64), np.array([1, 2], np.uint64), 5, 99)
    ops.add_acks(np.array([20], np.uint64), np.array([1], np.uint64))
    ops.add_fails(np.array([21], np.uint64))
    ops.add_resets(np.array([7], np.uint64))
    assert ops.chunks == []
    kinds, roots, vals, tasks, starts = ops.take_with_starts()
    assert kinds.tolist() == [Op.INIT, Op.INIT, Op.INIT, Op.ACK, Op.FAIL, Op.RESET]
    assert roots.tolist() == [7, 20, 21, 20, 21, 7]
    assert vals.tolist() == [0b110, 1, 2, 1, 0, 0]
    assert tasks.tolist() == [3, 5, 5, 0, 0, 0]
    assert starts.tolist() == [11, 99, 99, 0, 0, 0]


def test_take_of_nothing_is_four_empty_arrays() -> None:
    arrays = AckerOps().take()
    assert [a.shape for a in arrays] == [(0,)] * 4


def test_the_full_64_bit_range_survives_the_conversion() -> None:
    ops = AckerOps()
    top = 2**64 - 1
    append(ops, "init", top, 2**63, task=2**31 - 1)
    append(ops, "ack", 1, top)
    append(ops, "fail", 2**63 + 5)
    _, roots, vals, tasks = ops.take()
    assert roots.tolist() == [top, 1, 2**63 + 5]
    assert vals.tolist() == [2**63, top, 0]
    assert tasks.tolist() == [2**31 - 1, 0, 0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(KINDS), U64, U64, st.integers(0, 2**31 - 1))))
def test_take_is_the_appended_operations_grouped_by_kind_in_order(
    appended: list[tuple[str, int, int, int]],
) -> None:
    ops = AckerOps()
    for kind, root, val, task in appended:
        append(ops, kind, root, val, task)
    assert len(ops) == len(appended)
    kinds, roots, vals, tasks = ops.take()
    code = {"init": Op.INIT, "ack": Op.ACK, "fail": Op.FAIL, "reset": Op.RESET}
    expected = [
        (
            int(code[kind]),
            root,
            val if kind in ("init", "ack") else 0,
            task if kind == "init" else 0,
        )
        for wanted in KINDS
        for kind, root, val, task in appended
        if kind == wanted
    ]
    got = list(zip(kinds.tolist(), roots.tolist(), vals.tolist(), tasks.tolist(), strict=True))
    assert got == expected
    assert len(ops) == 0


# --- the executor ------------------------------------------------------------------------------


def executor(
    ackers: int, queued: list[int] | None = None, timeout_ns: int = 1000
) -> tuple[AckerExecutor, dict[int, Inbox]]:
    inboxes = {task: Inbox(8) for task in (1, 2)}
    waiting = queued if queued is not None else []  # the roots of tuples still in queues
    ex = AckerExecutor(
        ackers,
        timeout_ns,
        True,
        spout_inboxes=inboxes,
        queued_roots=lambda: np.array(waiting, np.uint64),
    )
    return ex, inboxes


def completions(inbox: Inbox) -> dict[int, int]:
    """root -> outcome, from the control lane of a spout task's inbox."""
    seen: dict[int, int] = {}
    for _, roots, outcomes, *_ in inbox.control:  # (task, roots, outcomes, emit times)
        seen.update(zip(roots, outcomes, strict=True))
    return seen


@pytest.mark.parametrize("ackers", [1, 3])
def test_flush_completes_trees_and_routes_them_to_their_spout_tasks(ackers: int) -> None:
    ex, inboxes = executor(ackers)
    roots = list(range(100, 112))
    for i, root in enumerate(roots):
        task = 1 + i % 2
        append(ex.ops, "init", root, 0b11, task)  # two tuples in the tree
        append(ex.ops, "ack", root, 0b01)
    assert ex.flush(now_ns=0) == 24
    assert ex.pending == len(roots)
    assert all(not inbox.control for inbox in inboxes.values())
    for root in roots:
        if root % 4 == 0:
            append(ex.ops, "fail", root)
        else:
            append(ex.ops, "ack", root, 0b10)
    assert ex.flush(now_ns=10) == len(roots)
    assert ex.flush(now_ns=11) == 0  # nothing left to apply
    assert ex.pending == 0
    expected = {r: FAILED if r % 4 == 0 else ACKED for r in roots}
    for task, inbox in inboxes.items():
        mine = {r: o for i, (r, o) in enumerate(expected.items()) if 1 + i % 2 == task}
        assert completions(inbox) == mine


def test_expire_times_out_stuck_trees_but_resets_those_still_queued() -> None:
    queued = [5]
    ex, inboxes = executor(2, queued)
    for root in (4, 5, 6):
        append(ex.ops, "init", root, 1, task=1)
    ex.flush(now_ns=0)
    ex.expire(now_ns=999)  # not due yet
    assert not inboxes[1].control and ex.pending == 3
    ex.expire(now_ns=1000)
    assert completions(inboxes[1]) == {4: TIMED_OUT, 6: TIMED_OUT}
    assert ex.pending == 1 and ex.protected == 1  # 5 is queued: its deadline moved
    ex.expire(now_ns=1999)
    assert ex.pending == 1
    queued.clear()  # its tuple left the queue, into a bolt that never acks
    ex.expire(now_ns=2000)
    assert completions(inboxes[1])[5] == TIMED_OUT and ex.pending == 0
    assert int(Outcome.TIMED_OUT) == TIMED_OUT


def test_a_queued_tree_is_protected_only_while_younger_than_two_timeouts() -> None:
    ex, inboxes = executor(1, [5])  # root 5 is queued for good (round a cycle, say)
    append(ex.ops, "init", 5, 1, task=1, at=0)
    ex.flush(now_ns=0)
    ex.expire(now_ns=1000)  # due at one timeout, 1000 ns old: protected
    assert ex.pending == 1 and (ex.protected, ex.timed_out_queued) == (1, 0)
    ex.expire(now_ns=1999)
    assert ex.pending == 1
    ex.expire(now_ns=2000)  # due again, 2000 ns old: two timeouts, no longer protected
    assert completions(inboxes[1]) == {5: TIMED_OUT} and ex.pending == 0
    assert (ex.protected, ex.timed_out_queued) == (1, 1)


@pytest.mark.parametrize("ackers", [1, 2])
def test_the_executors_protects_reset_young_trees_only(ackers: int) -> None:
    ex, inboxes = executor(ackers)
    for root, emitted in ((4, 0), (5, 0), (6, 1500), (7, 1500)):
        append(ex.ops, "init", root, 1, task=1, at=emitted)
    ex.flush(now_ns=1600)  # deadlines 2600
    ex.ops.add_protects(np.array([4, 6], np.uint64))  # waited in a queue (a batch)...
    ex.ops.protect_roots.extend([5, 7])  # ... or per tuple
    ex.ops.add_protects(np.zeros(0, np.uint64))  # nothing: no chunk
    assert len(ex.ops) == 3
    assert ex.flush(now_ns=2100) == 4  # 4 and 5 are 2100 ns old: not reset
    assert len(ex.ops) == 0 and ex.ops.protect_chunks == []
    ex.expire(now_ns=2600)
    assert completions(inboxes[1]) == {4: TIMED_OUT, 5: TIMED_OUT}
    inboxes[1].control.clear()
    ex.expire(now_ns=3099)
    assert ex.pending == 2  # 6 and 7 were reset at 2100: due at 3100
    ex.expire(now_ns=3100)
    assert completions(inboxes[1]) == {6: TIMED_OUT, 7: TIMED_OUT}
    assert ex.protected == 0  # counts the sweep's own resets only


def test_a_completion_for_a_spout_task_that_is_gone_is_dropped() -> None:
    ex, inboxes = executor(1)
    append(ex.ops, "init", 9, 1, task=77)
    append(ex.ops, "ack", 9, 1)
    ex.flush(now_ns=0)
    assert ex.pending == 0
    assert all(not inbox.control for inbox in inboxes.values())


# --- the acker coroutine, its wake-up and the queued-roots scan ---------------------------------


class Holder:
    """An executor's view for the scan: the roots of the tuples it holds."""

    def __init__(self, roots: list[int], arrays: list[list[int]]) -> None:
        self.roots = roots
        self.arrays = arrays

    def queued_roots(self, roots: list[int], arrays: list[np.ndarray]) -> None:
        roots.extend(self.roots)
        arrays.extend(np.array(a, np.uint64) for a in self.arrays)


def test_scan_queued_roots_gathers_every_holders_roots() -> None:
    found = scan_queued_roots([Holder([1, 2], []), Holder([], [[3, 4]]), Holder([5], [[6]])])
    assert found.dtype == np.uint64
    assert sorted(found.tolist()) == [1, 2, 3, 4, 5, 6]
    assert scan_queued_roots([]).shape == (0,)


def test_the_acker_coroutine_applies_ops_when_notified_and_sweeps_on_its_clock() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        clock = clock_for_running_loop()
        ex = AckerExecutor(1, int(10e9), True)  # a 10 s message timeout
        spout = Inbox(8)
        ex.register_spout(1, spout)
        task = loop.create_task(ex.run(clock, sweep_secs=1.0))
        await asyncio.sleep(0)
        append(ex.ops, "init", 7, 0b11, task=1, at=clock.now_ns())
        append(ex.ops, "init", 8, 0b1, task=1, at=clock.now_ns())
        append(ex.ops, "ack", 7, 0b11)
        ex.notify()
        ex.notify()  # woken once: the second is a no-op until the acker ran
        await asyncio.sleep(0.001)
        assert len(ex.ops) == 0 and ex.pending == 1
        (done,) = spout.control
        assert isinstance(done, Completions)
        assert (done.task, done.roots.tolist(), done.outcomes.tolist()) == (1, [7], [ACKED])
        assert (done.roots.dtype, done.outcomes.dtype) == (np.uint64, np.uint8)
        assert done.acked_emitted_ns is not None and done.acked_emitted_ns.shape == (1,)
        spout.control.clear()
        await asyncio.sleep(10.5)  # 8 is due; the next sweep (each second) times it out
        assert [(c.roots.tolist(), c.outcomes.tolist()) for c in spout.control] == [
            ([8], [TIMED_OUT])
        ]
        assert ex.pending == 0
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    simulate(scenario())


def test_notify_without_pending_ops_does_not_wake_the_acker() -> None:
    ex = AckerExecutor(1, 1000, True)
    ex.notify()
    assert not ex._notified
    append(ex.ops, "fail", 3)
    ex.notify()
    assert ex._notified
