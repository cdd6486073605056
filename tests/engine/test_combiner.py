"""``CombinerBolt`` on the local engine: each batch a task gets combined in one pass, one row
per key anchored to every row it combines; the anchoring checked against the per-tuple
rule (``multi_anchored_copy``); misdeclared combiners refused in ``create_topology``."""

from __future__ import annotations

import collections
import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import (
    BasicBolt,
    CombinerBolt,
    CountCombiner,
    FailedException,
    Fields,
    InvalidComponentError,
    SumCombiner,
    TopologyBuilder,
    TupleBatch,
    run_topology,
)
from engine._columnar.xor import batch_group_anchor, multi_anchored_copy
from engine._model.tuple import Source, Tuple
from engine.state import BasicStatefulBolt, InMemoryStateStore
from engine.testing import simulate

from .test_batch import EXPECTED, SENTENCES, BatchSplit, SentenceSpout, TupleSplit


class WordCount(CombinerBolt):
    """The count as a user writes it: a value per row, Python's ``+``."""

    def zero(self) -> int:
        return 0

    def value(self, tuple: Any) -> int:
        return 1

    def combine(self, a: int, b: int) -> int:
        return a + b

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "count"])


class Totals(BasicBolt):
    """Sums the partial counts it gets; fails the first ``fail_word`` row it sees."""

    def __init__(self, fail_word: str | None = None) -> None:
        self.fail_word = fail_word

    def prepare(self, conf: Any, context: Any) -> None:
        self.totals: collections.Counter[str] = collections.Counter()
        self.rows = 0
        self.failed_one = False

    def execute(self, tuple: Any, collector: Any) -> None:
        if tuple["word"] == self.fail_word and not self.failed_one:
            self.failed_one = True
            raise FailedException("the first aggregate of the word fails")
        self.totals[tuple["word"]] += tuple["count"]
        self.rows += 1


def topology(split: Any, count: Any, totals: Totals, p: int, batch: int = 16) -> Any:
    b = TopologyBuilder()
    b.set_spout("sentences", SentenceSpout(SENTENCES, batch), p)
    b.set_bolt("split", split, p).shuffle_grouping("sentences")
    b.set_bolt("count", count, p).fields_grouping("split", Fields("word"))
    b.set_bolt("totals", totals).global_grouping("count")
    return b.create_topology()


async def _run(topo: Any) -> Any:
    async with run_topology(topo, {"topology.seed": 5}) as running:
        await running.wait_until_complete(timeout=600)
        (totals,) = running.task_objects("totals").values()
        spouts = running.task_objects("sentences").values()
        acked = sorted(m for s in spouts for m in s.acked)
        failed = sorted(m for s in spouts for m in s.failed)
        return totals, acked, failed, running.info()


@pytest.mark.parametrize(
    "count", [CountCombiner(["word", "count"]), WordCount()], ids=lambda c: type(c).__name__
)
@pytest.mark.parametrize("split", [BatchSplit(), TupleSplit()], ids=lambda s: type(s).__name__)
def test_a_combiner_counts_exactly_one_row_per_key_and_batch(
    count: CombinerBolt, split: Any, parallelism: int
) -> None:
    totals, acked, failed, info = simulate(_run(topology(split, count, Totals(), parallelism)))
    assert totals.totals == EXPECTED
    assert totals.rows < sum(EXPECTED.values())  # partial counts, not one row per word
    assert acked == list(range(len(SENTENCES))) and failed == []
    assert info.acker["pending_roots"] == 0


