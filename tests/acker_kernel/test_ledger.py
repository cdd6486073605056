"""``AckerLedger``: Storm's acker rules, edge cases and input validation, each example also
checked against the reference model in ``naive.py``."""

from __future__ import annotations

import dataclasses
import doctest
import itertools
import mmap
import os
import re
import resource
import threading

import numpy as np
import pytest

import acker_kernel
from acker_kernel import (
    INITIAL_CAPACITY,
    MAX_LOAD_FACTOR,
    MIN_LOAD_FACTOR,
    AckerLedger,
    LedgerStatistics,
    Op,
    Outcome,
    _ledger,
)

from .naive import (
    U64_MAX,
    Completion,
    Message,
    NaiveLedger,
    as_arrays,
    assert_same,
    colliding_roots,
    completions,
    home_slot,
)

T = 1_000  # timeout, ns
INIT, ACK, FAIL, RESET = (int(op) for op in Op)
ACKED, FAILED, TIMED_OUT = (int(o) for o in Outcome)


def latencies(done: list[Completion], now: int) -> list[Completion]:
    """Completions with their start times as the latency a spout hearing them now sees."""
    return [(root, task, outcome, now - start) for root, task, outcome, start in done]


class Pair:
    """The kernel and the model side by side: every call is made on both and compared.
    Completions come back with latencies (``now - start``), as a spout would measure them."""

    def __init__(self, timeout_ns: int = T, initial_capacity: int = 16) -> None:
        self.ledger = AckerLedger(timeout_ns, initial_capacity=initial_capacity)
        self.model = NaiveLedger(timeout_ns)

    def apply(self, messages: list[Message], now: int) -> list[tuple[int, int, int, int]]:
        got = completions(self.ledger.apply(*as_arrays(messages), now_ns=now))
        assert got == self.model.apply(messages, now)
        assert_same(self.ledger, self.model)
        return latencies(got, now)

    def reset_younger(self, roots: list[int], now: int, max_age: int) -> int:
        got = self.ledger.reset_younger(np.array(roots, np.uint64), now, max_age)
        assert got == self.model.reset_younger(roots, now, max_age)
        assert_same(self.ledger, self.model)
        return got

    def expire(self, now: int) -> list[tuple[int, int, int, int]]:
        assert sorted(self.ledger.due(now).tolist()) == self.model.due(now)
        got = sorted(completions(self.ledger.expire(now)))
        assert got == self.model.expire(now)
        assert_same(self.ledger, self.model)
        return latencies(got, now)


# --- Storm's rules -------------------------------------------------------------------------


def test_docstring_example_runs() -> None:
    assert doctest.testmod(_ledger).failed == 0


def test_a_tree_completes_when_its_xor_reaches_zero() -> None:
    p = Pair()
    a, b, c = 0x1111, 0x2222, 0x4444
    assert p.apply([(INIT, 7, a ^ b, 3)], now=100) == []
    # The bolt that got `a` emits `c` anchored to it and acks: id a ^ ack_val c.
    assert p.apply([(ACK, 7, a ^ c, 0), (ACK, 7, b, 0)], now=150) == []
    assert p.apply([(ACK, 7, c, 0)], now=400) == [(7, 3, ACKED, 300)]
    assert p.ledger.statistics().acked == 1
    assert len(p.ledger) == 0


def test_an_ack_may_arrive_before_its_init() -> None:
    p = Pair()
    assert p.apply([(ACK, 9, 0xF0, 0)], now=10) == []
    # Latency counts from the entry's creation, like Storm's AckObject.
    assert p.apply([(INIT, 9, 0xF0, 2)], now=50) == [(9, 2, ACKED, 40)]


def test_a_root_is_reported_only_once_its_spout_task_is_known() -> None:
    p = Pair()
    p.apply([(ACK, 5, 0xAB, 0), (ACK, 5, 0xAB, 0)], now=0)  # value back to 0, spout unknown
    assert p.ledger.statistics().pending == 1
    assert p.apply([(INIT, 5, 0, 4)], now=20) == [(5, 4, ACKED, 20)]


def test_a_spout_tuple_without_subscribers_is_acked_at_once() -> None:
    p = Pair()
    assert p.apply([(INIT, 11, 0, 1)], now=5) == [(11, 1, ACKED, 0)]


