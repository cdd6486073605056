"""The batch kernels (``acker_kernel._batch``): each against its naive model in
``naive_batch.py`` with Hypothesis, and ``fold_ops`` + ``AckerLedger.apply`` against the
real ledger applying the same ops one by one."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acker_kernel import (
    AckerLedger,
    FoldedOps,
    Op,
    Outcome,
    TreeIdSource,
    ack_ops,
    fold_ops,
    multi_root_ack_ops,
    xor_per_anchor,
    xor_per_anchors,
)
from acker_kernel._constants import ID_ZERO_SUBSTITUTE

from . import naive_batch
from .naive import U64_MAX, Message, as_arrays, completions, simulate, snapshot_state
from .test_properties import root_ids, spout_tasks

T = 1_000  # timeout, ns

#: Scaled down by the NUMBA_DISABLE_JIT run (test_no_jit.py), where the kernels are Python.
EXAMPLES = int(os.environ.get("ACKER_KERNEL_EXAMPLES", "200"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

u64s = st.integers(0, U64_MAX)


def u64(values: list[int]) -> np.ndarray:
    return np.array(values, np.uint64).reshape(len(values))


def i64(values: list[int]) -> np.ndarray:
    return np.array(values, np.int64).reshape(len(values))


# --- 1. TreeIdSource ------------------------------------------------------------------------


@SETTINGS
@given(seed=u64s, counter=st.integers(0, 2**64 - 300), sizes=st.lists(st.integers(0, 40)))
def test_ids_equal_the_model_however_they_are_drawn(
    seed: int, counter: int, sizes: list[int]
) -> None:
    ids = TreeIdSource(seed, counter)
    drawn: list[int] = []
    for i, n in enumerate(sizes):
        if i % 2:
            out = np.empty(n, np.uint64)
            ids.draw_into(out)
        else:
            out = ids.draw(n)
        assert out.dtype == np.uint64 and out.shape == (n,)
        drawn += out.tolist()
    assert ids.counter == counter + sum(sizes)
    assert drawn == naive_batch.tree_ids(seed, counter, sum(sizes))


@SETTINGS
@given(seed=u64s)
def test_the_one_id_that_would_be_0_is_replaced(seed: int) -> None:
    c = naive_batch.zero_counter(seed)
    start = max(0, min(c - 2, 2**64 - 5))
    got = TreeIdSource(seed, start).draw(5).tolist()
    assert 0 not in got
    assert int(ID_ZERO_SUBSTITUTE) in got
    assert got == naive_batch.tree_ids(seed, start, 5)


def test_ids_are_distinct_and_seeds_differ() -> None:
    a = TreeIdSource(7).draw(100_000)
    assert np.unique(a).shape[0] == a.shape[0]  # a bijection of the counter
    assert np.all(a != 0)
    b = TreeIdSource(8).draw(100_000)
    assert np.intersect1d(a, b).shape[0] == 0
    assert repr(TreeIdSource(7, 3)) == "TreeIdSource(seed=7, counter=3)"
    assert TreeIdSource(2**64 - 1).seed == 2**64 - 1


def test_tree_id_source_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match=r"^seed must be in \[0, 2\*\*64\), got -1$"):
        TreeIdSource(-1)
    with pytest.raises(TypeError, match=r"^seed must be an integer, got float$"):
        TreeIdSource(1.5)  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"^counter must be in \[0, 2\*\*64\), got 18446744073709551616$"
    ):
        TreeIdSource(1, 2**64)
    ids = TreeIdSource(1, 2**64 - 2)
    with pytest.raises(
        ValueError, match=r"^TreeIdSource\(seed=1\) has 2 ids left, 3 asked; use another seed$"
    ):
        ids.draw(3)
    assert ids.counter == 2**64 - 2  # nothing drawn
    assert ids.draw(2).shape == (2,) and ids.counter == 2**64
    with pytest.raises(ValueError, match=r"^n must be >= 0, got -1$"):
        ids.draw(-1)
    with pytest.raises(TypeError, match=r"^out must have dtype uint64, got int64$"):
        TreeIdSource(1).draw_into(np.empty(3, np.int64))
    with pytest.raises(TypeError, match=r"^out must be a numpy array of uint64, got list$"):
        TreeIdSource(1).draw_into([0, 0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^out must be a writable, contiguous one-dimensional"):
        TreeIdSource(1).draw_into(np.empty(8, np.uint64)[::2])


# --- 2. XOR per anchor ----------------------------------------------------------------------


@st.composite
def flat_maps(draw: st.DrawFn) -> tuple[list[int], list[int], int]:
    n = draw(st.integers(0, 30))
    m = draw(st.integers(0, 60)) if n else 0
    anchors = draw(st.lists(st.integers(0, max(n - 1, 0)), min_size=m, max_size=m))
    edges = draw(st.lists(u64s, min_size=m, max_size=m))
    return anchors, edges, n


@SETTINGS
@given(case=flat_maps())
def test_xor_per_anchor_equals_the_model(case: tuple[list[int], list[int], int]) -> None:
    anchors, edges, n = case
    got = xor_per_anchor(i64(anchors), u64(edges), n)
    assert got.dtype == np.uint64
    assert got.tolist() == naive_batch.xor_per_anchor(anchors, edges, n)


@SETTINGS
@given(data=st.data(), n=st.integers(1, 20), m=st.integers(0, 30))
def test_xor_per_anchors_equals_the_model(data: st.DataObject, n: int, m: int) -> None:
    anchors = [data.draw(st.lists(st.integers(0, n - 1), max_size=4)) for _ in range(m)]
    ids = [data.draw(st.lists(u64s, min_size=len(a), max_size=len(a))) for a in anchors]
    offsets = i64([0, *np.cumsum([len(a) for a in anchors], dtype=np.int64).tolist()])
    rows = i64([a for row in anchors for a in row])
    flat_ids = u64([e for row in ids for e in row])
    got = xor_per_anchors(offsets, rows, flat_ids, n)
    assert got.tolist() == naive_batch.xor_per_anchors(anchors, ids, n)


def test_xor_per_anchor_rejects_bad_input() -> None:
    with pytest.raises(
        ValueError,
        match=r"^anchor_index\[1\] = 3 is not an input row: anchors must be in \[0, n_inputs=3\)$",
    ):
        xor_per_anchor(i64([0, 3]), u64([1, 2]), 3)
    with pytest.raises(ValueError, match=r"^anchor_index\[0\] = -1 is not an input row"):
        xor_per_anchor(i64([-1]), u64([1]), 3)
    with pytest.raises(
        ValueError,
        match=r"^edge_ids has 1 elements, but anchor_index has 2; they are parallel arrays$",
    ):
        xor_per_anchor(i64([0, 0]), u64([1]), 3)
    with pytest.raises(TypeError, match=r"^anchor_index must have dtype int64, got int32$"):
        xor_per_anchor(np.zeros(2, np.int32), u64([1, 2]), 3)
    with pytest.raises(ValueError, match=r"^n_inputs must be >= 0, got -1$"):
        xor_per_anchor(i64([]), u64([]), -1)
    offsets_message = r"^anchor_offsets\[{}\] = {} breaks the CSR layout: anchor_offsets must start at 0, never decrease, and end at len\(anchor_rows\) = 2$"
    with pytest.raises(ValueError, match=offsets_message.format(0, 1)):
        xor_per_anchors(i64([1, 2]), i64([0, 1]), u64([1, 2]), 2)
    with pytest.raises(ValueError, match=offsets_message.format(2, 1)):
        xor_per_anchors(i64([0, 2, 1]), i64([0, 1]), u64([1, 2]), 2)
    with pytest.raises(ValueError, match=offsets_message.format(1, 1)):
        xor_per_anchors(i64([0, 1]), i64([0, 1]), u64([1, 2]), 2)
    with pytest.raises(
        ValueError, match=r"^anchor_offsets must have at least one element \(0\), got none$"
    ):
        xor_per_anchors(i64([]), i64([]), u64([]), 2)
    with pytest.raises(ValueError, match=r"^anchor_rows\[1\] = 2 is not an input row"):
        xor_per_anchors(i64([0, 2]), i64([0, 2]), u64([1, 2]), 2)


# --- 3. ack ops -----------------------------------------------------------------------------


@SETTINGS
@given(data=st.data(), n=st.integers(0, 30))
def test_ack_ops_equal_the_model(data: st.DataObject, n: int) -> None:
    roots = data.draw(st.lists(u64s, min_size=n, max_size=n))
    edges = data.draw(st.lists(u64s, min_size=n, max_size=n))
    acks = data.draw(st.lists(u64s, min_size=n, max_size=n))
    acked = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    mask = np.array(acked, bool).reshape(n)
    for as_mask in (mask, mask.astype(np.uint8)):
        got = ack_ops(u64(roots), u64(edges), u64(acks), as_mask)
        assert len(got) == n and got.ops.dtype == np.uint8
        rows = [[(r, e)] for r, e in zip(roots, edges, strict=True)]
        want = naive_batch.ack_ops(rows, acks, acked)
        assert list(zip(*(a.tolist() for a in got), strict=True)) == want


@SETTINGS
@given(data=st.data(), n=st.integers(0, 20))
def test_multi_root_ack_ops_equal_the_model(data: st.DataObject, n: int) -> None:
    rows = [data.draw(st.lists(st.tuples(root_ids, u64s), max_size=4)) for _ in range(n)]
    acks = data.draw(st.lists(u64s, min_size=n, max_size=n))
    acked = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    offsets = i64([0, *np.cumsum([len(r) for r in rows], dtype=np.int64).tolist()])
    got = multi_root_ack_ops(
        offsets,
        u64([r for row in rows for r, _ in row]),
        u64([e for row in rows for _, e in row]),
        u64(acks),
        np.array(acked, bool).reshape(n),
    )
    want = naive_batch.ack_ops(rows, acks, acked)
    assert list(zip(*(a.tolist() for a in got), strict=True)) == want


def test_ack_ops_reject_bad_input() -> None:
    with pytest.raises(ValueError, match=r"^acked has 1 elements, but roots has 2 rows$"):
        ack_ops(u64([1, 2]), u64([1, 2]), u64([0, 0]), np.ones(1, bool))
    with pytest.raises(TypeError, match=r"^acked must have dtype bool or uint8, got int64$"):
        ack_ops(u64([1]), u64([1]), u64([0]), np.ones(1, np.int64))
    with pytest.raises(
        ValueError, match=r"^ack_values has 1 elements, but roots has 2; they are parallel arrays$"
    ):
        ack_ops(u64([1, 2]), u64([1, 2]), u64([0]), np.ones(2, bool))
    with pytest.raises(
        ValueError,
        match=r"^root_offsets has 2 elements; it needs one per row plus one \(ack_values has 2 rows, so 3\)$",
    ):
        multi_root_ack_ops(i64([0, 1]), u64([1]), u64([1]), u64([0, 0]), np.ones(2, bool))
    with pytest.raises(ValueError, match=r"^root_offsets\[2\] = 1 breaks the CSR layout"):
        multi_root_ack_ops(i64([0, 1, 1]), u64([1, 2]), u64([1, 2]), u64([0, 0]), np.ones(2, bool))


# --- 4. fold_ops: against its model -----------------------------------------------------------

small_roots = st.integers(0, 3)
#: Small values XOR to 0 by coincidence: the cases where folding could go wrong.
small_values = st.one_of(st.sampled_from([0, 1, 2, 3, 0]), u64s)
timed_messages = st.lists(
    st.tuples(
        st.sampled_from([int(op) for op in Op]),
        st.one_of(small_roots, root_ids),
        small_values,
        spout_tasks,
        st.integers(-(2**40), 2**40),
    ),
    max_size=40,
)


def timed_arrays(messages: list[naive_batch.TimedMessage]) -> tuple[np.ndarray, ...]:
    return (*as_arrays([m[:4] for m in messages]), i64([m[4] for m in messages]))


def folded_lists(folded: FoldedOps) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    assert [a.dtype for a in folded] == [
        np.dtype(t) for t in ("u1", "u8", "u8", "i4", "i8", "u8", "i4", "i8")
    ]
    ops = list(zip(*(a.tolist() for a in folded[:5]), strict=True))
    acked = list(zip(*(a.tolist() for a in folded[5:]), strict=True))
    return ops, acked


@SETTINGS
@given(messages=timed_messages)
def test_fold_equals_the_model(messages: list[naive_batch.TimedMessage]) -> None:
    ops, acked = folded_lists(fold_ops(*timed_arrays(messages)))
    want_ops, want_acked = naive_batch.fold(messages)
    assert ops == want_ops
    assert acked == want_acked
    assert len(ops) <= len(messages)


def test_fold_examples() -> None:
    init, ack, fail, reset = (int(op) for op in Op)
    # A whole tree: completes in the batch, ACKED, from its earliest op.
    ops, acked = folded_lists(
        fold_ops(*timed_arrays([(ack, 9, 5, 0, 30), (init, 9, 6, 4, 20), (ack, 9, 3, 0, 10)]))
    )
    assert (ops, acked) == ([], [(9, 4, 10)])
    # Acks after the INIT stay apart; RESETs become one, at the latest time.
    ops, acked = folded_lists(
        fold_ops(
            *timed_arrays(
                [(reset, 9, 0, 0, 5), (init, 9, 6, 4, 20), (ack, 9, 3, 0, 10), (reset, 9, 0, 0, 7)]
            )
        )
    )
    assert (ops, acked) == ([(init, 9, 6, 4, 20), (ack, 9, 3, 0, 10), (reset, 9, 0, 0, 7)], [])
    # A FAIL: the root's ops pass unfolded.
    batch = [(init, 9, 6, 4, 1), (ack, 8, 1, 0, 1), (fail, 9, 0, 0, 1), (ack, 9, 6, 0, 1)]
    ops, acked = folded_lists(fold_ops(*timed_arrays(batch)))
    assert (ops, acked) == ([batch[0], batch[1], batch[2], batch[3]], [])
    with pytest.raises(ValueError, match=r"^ops holds an unknown op code 4; use the values of Op$"):
        fold_ops(*timed_arrays([(4, 1, 0, 0, 0)]))
    with pytest.raises(ValueError, match=r"^times_ns has 0 elements, but ops has 1$"):
        fold_ops(*as_arrays([(0, 1, 0, 0)]), i64([]))
    empty = fold_ops(*timed_arrays([]))
    assert folded_lists(empty) == ([], [])
    assert len(empty.acked(5)) == 0


# --- 4. fold_ops + apply: against the ledger applying the ops one by one ----------------------


class Pair:
    """One ledger fed the ops as they are, one fed them folded; they must agree."""

    def __init__(self) -> None:
        self.plain = AckerLedger(T, initial_capacity=16)
        self.folded = AckerLedger(T, initial_capacity=16)
        self.acked_in_batch = 0

    def apply(self, batch: list[Message], now: int) -> list[tuple[int, int, int, int]]:
        arrays = as_arrays(batch)
        want = completions(self.plain.apply(*arrays, now_ns=now))
        folded = fold_ops(*arrays, np.full(len(batch), now, np.int64))
        assert np.all(folded.times_ns == now)
        got = completions(
            self.folded.apply(
                folded.ops, folded.roots, folded.values, folded.spout_tasks, now_ns=now
            )
        )
        got += completions(folded.acked(now))
        self.acked_in_batch += len(folded.acked_root)
        assert sorted(got) == sorted(want)
        self.check()
        return want

    def expire(self, now: int) -> list[tuple[int, int, int, int]]:
        want = sorted(completions(self.plain.expire(now)))
        assert sorted(completions(self.folded.expire(now))) == want
        self.check()
        return want

    def check(self) -> None:
        assert snapshot_state(self.folded.snapshot()) == snapshot_state(self.plain.snapshot())
        a, b = self.plain.statistics(), self.folded.statistics()
        assert (a.pending, a.acked, a.failed, a.timed_out, a.orphans) == (
            b.pending,
            b.acked + self.acked_in_batch,
            b.failed,
            b.timed_out,
            b.orphans,
        )


@SETTINGS
@given(n=st.integers(1, 12), seed=st.integers(0, 2**32), data=st.data())
def test_fold_then_apply_equals_apply_for_storm_trees(
    n: int, seed: int, data: st.DataObject
) -> None:
    """Random trees (fan-out, multi-anchoring, fails, resets, lost tuples) with random
    nonzero edge ids, delivered in random orders and batch splits while time advances."""
    rnd = random.Random(seed)
    roots = data.draw(st.lists(root_ids, min_size=n, max_size=n, unique=True), label="roots")
    tasks = data.draw(st.lists(spout_tasks, min_size=n, max_size=n), label="tasks")
    edges = iter(TreeIdSource(seed).draw(1_000).tolist())
    forest = simulate(roots, tasks, edges, rnd, max_steps=60)
    messages: list[Message] = data.draw(st.permutations(forest.messages), label="order")
    pair = Pair()
    outcomes: dict[int, int] = {}
    now = 0
    while messages:
        size = len(messages) - data.draw(st.integers(0, len(messages) - 1), label="held back")
        batch, messages = messages[:size], messages[size:]
        for root, _, outcome, _ in pair.apply(batch, now):
            outcomes.setdefault(root, outcome)
        now += data.draw(st.integers(0, T // 2), label="step")
        if data.draw(st.booleans(), label="expire"):
            for root, _, outcome, _ in pair.expire(now):
                outcomes.setdefault(root, outcome)
    for root, _, outcome, _ in pair.expire(now + T):
        outcomes.setdefault(root, outcome)
    assert pair.plain.statistics().pending == 0
    # Trees that completed within the timeout end as Storm says.
    for root, outcome in outcomes.items():
        if forest.expected[root] != Outcome.TIMED_OUT:
            assert outcome in (forest.expected[root], Outcome.TIMED_OUT)


@SETTINGS
@given(
    batches=st.lists(
        st.lists(
            st.tuples(
                st.sampled_from([int(op) for op in Op]),
                st.integers(0, 1),  # few roots and tiny values: many coincidental zeros
                st.sampled_from([0, 1, 2, 3, 0]),
                spout_tasks,
            ),
            min_size=2,
            max_size=30,
        ),
        max_size=4,
    ),
    data=st.data(),
)
def test_fold_then_apply_equals_apply_for_any_ops_on_roots_new_to_the_ledger(
    batches: list[list[Message]], data: st.DataObject
) -> None:
    """Coincidental zeros, second INITs, acks after a FAIL: exact as long as each batch's
    roots are not in the ledger (here every batch has its own roots)."""
    pair = Pair()
    now = 0
    for i, batch in enumerate(batches):
        pair.apply([(op, root + 16 * i, value, task) for op, root, value, task in batch], now)
        now += data.draw(st.integers(0, 2 * T), label="step")
        if data.draw(st.booleans(), label="expire"):
            pair.expire(now)
    pair.expire(now + T)


# --- the steps together: a columnar split of sentences into words -----------------------------


@SETTINGS
@given(
    words_per_sentence=st.lists(st.integers(0, 6), min_size=1, max_size=20),
    data=st.data(),
)
def test_a_columnar_split_and_count_completes_every_tree(
    words_per_sentence: list[int], data: st.DataObject
) -> None:
    """sentences -> split (one word row per word, anchored to its sentence) -> count (acks
    the words): every sentence's tree completes inside the one batch, unless a row failed."""
    n = len(words_per_sentence)
    ids = TreeIdSource(data.draw(u64s, label="seed"))
    roots, spout_edges = ids.draw(n), ids.draw(n)
    anchor = np.repeat(np.arange(n, dtype=np.int64), words_per_sentence)
    word_edges = ids.draw(anchor.shape[0])
    split_ok = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    count_ok = np.array(
        data.draw(st.lists(st.booleans(), min_size=anchor.shape[0], max_size=anchor.shape[0])),
        bool,
    ).reshape(anchor.shape[0])
    acks = xor_per_anchor(anchor, word_edges, n)
    split = ack_ops(roots, spout_edges, acks, split_ok)
    count = ack_ops(roots[anchor], word_edges, np.zeros_like(word_edges), count_ok)
    parts = [
        (np.full(n, Op.INIT, np.uint8), roots, spout_edges, np.arange(n, dtype=np.int32)),
        (*count, np.zeros(len(count), np.int32)),  # delivery order does not matter
        (*split, np.zeros(n, np.int32)),
    ]
    ops, batch_roots, values, tasks = (
        np.concatenate(column) for column in zip(*parts, strict=True)
    )
    folded = fold_ops(ops, batch_roots, values, tasks, np.zeros(ops.shape[0], np.int64))
    failed = split_ok.copy()
    np.logical_and.at(failed, anchor, count_ok)
    failed = ~failed
    assert sorted(folded.acked_root.tolist()) == sorted(roots[~failed].tolist())
    assert sorted(set(folded.roots.tolist())) == sorted(roots[failed].tolist())
    ledger = AckerLedger(T)
    done = ledger.apply(folded.ops, folded.roots, folded.values, folded.spout_tasks, now_ns=0)
    assert sorted(done.root.tolist()) == sorted(roots[failed].tolist())
    assert set(done.outcome.tolist()) <= {int(Outcome.FAILED)}
    # What a failed tree's ops left after its FAIL are orphans: they expire quietly.
    assert not ledger.snapshot().spout_known.any()


def test_the_batch_public_face() -> None:
    import acker_kernel
    from acker_kernel import _batch

    assert set(_batch.__all__) <= set(acker_kernel.__all__)
    assert set(_batch.__all__) == {
        "AckOps",
        "FoldedOps",
        "TreeIdSource",
        "ack_ops",
        "fold_ops",
        "multi_root_ack_ops",
        "xor_per_anchor",
        "xor_per_anchors",
    }