def test_a_failed_aggregate_fails_the_tree_of_every_row_it_combines() -> None:
    topo = topology(BatchSplit(), CountCombiner(["word", "count"]), Totals("w0"), 1, batch=32)
    totals, acked, failed, _ = simulate(_run(topo))
    with_w0 = {i for i, s in enumerate(SENTENCES) if "w0" in s.split()}
    # One aggregate of w0 failed: every sentence it combined failed (and was replayed).
    assert len(set(failed)) > 1
    assert set(failed) <= with_w0
    assert acked == list(range(len(SENTENCES)))
    # The failed aggregate was not counted, its sentences' replays were: w0 exactly, the
    # other words of those sentences once more (at least once).
    again = collections.Counter(w for i in set(failed) for w in SENTENCES[i].split())
    del again["w0"]
    assert totals.totals == EXPECTED + again


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=6), min_size=1, max_size=8),
    st.lists(st.integers(1, 4), min_size=10, max_size=10),
    st.randoms(use_true_random=False),
)
def test_group_anchoring_is_the_per_tuple_multi_anchor_rule(
    groups: list[list[int]], roots: list[int], rnd: random.Random
) -> None:
    src = Source("in", "default", 1, Fields("x"))
    edges_in = [rnd.getrandbits(64) or 1 for _ in range(10)]
    batch = TupleBatch(
        src, [list(range(10))], np.array(roots, np.uint64), np.array(edges_in, np.uint64)
    )
    owner = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    anchor = np.array([a for g in groups for a in g], np.int64)
    edges = np.array([rnd.getrandbits(64) or 1 for _ in anchor], np.uint64)
    out_roots, out_edges, offsets = batch_group_anchor(batch, owner, anchor, edges, len(groups))
    out = TupleBatch(src, [list(range(len(groups)))], out_roots, out_edges, offsets)

    # The reference: per-tuple views, one multi-anchored copy per output row, the same ids.
    views = [Tuple([i], src, roots[i], edges_in[i]) for i in range(10)]
    drawn = iter(edges.tolist())
    for j, group in enumerate(groups):
        copy = multi_anchored_copy([j], src, [views[a] for a in group], lambda _: next(drawn))
        assert out[j].anchors_to_ids == copy.anchors_to_ids
    assert batch.ack_vals is not None
    assert batch.ack_vals.tolist() == [v._ack_val for v in views]


class NoKey(CountCombiner):
    pass


def test_a_combiner_whose_key_is_not_in_its_input_is_refused() -> None:
    b = TopologyBuilder()
    b.set_spout("sentences", SentenceSpout(SENTENCES))
    b.set_bolt("count", CountCombiner(["word", "count"])).shuffle_grouping("sentences")
    with pytest.raises(InvalidComponentError) as info:
        b.create_topology()
    assert str(info.value) == (
        "combiner bolt 'count' (CountCombiner): input 'sentences' stream 'default' has no "
        "field 'word' (its fields: ['sentence']); the key fields ['word'] are read from "
        "every input by name"
    )


class Half(CombinerBolt):
    def value(self, tuple: Any) -> float:
        return 0.5

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "n"])


def test_a_combiner_without_zero_or_with_an_unknown_arrow_combine_is_refused() -> None:
    b = TopologyBuilder()
    b.set_spout("sentences", SentenceSpout(SENTENCES))
    b.set_bolt("split", BatchSplit()).shuffle_grouping("sentences")
    b.set_bolt("count", Half()).shuffle_grouping("split")
    with pytest.raises(InvalidComponentError) as info:
        b.create_topology()
    assert str(info.value) == "combiner bolt 'count' (Half) does not implement zero"

    total = SumCombiner("n", ["word", "total"])
    total.arrow_combine = "avg"
    b = TopologyBuilder()
    b.set_spout("sentences", SentenceSpout(SENTENCES))
    b.set_bolt("count", total).shuffle_grouping("sentences")
    with pytest.raises(InvalidComponentError) as info:
        b.create_topology()
    assert str(info.value) == (
        "combiner bolt 'count' (SumCombiner): arrow_combine must be one of ['max', 'min', "
        "'sum'] or None, got 'avg'"
    )


class StatefulTotals(BasicStatefulBolt):
    def init_state(self, state: Any) -> None:
        self.totals = state

    def execute(self, tuple: Any, collector: Any) -> None:
        word = tuple["word"]
        self.totals.put(word, self.totals.get(word, 0) + tuple["count"])


def test_a_combiner_upstream_of_a_stateful_bolt_is_allowed_and_counts_exactly() -> None:
    # The checkpoint wiring subscribes the combiner to its inputs' barrier stream, whose
    # fields are not the key's: the key check is for the bolt's own inputs only.
    b = TopologyBuilder()
    b.set_spout("sentences", SentenceSpout(SENTENCES, 16))
    b.set_bolt("split", BatchSplit(), 2).shuffle_grouping("sentences")
    b.set_bolt("count", CountCombiner(["word", "count"]), 2).fields_grouping(
        "split", Fields("word")
    )
    b.set_bolt("totals", StatefulTotals(), 2).fields_grouping("count", Fields("word"))

    async def scenario() -> Any:
        async with run_topology(b.create_topology(), {"topology.seed": 5}) as running:
            await running.wait_until_complete(timeout=600)
            totals: collections.Counter[str] = collections.Counter()
            for task in running.task_objects("totals").values():
                totals.update(dict(task.state.items()))
            spouts = running.task_objects("sentences").values()
            return totals, sorted(m for s in spouts for m in s.acked)

    InMemoryStateStore.clear()
    try:
        totals, acked = simulate(scenario())
    finally:
        InMemoryStateStore.clear()
    assert totals == EXPECTED
    assert acked == list(range(len(SENTENCES)))
