"""``AckHold`` (a task's ACKs kept until released) against the acker operations it stands
in for, and the executor's ``InputGate`` hook: a gate's delegate runs on the path of its
own kind."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from acker_kernel import Op
from engine import Fields, TopologyBuilder, run_topology
from engine._execution.acker import AckerOps
from engine._execution.gate import AckHold
from engine.state import BasicStatefulBolt
from engine.testing import simulate
from tests.engine.state.wordcount import BatchCount, BatchSplit, SentenceSpout, Split

U64 = st.integers(1, 2**64 - 1)


def taken(ops: AckerOps) -> list[tuple[int, int, int]]:
    kinds, roots, vals, _ = ops.take()
    return sorted(zip(kinds.tolist(), roots.tolist(), vals.tolist(), strict=True))


@given(
    per_tuple=st.lists(st.tuples(U64, U64), max_size=6),
    arrays=st.lists(st.lists(st.tuples(U64, U64), min_size=1, max_size=4), max_size=3),
    fails=st.lists(U64, max_size=3),
)
def test_held_acks_reach_the_acker_only_when_released(
    per_tuple: list[tuple[int, int]], arrays: list[list[tuple[int, int]]], fails: list[int]
) -> None:
    ops, direct = AckerOps(), AckerOps()
    notified: list[int] = []
    hold = AckHold(ops, lambda: notified.append(1))
    for root, val in per_tuple:  # what a per-tuple collector appends
        hold.ack_roots.append(root)
        hold.ack_vals.append(val)
        direct.ack_roots.append(root)
        direct.ack_vals.append(val)
    for chunk in arrays:  # a batch's acks
        roots = np.array([r for r, _ in chunk], np.uint64)
        vals = np.array([v for _, v in chunk], np.uint64)
        hold.add_acks(roots, vals)
        direct.add_acks(roots, vals)
    hold.add_fails(np.array(fails, np.uint64))  # fails are never held
    assert len(hold) == len(per_tuple) + sum(map(len, arrays))
    assert taken(ops) == sorted((int(Op.FAIL), r, 0) for r in fails)  # gone out at once
    acks = hold.take()
    assert len(hold) == 0 and not hold.ack_roots and not hold.chunks
    assert len(ops) == 0
    hold.release(acks)
    assert taken(ops) == taken(direct)
    assert notified == ([1] if len(per_tuple) + len(arrays) else [])


def test_a_failed_hold_fails_each_tree_once() -> None:
    ops = AckerOps()
    hold = AckHold(ops, lambda: None)
    for root in (5, 7, 5):
        hold.ack_roots.append(root)
        hold.ack_vals.append(1)
    hold.add_acks(np.array([7, 9], np.uint64), np.array([2, 3], np.uint64))
    hold.fail(hold.take())
    assert taken(ops) == [(int(Op.FAIL), 5, 0), (int(Op.FAIL), 7, 0), (int(Op.FAIL), 9, 0)]


def test_stateful_bolts_and_their_upstream_run_on_the_path_of_their_kind() -> None:
    class Count(BasicStatefulBolt):
        def init_state(self, state: Any) -> None:
            self.counts = state

        def execute(self, tuple: Any, collector: Any) -> None:
            self.counts.put(tuple[0], self.counts.get(tuple[0], 0) + 1)

    builder = TopologyBuilder()
    builder.set_spout("sentences", SentenceSpout(20))
    builder.set_bolt("split", Split()).shuffle_grouping("sentences")
    builder.set_bolt("count", Count()).fields_grouping("split", Fields("word"))
    builder.set_bolt("bsplit", BatchSplit()).shuffle_grouping("sentences")
    builder.set_bolt("bcount", BatchCount()).fields_grouping("bsplit", Fields("word"))

    async def scenario() -> dict[str, tuple[bool, bool, bool]]:
        async with run_topology(builder.create_topology(), name="kinds") as running:
            await running.wait_until_complete(timeout=60)
            return {
                ex.component_id: (
                    ex.is_basic,
                    ex.is_batch,
                    all(ex.bolts[t] is ex.instances[t].delegate for t in ex.tasks),
                )
                for ex in running.runtime.executors
                if ex.component_id in ("split", "count", "bsplit", "bcount")
            }

    assert simulate(scenario()) == {
        "split": (True, False, True),
        "count": (True, False, True),
        "bsplit": (True, True, True),
        "bcount": (True, True, True),
    }