def test_a_fail_is_reported_at_once_and_late_acks_become_orphans() -> None:
    p = Pair()
    p.apply([(INIT, 3, 0b11, 6)], now=0)
    assert p.apply([(FAIL, 3, 0, 0)], now=10) == [(3, 6, FAILED, 10)]
    # The rest of the tree still acks: a new entry whose spout is never known...
    assert p.apply([(ACK, 3, 0b01, 0), (ACK, 3, 0b10, 0)], now=20) == []
    assert p.ledger.due(20 + T).tolist() == []  # ...is never due...
    assert p.expire(20 + T) == []  # ...and leaves quietly: no phantom completion.
    assert p.ledger.statistics().orphans == 1


def test_a_fail_before_the_init_is_reported_with_the_init() -> None:
    p = Pair()
    assert p.apply([(FAIL, 8, 0, 0)], now=100) == []
    assert p.apply([(INIT, 8, 0x5, 2)], now=130) == [(8, 2, FAILED, 30)]


def test_a_failure_wins_over_a_zero_value() -> None:
    # Deliberate (Storm checks the zero value first): a tuple both acked and failed is
    # replayed rather than silently counted as done.
    p = Pair()
    done = p.apply([(ACK, 4, 0x9, 0), (FAIL, 4, 0, 0), (INIT, 4, 0x9, 1)], now=0)
    assert done == [(4, 1, FAILED, 0)]


def test_reset_pushes_the_deadline() -> None:
    p = Pair()
    p.apply([(INIT, 1, 0x1, 1)], now=0)
    p.apply([(RESET, 1, 0, 0)], now=50)
    assert p.expire(T) == []
    assert p.expire(50 + T - 1) == []
    assert p.expire(50 + T) == [(1, 1, TIMED_OUT, 50 + T)]
    assert p.ledger.statistics().timed_out == 1


def test_reset_younger_pushes_only_the_deadlines_of_young_trees() -> None:
    p = Pair()
    starts = np.array([0, 300, 600], np.int64)  # the emit times the INITs carry
    ops, roots, values, tasks = as_arrays([(INIT, r, 0x1, 1) for r in (1, 2, 3)])
    p.ledger.apply(ops, roots, values, tasks, now_ns=600, start_ns=starts)
    p.model.apply([(INIT, r, 0x1, 1) for r in (1, 2, 3)], 600)
    for root, start in zip((1, 2, 3), starts.tolist(), strict=True):
        p.model.entries[root].start = start
    assert_same(p.ledger, p.model)
    # At 900 the trees are 900, 600 and 300 ns old: under 600 is only root 3, and root 77
    # is unknown (it creates nothing); a repeat counts again.
    assert p.reset_younger([1, 2, 3, 77, 3], now=900, max_age=600) == 2
    assert p.reset_younger([1, 2], now=900, max_age=601) == 1
    assert p.reset_younger([1, 2, 3], now=900, max_age=0) == 0
    assert p.expire(600 + T) == [(1, 1, TIMED_OUT, 600 + T)]
    assert p.expire(900 + T) == [(2, 1, TIMED_OUT, 600 + T), (3, 1, TIMED_OUT, 300 + T)]


def test_reset_younger_on_an_empty_ledger_or_with_no_roots() -> None:
    p = Pair()
    assert p.reset_younger([5], now=0, max_age=T) == 0
    p.apply([(INIT, 5, 0x1, 1)], now=0)
    assert p.reset_younger([], now=10, max_age=T) == 0
    assert p.reset_younger([5], now=2**62, max_age=2**63 - 1) == 1  # no overflow


