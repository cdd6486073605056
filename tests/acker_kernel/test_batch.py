"""The batch kernels (``acker_kernel._batch``): each against its naive model in
``naive_batch.py`` with Hypothesis, and together against the real ledger (a split and a
count of sentences, columnar)."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acker_kernel import (
    AckerLedger,
    Op,
    Outcome,
    TreeIdSource,
    ack_ops,
    gather_roots,
    xor_per_anchor,
)
from acker_kernel._constants import ID_ZERO_SUBSTITUTE

from . import naive_batch
from .naive import U64_MAX
from .test_properties import root_ids

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
# At most 7 draws of 40: 280 ids, so a counter up to 2**64 - 300 never runs out of ids (the
# exhaustion error has its own test).
@given(
    seed=u64s,
    counter=st.integers(0, 2**64 - 300),
    sizes=st.lists(st.integers(0, 40), max_size=7),
)
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
@given(case=flat_maps(), seed=u64s, counter=st.integers(0, 2**40), data=st.data())
def test_children_equal_draw_xor_and_gather(
    case: tuple[list[int], list[int], int], seed: int, counter: int, data: st.DataObject
) -> None:
    anchors, _, n = case
    roots = data.draw(st.lists(u64s, min_size=n, max_size=n))
    before = data.draw(st.lists(u64s, min_size=n, max_size=n))
    acks = u64(before)
    ids = TreeIdSource(seed, counter)
    got_roots, got_edges = ids.children(i64(anchors), u64(roots), acks)
    edges = naive_batch.tree_ids(seed, counter, len(anchors))
    assert got_edges.tolist() == edges and ids.counter == counter + len(anchors)
    assert got_roots.tolist() == [roots[a] for a in anchors]
    xor = naive_batch.xor_per_anchor(anchors, edges, n)
    assert acks.tolist() == [b ^ x for b, x in zip(before, xor, strict=True)]


def test_children_reject_bad_input_and_change_nothing() -> None:
    ids = TreeIdSource(5)
    acks = np.zeros(2, np.uint64)
    with pytest.raises(
        ValueError, match=r"^anchor\[1\] = 2 is not a row: anchors must be in \[0, 2\)$"
    ):
        ids.children(i64([0, 2]), u64([1, 2]), acks)
    assert ids.counter == 0 and acks.tolist() == [0, 0]
    with pytest.raises(ValueError, match=r"^ack_values must be contiguous and parallel"):
        ids.children(i64([0]), u64([1, 2]), np.zeros(3, np.uint64))
    with pytest.raises(TypeError, match=r"^ack_values must be a writable numpy array of uint64$"):
        ids.children(i64([0]), u64([1]), np.zeros(1, np.int64))
    frozen = np.zeros(1, np.uint64)
    frozen.flags.writeable = False  # the ack values are updated in place
    with pytest.raises(TypeError, match=r"^ack_values must be a writable numpy array of uint64$"):
        ids.children(i64([0]), u64([1]), frozen)
    assert ids.counter == 0


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


# --- 3. ack ops -----------------------------------------------------------------------------


@st.composite
def tree_rows(draw: st.DrawFn) -> tuple[list[list[tuple[int, int]]], bool]:
    """Rows as (root, edge id) pairs: one each, or (``csr``) any number, roots often
    repeated from row to row (a sentence's words) so that runs fold."""
    csr = draw(st.booleans())
    n = draw(st.integers(0, 25))
    pool = draw(st.lists(root_ids, min_size=1, max_size=4))
    sizes = st.integers(0, 3) if csr else st.just(1)
    rows = [
        [(draw(st.sampled_from(pool)), draw(u64s)) for _ in range(draw(sizes))] for _ in range(n)
    ]
    return rows, csr


def csr_arrays(rows: list[list[tuple[int, int]]], csr: bool) -> tuple[np.ndarray, ...]:
    """``(roots, edge ids, root_offsets or None)`` of the kernels' representation."""
    roots = u64([r for row in rows for r, _ in row])
    edges = u64([e for row in rows for _, e in row])
    if not csr:
        return roots, edges, None
    return roots, edges, i64([0, *np.cumsum([len(r) for r in rows]).tolist()])


@SETTINGS
@given(case=tree_rows(), data=st.data())
def test_ack_ops_equal_the_model(
    case: tuple[list[list[tuple[int, int]]], bool], data: st.DataObject
) -> None:
    rows, csr = case
    n = len(rows)
    roots, edges, offsets = csr_arrays(rows, csr)
    acks = data.draw(st.lists(u64s, min_size=n, max_size=n))
    some = data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=2 * n)) if n else []
    for ack_values in (u64(acks), None):
        got = ack_ops(roots, edges, ack_values, i64(some), offsets)
        assert got.roots.dtype == np.uint64 and got.values.dtype == np.uint64
        want = naive_batch.ack_ops(rows, acks if ack_values is not None else [0] * n, some)
        assert list(zip(got.roots.tolist(), got.values.tolist(), strict=True)) == want
        assert len(got) == len(want)
        every = ack_ops(roots, edges, ack_values, None, offsets)  # rows None: all, in order
        want = naive_batch.ack_ops(rows, acks if ack_values is not None else [0] * n, range(n))
        assert list(zip(every.roots.tolist(), every.values.tolist(), strict=True)) == want