def test_bad_reset_younger_arguments_are_named() -> None:
    ledger = AckerLedger(T)
    roots = np.array([1], np.uint64)
    with pytest.raises(ValueError, match=r"^max_age_ns must be >= 0, got -1$"):
        ledger.reset_younger(roots, 0, -1)
    with pytest.raises(TypeError, match=r"^max_age_ns must be an integer, got float$"):
        ledger.reset_younger(roots, 0, 1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^roots must have dtype uint64, got int64$"):
        ledger.reset_younger(np.array([1]), 0, 1)
    with pytest.raises(TypeError, match=r"^now_ns must be an integer, got float$"):
        ledger.reset_younger(roots, 0.5, 1)  # type: ignore[arg-type]


def test_reset_of_an_unknown_root_creates_nothing() -> None:
    p = Pair()
    assert p.apply([(RESET, 77, 0, 0)], now=0) == []
    assert len(p.ledger) == 0


def test_a_fail_pushes_the_deadline_of_a_root_waiting_for_its_init() -> None:
    p = Pair()
    p.apply([(ACK, 2, 0x3, 0)], now=0)
    p.apply([(FAIL, 2, 0, 0)], now=400)
    assert p.ledger.snapshot().deadline_ns.tolist() == [400 + T]


def test_expire_takes_deadlines_at_or_before_now() -> None:
    p = Pair()
    p.apply([(INIT, 1, 0x1, 1), (INIT, 2, 0x2, 2)], now=0)
    p.apply([(INIT, 3, 0x3, 3)], now=10)
    assert p.expire(T - 1) == []
    assert p.ledger.due(T).tolist() in ([1, 2], [2, 1])
    assert p.expire(T) == [(1, 1, TIMED_OUT, T), (2, 2, TIMED_OUT, T)]
    assert p.expire(T + 10) == [(3, 3, TIMED_OUT, T)]


def test_due_lists_known_roots_without_removing_them() -> None:
    p = Pair()
    p.apply([(INIT, 1, 0x1, 1), (ACK, 2, 0x2, 0)], now=0)
    assert p.ledger.due(T).tolist() == [1]
    assert len(p.ledger) == 2


def test_time_may_go_backwards() -> None:
    # A sweep remembers the earliest deadline left; an entry created "earlier" afterwards
    # must still be found.
    p = Pair()
    p.apply([(INIT, 1, 0x1, 1)], now=10_000)
    assert p.expire(5_000) == []
    p.apply([(INIT, 2, 0x2, 2)], now=0)
    assert p.expire(T) == [(2, 2, TIMED_OUT, T)]


def test_a_reset_younger_on_a_clock_stepped_back_is_still_swept() -> None:
    # The reset gives root 1 the deadline 5_000 + T, before the earliest one the ledger
    # knew of (10_000 + T): a sweep between the two must not skip the table.
    p = Pair()
    p.apply([(INIT, 1, 0x1, 1)], now=10_000)
    assert p.reset_younger([1], now=5_000, max_age=T) == 1
    assert p.ledger.due(5_000 + T).tolist() == [1]
    assert p.expire(5_000 + T) == [(1, 1, TIMED_OUT, -5_000 + T)]


# --- edge cases ------------------------------------------------------------------------------


def test_empty_batches_and_an_empty_ledger() -> None:
    p = Pair()
    assert p.apply([], now=0) == []
    assert p.expire(10**12) == []
    assert p.ledger.due(10**12).dtype == np.uint64
    done = p.ledger.expire(10**12)
    assert len(done) == 0
    assert done.outcome.dtype == np.uint8
    assert p.ledger.statistics() == LedgerStatistics(
        pending=0,
        capacity=16,
        bytes_used=p.ledger.statistics().bytes_used,
        acked=0,
        failed=0,
        timed_out=0,
        orphans=0,
        rehashes=0,
    )


def test_duplicate_roots_within_one_batch_apply_in_order() -> None:
    p = Pair()
    done = p.apply(
        [
            (ACK, 1, 0x5, 0),
            (INIT, 1, 0x6, 9),  # value 0x3 left
            (ACK, 1, 0x3, 0),  # completes here...
            (ACK, 1, 0x3, 0),  # ...so this one starts an orphan...
            (INIT, 1, 0x3, 8),  # ...which a reused root id completes.
            (FAIL, 2, 0, 0),
            (RESET, 2, 0, 0),
            (INIT, 2, 0x1, 7),
            (ACK, 2, 0x1, 0),  # a new entry again: root 2 was failed just before
        ],
        now=42,
    )
    assert done == [(1, 9, ACKED, 0), (1, 8, ACKED, 0), (2, 7, FAILED, 0)]
    assert len(p.ledger) == 1


@pytest.mark.parametrize("root", [0, 1, 2**63, U64_MAX])
def test_every_uint64_is_a_root_id(root: int) -> None:
    p = Pair()
    p.apply([(INIT, root, 0xAA, 1), (ACK, root ^ 1, 0xBB, 0)], now=0)
    assert sorted(p.ledger.snapshot().root.tolist()) == sorted([root, root ^ 1])
    assert p.apply([(ACK, root, 0xAA, 0)], now=5) == [(root, 1, ACKED, 5)]
    assert p.ledger.snapshot().root.tolist() == [root ^ 1]


def test_zero_and_max_root_ids_side_by_side() -> None:
    p = Pair()
    p.apply([(INIT, 0, 0x1, 1), (INIT, U64_MAX, 0x2, 2), (ACK, 0, 0x2, 0)], now=0)
    assert p.apply([(ACK, U64_MAX, 0x2, 0), (ACK, 0, 0x3, 0)], now=1) == [
        (U64_MAX, 2, ACKED, 1),
        (0, 1, ACKED, 1),
    ]


@pytest.mark.parametrize("bucket", [0, 7, 15])  # 15: the run wraps around the table's end
def test_roots_sharing_one_bucket(bucket: int) -> None:
    roots = colliding_roots(bucket, 11, 16)  # 11 < 16 * 0.75: all stay in one table
    assert {home_slot(r, 16) for r in roots} == {bucket}
    p = Pair()
    p.apply([(INIT, r, i + 1, i) for i, r in enumerate(roots)], now=0)
    assert p.ledger.statistics().capacity == 16
    # Complete them from the middle of the run outwards: every removal shifts the run back.
    order = [5, 0, 10, 6, 4, 1, 9, 2, 8, 3, 7]
    for n, i in enumerate(order):
        assert p.apply([(ACK, roots[i], i + 1, 0)], now=n + 1) == [(roots[i], i, ACKED, n + 1)]


def test_every_removal_order_around_the_tables_end() -> None:
    # Runs from buckets 14, 15, 0 and 1 merge and wrap past the last slot; removing in any
    # order must shift exactly the right entries back.
    roots = (
        colliding_roots(14, 3, 16)
        + colliding_roots(15, 1, 16, first=7)
        + colliding_roots(0, 2, 16)
        + colliding_roots(1, 1, 16)
    )
    for order in itertools.permutations(range(len(roots))):
        ledger = AckerLedger(T, initial_capacity=16)
        ledger.apply(*as_arrays([(INIT, r, 1, i) for i, r in enumerate(roots)]), now_ns=0)
        for i in order:
            done = ledger.apply(*as_arrays([(ACK, roots[i], 1, 0)]), now_ns=0)
            assert completions(done) == [(roots[i], i, ACKED, 0)], order
        assert len(ledger) == 0


def test_colliding_roots_survive_growth_and_shrinking() -> None:
    roots = colliding_roots(15, 200, 16)
    p = Pair()
    p.apply([(ACK, r, 1, 0) for r in roots], now=0)
    assert p.ledger.statistics().capacity == 512
    assert p.apply([(INIT, r, 1, 3) for r in roots[::2]], now=1) == [
        (r, 3, ACKED, 1) for r in roots[::2]
    ]
    assert p.expire(T) == []  # the other half: orphans
    assert p.ledger.statistics().capacity == 16


def test_capacity_exhaustion_grows_the_table() -> None:
    p = Pair()
    limit = int(16 * MAX_LOAD_FACTOR)
    p.apply([(INIT, r, 0xF, 1) for r in range(limit)], now=0)
    assert p.ledger.statistics().capacity == 16
    p.apply([(INIT, limit, 0xF, 1)], now=0)
    stats = p.ledger.statistics()
    assert (stats.capacity, stats.rehashes) == (32, 1)
    p.apply([(INIT, r, 0xF, 1) for r in range(limit + 1, 1000)], now=0)
    assert p.ledger.statistics().capacity == 2048  # 1000 / 0.75 > 1024
    assert p.ledger.statistics().rehashes == 7


def test_growth_in_the_middle_of_a_batch_keeps_the_order() -> None:
    p = Pair()
    messages: list[Message] = []
    for r in range(40):
        messages.append((INIT, r, 0x7, 1))
        if r % 3 == 0:
            messages.append((ACK, r - 3 if r >= 3 else r, 0x7, 0))
    p.apply(messages, now=0)
    assert p.ledger.statistics().rehashes >= 2


def test_the_table_shrinks_back_after_a_burst() -> None:
    p = Pair()
    p.apply([(INIT, r, 0x1, 1) for r in range(5_000)], now=0)
    burst = p.ledger.statistics()
    assert burst.capacity == 8192
    p.apply([(ACK, r, 0x1, 0) for r in range(4_994)], now=1)  # 6 left: 16 slots suffice
    after = p.ledger.statistics()
    assert after.capacity == 16
    assert after.rehashes == burst.rehashes + 1  # one resize straight down, not nine
    assert after.bytes_used < burst.bytes_used // 100


def test_the_table_never_shrinks_below_its_initial_capacity() -> None:
    p = Pair(initial_capacity=1024)
    p.apply([(INIT, r, 0x1, 1) for r in range(2_000)], now=0)
    p.expire(T)
    stats = p.ledger.statistics()
    assert (stats.capacity, stats.timed_out) == (1024, 2_000)


def test_a_kept_capacity_between_two_sizes_keeps_the_larger() -> None:
    # Grown past 100 slots (to 128), the table must not shrink below 100: to 64 it would
    # regrow and shrink again with every wave.
    p = Pair()
    p.ledger = AckerLedger(T, initial_capacity=16, keep_capacity=100)
    p.apply([(INIT, r, 0x1, 1) for r in range(1, 91)], now=0)
    assert p.ledger.statistics().capacity == 128
    p.apply([(ACK, r, 0x1, 0) for r in range(1, 91)], now=1)
    assert p.ledger.statistics().capacity == 128
    assert p.ledger.statistics().rehashes == 3  # 16 -> 32 -> 64 -> 128, and no more


def test_a_shrunk_table_stays_out_of_the_shrink_zone() -> None:
    # After shrinking, the load sits between MIN_LOAD_FACTOR and MAX_LOAD_FACTOR / 2, so
    # neither the next op nor a small burst resizes again.
    p = Pair()
    p.apply([(INIT, r, 0x1, 1) for r in range(3_000)], now=0)
    p.apply([(ACK, r, 0x1, 0) for r in range(2_700)], now=1)
    stats = p.ledger.statistics()
    assert MIN_LOAD_FACTOR <= stats.pending / stats.capacity <= MAX_LOAD_FACTOR / 2


def test_a_large_ledger_grows_into_a_table_made_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every table counts as large here: each growth past half full makes the next table on
    # a thread, and the grow takes it; a shrink drops an unfinished one without waiting.
    monkeypatch.setattr(_ledger, "AHEAD_MIN_BYTES", 0)
    taken: list[tuple[int, bool]] = []
    take = _ledger._TableAhead.take

    def spy(self: _ledger._TableAhead, capacity: int) -> np.ndarray | None:
        table = take(self, capacity)
        taken.append((capacity, table is not None))
        return table

    monkeypatch.setattr(_ledger._TableAhead, "take", spy)
    p = Pair()
    for start in range(0, 3_000, 100):  # growing: 16 -> 4096 slots
        p.apply([(INIT, r, 0x5, 1) for r in range(start, start + 100)], now=0)
    assert p.ledger.statistics().capacity == 4096
    assert taken[-3:] == [(1024, True), (2048, True), (4096, True)]
    p.ledger._make_ahead()  # one more, for 8192 slots: the shrink below drops it
    p.apply([(ACK, r, 0x5, 0) for r in range(3_000)], now=1)
    assert taken[-1] == (16, False) and p.ledger._ahead is None
    assert p.ledger.statistics().capacity == 16


def test_a_ledger_that_stays_where_it_grew_to_makes_no_table_ahead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Grown to 4096 slots at 1,537 trees, it holds 1,700: past half of where it grows
    # (3,072), not yet past the three quarters at which the next table is made ahead.
    monkeypatch.setattr(_ledger, "AHEAD_MIN_BYTES", 0)
    p = Pair()
    for start in range(0, 1_700, 100):
        p.apply([(INIT, r, 0x5, 1) for r in range(start, start + 100)], now=0)
    assert p.ledger.statistics().capacity == 4096 and p.ledger._ahead is None
    p.apply([(INIT, r, 0x5, 1) for r in range(1_700, 2_400)], now=0)
    assert p.ledger._ahead is not None  # 2,400 > 2,304: on its way to 8,192 slots


def test_a_large_table_shrinks_after_staying_nearly_empty_or_once_empty(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_ledger, "AHEAD_MIN_BYTES", 0)  # every table counts as large
    wait = _ledger.LARGE_SHRINK_AFTER_NS
    p = Pair(timeout_ns=10 * wait)
    p.apply([(INIT, r, 0x1, 1) for r in range(5_000)], now=0)
    assert p.ledger.statistics().capacity == 8192
    p.apply([(ACK, r, 0x1, 0) for r in range(4_990)], now=1)  # a wave let go
    assert p.ledger.statistics().capacity == 8192
    p.apply([(INIT, r, 0x1, 1) for r in range(5_000, 5_010)], now=wait)  # still low
    assert p.ledger.statistics().capacity == 8192
    p.apply([(INIT, r, 0x1, 1) for r in range(5_010, 5_020)], now=wait + 1)  # long enough
    assert p.ledger.statistics().capacity == 128
    p.apply([(INIT, r, 0x1, 1) for r in range(6_000, 11_000)], now=wait + 2)
    assert p.ledger.statistics().capacity == 8192
    p.apply([(ACK, r, 0x1, 0) for r in range(6_000, 11_000)], now=wait + 3)
    assert p.ledger.statistics().capacity == 8192  # 30 left: a nearly empty table waits...
    p.apply([(ACK, r, 0x1, 0) for r in range(4_990, 5_020)], now=wait + 4)
    assert p.ledger.statistics().capacity == 16  # ...an empty one does not


def test_a_table_mapped_on_its_own_works_as_any() -> None:
    from acker_kernel import _memory

    capacity = 1 << 18  # 10.5 MB: mapped on its own
    assert capacity * _ledger.ENTRY_DTYPE.itemsize >= _memory.OWN_MAPPING_MIN_BYTES
    p = Pair(initial_capacity=capacity)
    owner = p.ledger._table
    while isinstance(owner, np.ndarray):
        owner = owner.base
    assert isinstance(owner, memoryview) and isinstance(owner.obj, mmap.mmap)
    p.apply([(INIT, r, 0x9, 2) for r in range(1, 200)], now=0)
    assert p.apply([(ACK, r, 0x9, 0) for r in range(1, 200, 2)], now=1) == [
        (r, 2, ACKED, 1) for r in range(1, 200, 2)
    ]
    assert p.expire(T) == sorted((r, 2, TIMED_OUT, T) for r in range(2, 200, 2))


def test_zeroed_arrays_small_and_mapped_on_their_own() -> None:
    from acker_kernel import _memory

    for n in (10, _memory.OWN_MAPPING_MIN_BYTES // 8):
        array = acker_kernel.zeroed(n, np.uint64)
        assert array.shape == (n,) and array.dtype == np.uint64 and not array.any()
        assert array.ctypes.data % 64 == 0 and array.flags.writeable
        array[-1] = 7
        assert array.sum() == 7


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_large_zeroed_array_is_private_to_the_process_a_fork_does_not_share_it() -> None:
    from acker_kernel import _memory

    array = acker_kernel.zeroed(_memory.OWN_MAPPING_MIN_BYTES // 8, np.uint64)
    array[0] = 1
    pid = os.fork()
    if pid == 0:  # the child writes into its copy
        array[0] = 99
        array[-1] = 99
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert int(array[0]) == 1 and int(array[-1]) == 0


def _fault_in_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "fault-in"]


def test_zeroed_faulted_in_on_a_thread_keeps_what_the_caller_writes_meanwhile() -> None:
    from acker_kernel import _memory

    n = 4 * _memory.OWN_MAPPING_MIN_BYTES // 8  # 32 MB
    array = acker_kernel.zeroed(n, np.uint64, fault_in_background=True)
    per_page = 4096 // 8
    array[::per_page] = np.arange(1, n // per_page + 1, dtype=np.uint64)  # as it faults in
    for thread in _fault_in_threads():
        thread.join(timeout=30)
    assert not _fault_in_threads()
    assert (array[::per_page] == np.arange(1, n // per_page + 1)).all()
    array[::per_page] = 0
    assert not array.any()
    if _memory._madvise is None:
        return
    # Resident now: touching every page again costs no page fault.
    fresh = acker_kernel.zeroed(n, np.uint64, fault_in_background=True)
    for thread in _fault_in_threads():
        thread.join(timeout=30)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    fresh[::per_page] = 1
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    if _memory._madvise(fresh.ctypes.data, 4096, _memory._MADV_POPULATE_WRITE) == 0:
        assert faults < 16  # against n // per_page = 8192 without


# --- statistics, snapshot, misc ---------------------------------------------------------------


def test_statistics_is_a_frozen_record() -> None:
    ledger = AckerLedger()
    stats = ledger.statistics()
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.pending = 1
    assert [f.name for f in dataclasses.fields(stats)] == [
        "pending",
        "capacity",
        "bytes_used",
        "acked",
        "failed",
        "timed_out",
        "orphans",
        "rehashes",
    ]
    assert stats.capacity == INITIAL_CAPACITY
    assert INITIAL_CAPACITY * 40 <= stats.bytes_used <= INITIAL_CAPACITY * 40 + 256


def test_snapshot_shows_every_field() -> None:
    ledger = AckerLedger(T)
    ledger.apply(*as_arrays([(ACK, 5, 0x3, 0), (FAIL, 6, 0, 0), (INIT, 7, 0x9, 4)]), now_ns=20)
    snap = ledger.snapshot()
    rows = sorted(zip(*(a.tolist() for a in snap), strict=True))
    assert rows == [
        (5, 0x3, -1, False, False, 20 + T, 20),
        (6, 0, -1, False, True, 20 + T, 20),
        (7, 0x9, 4, True, False, 20 + T, 20),
    ]
    assert len(snap) == 3


def test_repr_names_the_size() -> None:
    ledger = AckerLedger(5_000, initial_capacity=64)
    assert repr(ledger) == "AckerLedger(timeout_ns=5000, pending=0, capacity=64)"
    assert ledger.timeout_ns == 5_000


def test_strided_read_only_and_numpy_scalar_inputs() -> None:
    p = Pair()
    ops, roots, values, tasks = as_arrays([(INIT, 1, 0x3, 1), (ACK, 1, 0x3, 0)] * 2)
    for array in (ops, roots, values, tasks):
        array.flags.writeable = False
    done = p.ledger.apply(ops[::2], roots[::2], values[::2], tasks[::2], now_ns=np.int64(9))
    assert completions(done) == [(1, 1, ACKED, 9)]


def test_the_public_face() -> None:
    assert set(acker_kernel.__all__) == {
        "AckOps",
        "AckerLedger",
        "Completions",
        "INITIAL_CAPACITY",
        "TreeIdSource",
        "ack_ops",
        "gather_roots",
        "xor_per_anchor",
        "LedgerStatistics",
        "MAX_LOAD_FACTOR",
        "MIN_LOAD_FACTOR",
        "Op",
        "Outcome",
        "Snapshot",
        "warm_up",
        "zeroed",
    }
    assert [int(op) for op in Op] == [0, 1, 2, 3]
    assert [int(o) for o in Outcome] == [1, 2, 3]


# --- input validation ------------------------------------------------------------------------

GOOD = as_arrays([(INIT, 1, 0x1, 1), (ACK, 1, 0x1, 0)])


def call_apply(**changes: object) -> None:
    args: dict[str, object] = dict(
        zip(("ops", "roots", "values", "spout_tasks"), GOOD, strict=True)
    )
    args["now_ns"] = 0
    args.update(changes)
    AckerLedger(T).apply(**args)


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"ops": [0, 1]}, TypeError, "ops must be a numpy array of uint8, got list"),
        ({"ops": GOOD[0].astype(np.int64)}, TypeError, "ops must have dtype uint8, got int64"),
        (
            {"roots": GOOD[1].astype(np.int64)},
            TypeError,
            "roots must have dtype uint64, got int64",
        ),
        ({"roots": GOOD[1].astype(">u8")}, TypeError, "roots must have dtype uint64, got >u8"),
        (
            {"values": GOOD[2].astype(np.float64)},
            TypeError,
            "values must have dtype uint64, got float64",
        ),
        (
            {"spout_tasks": GOOD[3].astype(np.int64)},
            TypeError,
            "spout_tasks must have dtype int32, got int64",
        ),
        (
            {"ops": GOOD[0].reshape(2, 1)},
            ValueError,
            "ops must be one-dimensional, got shape (2, 1)",
        ),
        (
            {"roots": np.zeros(3, np.uint64)},
            ValueError,
            "roots has 3 elements, but ops has 2",
        ),
        (
            {"spout_tasks": np.zeros((2, 2), np.int32)},
            ValueError,
            "spout_tasks must be one-dimensional, got shape (2, 2)",
        ),
        (
            {"ops": np.array([0, 7], np.uint8)},
            ValueError,
            "ops holds an unknown op code 7; use the values of Op",
        ),
        (
            {"start_ns": np.zeros(2, np.uint64)},
            TypeError,
            "start_ns must have dtype int64, got uint64",
        ),
        (
            {"start_ns": np.zeros(3, np.int64)},
            ValueError,
            "start_ns has 3 elements, but ops has 2",
        ),
        ({"now_ns": 1.5}, TypeError, "now_ns must be an integer, got float"),
        ({"now_ns": "1"}, TypeError, "now_ns must be an integer, got str"),
        ({"now_ns": -(2**63) - 1}, ValueError, f"now_ns must fit in int64, got {-(2**63) - 1}"),
        (
            {"now_ns": 2**63 - T},
            ValueError,
            f"now_ns + timeout_ns must fit in int64, got now_ns={2**63 - T}",
        ),
    ],
)
def test_bad_apply_arguments_are_named(
    changes: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        call_apply(**changes)


def test_an_init_with_its_emit_time_reports_the_emit_as_the_start() -> None:
    # INIT and the last ACK in one call: without the emit time the tree would start now.
    ledger = AckerLedger(T, initial_capacity=16)
    ops, roots, values, tasks = as_arrays([(INIT, 5, 0x3, 1), (ACK, 5, 0x3, 0)])
    starts = np.array([400, 0], np.int64)  # the ACK's entry is ignored
    done = ledger.apply(ops, roots, values, tasks, now_ns=1_000, start_ns=starts)
    assert done.root.tolist() == [5]
    assert done.start_ns.tolist() == [400]


def test_an_init_after_its_ack_still_starts_at_the_emit() -> None:
    ledger = AckerLedger(T, initial_capacity=16)
    ledger.apply(*as_arrays([(ACK, 9, 0x1, 0)]), now_ns=500)  # creates the entry at 500
    ops, roots, values, tasks = as_arrays([(INIT, 9, 0x1, 2)])
    done = ledger.apply(ops, roots, values, tasks, 900, np.array([100], np.int64))
    assert done.start_ns.tolist() == [100]
    assert done.spout_task.tolist() == [2]


def test_start_times_survive_growth_and_time_outs() -> None:
    ledger = AckerLedger(T, initial_capacity=16)
    n = 100  # grows the table in the middle of the batch
    ops, roots, values, tasks = as_arrays([(INIT, r, 0x1, 1) for r in range(n)])
    starts = np.arange(n, dtype=np.int64)
    assert len(ledger.apply(ops, roots, values, tasks, now_ns=200, start_ns=starts)) == 0
    assert sorted(ledger.snapshot().start_ns.tolist()) == list(range(n))
    done = ledger.expire(200 + T)
    assert sorted(zip(done.root.tolist(), done.start_ns.tolist(), strict=True)) == [
        (r, r) for r in range(n)
    ]


def test_without_start_times_a_tree_starts_at_its_entry() -> None:
    ledger = AckerLedger(T, initial_capacity=16)
    ledger.apply(*as_arrays([(INIT, 5, 0x3, 1)]), now_ns=100)
    done = ledger.apply(*as_arrays([(ACK, 5, 0x3, 0)]), now_ns=350)
    assert done.start_ns.tolist() == [100]


@pytest.mark.parametrize(("n", "bad"), [(2, 1), (100, 0), (100, 99), (100, 50)])
def test_a_rejected_batch_changes_nothing(n: int, bad: int) -> None:
    ledger = AckerLedger(T, initial_capacity=16)  # 100 INITs would grow it
    ops, roots, values, tasks = as_arrays([(INIT, r, 0x1, 1) for r in range(n)])
    ops[bad] = 4 + bad % 252
    with pytest.raises(ValueError, match=f"^ops holds an unknown op code {ops[bad]}; use"):
        ledger.apply(ops, roots, values, tasks, now_ns=0)
    assert ledger.statistics() == AckerLedger(T, initial_capacity=16).statistics()


@pytest.mark.parametrize("method", ["expire", "due"])
def test_bad_sweep_times_are_named(method: str) -> None:
    ledger = AckerLedger(T)
    with pytest.raises(TypeError, match=r"^now_ns must be an integer, got float$"):
        getattr(ledger, method)(1.0)
    with pytest.raises(ValueError, match=rf"^now_ns must fit in int64, got {2**63}$"):
        getattr(ledger, method)(2**63)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"timeout_ns": 0}, ValueError, "timeout_ns must be > 0 and fit in int64, got 0"),
        (
            {"timeout_ns": 2**63},
            ValueError,
            f"timeout_ns must be > 0 and fit in int64, got {2**63}",
        ),
        ({"timeout_ns": 1.5}, TypeError, "timeout_ns must be an integer, got float"),
        (
            {"initial_capacity": 100},
            ValueError,
            "initial_capacity must be a power of two >= 16, got 100",
        ),
        (
            {"initial_capacity": 8},
            ValueError,
            "initial_capacity must be a power of two >= 16, got 8",
        ),
        (
            {"initial_capacity": None},
            TypeError,
            "initial_capacity must be an integer, got NoneType",
        ),
    ],
)
def test_bad_constructor_arguments_are_named(
    kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        AckerLedger(**kwargs)