def test_ack_ops_fold_a_run_of_one_root_and_reject_bad_input() -> None:
    got = ack_ops(u64([7, 7, 8, 7]), u64([1, 2, 4, 8]), None, i64([0, 1, 2, 3]))
    assert (got.roots.tolist(), got.values.tolist()) == ([7, 8, 7], [3, 4, 8])
    with pytest.raises(
        ValueError, match=r"^edge_ids has 1 elements, but roots has 2; they are parallel arrays$"
    ):
        ack_ops(u64([1, 2]), u64([1]), None, i64([0]))
    with pytest.raises(
        ValueError, match=r"^ack_values has 1 elements for 2 rows; give one per row$"
    ):
        ack_ops(u64([1, 2]), u64([1, 2]), u64([0]), i64([0]))
    with pytest.raises(ValueError, match=r"^rows\[1\] = 2 is not a row: rows must be in \[0, 2\)$"):
        ack_ops(u64([1, 2]), u64([1, 2]), None, i64([0, 2]))
    with pytest.raises(
        ValueError, match=r"^rows\[0\] = -1 is not a row: rows must be in \[0, 2\)$"
    ):
        gather_roots(u64([1, 2]), i64([-1]))
    with pytest.raises(ValueError, match=r"^rows\[1\] = 1 is not a row: rows must be in \[0, 1\)$"):
        gather_roots(u64([1, 2]), i64([0, 1]), i64([0, 2]))
    with pytest.raises(TypeError, match=r"^rows must have dtype int64, got int32$"):
        ack_ops(u64([1]), u64([1]), None, np.zeros(1, np.int32))
    offsets_message = (
        r"^root_offsets\[{}\] = {} breaks the CSR layout: root_offsets must start at 0, never "
        r"decrease, and end at len\(roots\) = 2$"
    )
    with pytest.raises(ValueError, match=offsets_message.format(0, 1)):
        ack_ops(u64([1, 2]), u64([1, 2]), None, i64([]), i64([1, 2]))
    with pytest.raises(ValueError, match=offsets_message.format(2, 1)):
        ack_ops(u64([1, 2]), u64([1, 2]), None, i64([]), i64([0, 2, 1]))
    with pytest.raises(ValueError, match=offsets_message.format(1, 1)):
        gather_roots(u64([1, 2]), i64([]), i64([0, 1]))
    with pytest.raises(
        ValueError, match=r"^root_offsets must have at least one element \(0\), got none$"
    ):
        gather_roots(u64([]), i64([]), i64([]))


# --- 4. the roots of rows ---------------------------------------------------------------------


@SETTINGS
@given(case=tree_rows(), data=st.data())
def test_gather_roots_equals_the_model(
    case: tuple[list[list[tuple[int, int]]], bool], data: st.DataObject
) -> None:
    rows, csr = case
    n = len(rows)
    roots, _, offsets = csr_arrays(rows, csr)
    some = data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=2 * n)) if n else []
    got, got_offsets = gather_roots(roots, i64(some), offsets)
    want = naive_batch.gather_roots([[r for r, _ in row] for row in rows], some)
    if offsets is None:
        assert got_offsets is None
        assert [[r] for r in got.tolist()] == want
    else:
        assert got_offsets is not None
        bounds = got_offsets.tolist()
        assert [got.tolist()[a:b] for a, b in itertools.pairwise(bounds)] == want


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
    the words): a sentence's tree completes once its row and all its words are acked, and
    a row left unacked (failed) keeps it pending. Every op goes to the real ledger, in
    batches of any order."""
    n = len(words_per_sentence)
    ids = TreeIdSource(data.draw(u64s, label="seed"))
    roots, spout_edges = ids.draw(n), ids.draw(n)
    anchor = np.repeat(np.arange(n, dtype=np.int64), words_per_sentence)
    m = anchor.shape[0]
    word_edges = ids.draw(m)
    split_ok = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    count_ok = np.array(data.draw(st.lists(st.booleans(), min_size=m, max_size=m)), bool)
    acks = xor_per_anchor(anchor, word_edges, n)
    split = ack_ops(roots, spout_edges, acks, np.flatnonzero(split_ok))
    word_roots, offsets = gather_roots(roots, anchor)
    assert offsets is None
    count = ack_ops(word_roots, word_edges, None, np.flatnonzero(count_ok).astype(np.int64))
    parts = [
        (np.full(n, Op.INIT, np.uint8), roots, spout_edges, np.arange(n, dtype=np.int32)),
        (np.full(len(count), Op.ACK, np.uint8), *count, np.zeros(len(count), np.int32)),
        (np.full(len(split), Op.ACK, np.uint8), *split, np.zeros(len(split), np.int32)),
    ]
    ops, batch_roots, values, tasks = (
        np.concatenate(column) for column in zip(*parts, strict=True)
    )
    order = np.array(data.draw(st.permutations(range(ops.shape[0]))), np.int64)
    ledger = AckerLedger(T)
    cut = data.draw(st.integers(0, ops.shape[0]))
    done: list[int] = []
    for piece in (order[:cut], order[cut:]):
        out = ledger.apply(ops[piece], batch_roots[piece], values[piece], tasks[piece], 0)
        assert set(out.outcome.tolist()) <= {int(Outcome.ACKED)}
        done += out.root.tolist()
    complete = split_ok.copy()
    np.logical_and.at(complete, anchor, count_ok)
    assert sorted(done) == sorted(roots[complete].tolist())
    assert len(ledger) == int((~complete).sum())


def test_the_batch_public_face() -> None:
    import acker_kernel
    from acker_kernel import _batch

    assert set(_batch.__all__) <= set(acker_kernel.__all__)
    assert set(_batch.__all__) == {
        "AckOps",
        "TreeIdSource",
        "ack_ops",
        "gather_roots",
        "xor_per_anchor",
    }
