"""Hypothesis: random tuple trees, played through Storm's XOR protocol, delivered in random
orders and batch splits while time advances. The kernel's completions, outcomes,
latencies, state and counters must equal the reference model's after every call."""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acker_kernel import AckerLedger, Outcome

from .naive import (
    U64_MAX,
    Forest,
    Message,
    NaiveLedger,
    as_arrays,
    assert_same,
    colliding_roots,
    completions,
    simulate,
)

T = 1_000  # timeout, ns

#: Scaled down by the NUMBA_DISABLE_JIT run (test_no_jit.py), where the kernels are Python.
EXAMPLES = int(os.environ.get("ACKER_KERNEL_EXAMPLES", "300"))

SPECIAL_ROOTS = sorted(
    {0, 1, 2, 2**63 - 1, 2**63, U64_MAX}
    | set(colliding_roots(15, 6, 16))  # home: the last slot, so their run wraps around
    | set(colliding_roots(0, 6, 16))
)
root_ids = st.one_of(st.sampled_from(SPECIAL_ROOTS), st.integers(0, U64_MAX))
#: Small edge ids XOR to zero by coincidence (a tree "completes" early, later acks become
#: orphans): legal, and exactly the cases where a ledger could go wrong.
edge_ids = st.one_of(st.integers(0, U64_MAX), st.integers(0, 7))
spout_tasks = st.one_of(st.integers(0, 64), st.sampled_from([-1, -(2**31), 2**31 - 1]))
time_steps = st.one_of(
    st.sampled_from([0, 1, T - 1, T, T + 1]),
    st.integers(0, 3 * T),
    st.integers(-T, 0),  # a clock may step back; deadlines stay exact
)


class DrawnChoices:
    """The few ``random.Random`` methods ``simulate`` uses, drawn from Hypothesis, so that
    failing cases shrink towards simple trees."""

    def __init__(self, draw: st.DrawFn) -> None:
        self._draw = draw

    def choice(self, seq: Sequence[int]) -> int:
        return self._draw(st.sampled_from(seq))

    def randrange(self, n: int) -> int:
        return self._draw(st.integers(0, n - 1))

    def random(self) -> float:
        return self._draw(st.integers(0, 9)) / 10

    def choices(self, population: Sequence[str], weights: Sequence[int]) -> list[str]:
        # The first choice is the common one and the one shrinking goes to.
        pick = self._draw(st.integers(0, sum(weights) - 1))
        for item, cumulative in zip(population, itertools.accumulate(weights), strict=True):
            if pick < cumulative:
                return [item]
        raise AssertionError("unreachable")


@st.composite
def forests(draw: st.DrawFn) -> Forest:
    n = draw(st.integers(1, 8))
    roots = draw(st.lists(root_ids, min_size=n, max_size=n))
    tasks = draw(st.lists(spout_tasks, min_size=n, max_size=n))
    edges = (draw(edge_ids) for _ in itertools.count())
    return simulate(roots, tasks, edges, DrawnChoices(draw), max_steps=draw(st.integers(0, 40)))  # type: ignore[arg-type]


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(forest=forests(), data=st.data())
def test_kernel_equals_model(forest: Forest, data: st.DataObject) -> None:
    ledger = AckerLedger(T, initial_capacity=16)
    model = NaiveLedger(T)
    messages: list[Message] = data.draw(st.permutations(forest.messages), label="order")
    now = latest = data.draw(st.integers(-(2**40), 2**40), label="start")
    while messages:
        if data.draw(st.booleans(), label="empty batch"):
            assert completions(ledger.apply(*as_arrays([]), now_ns=now)) == []
        # The smallest choice sends the whole rest, so shrinking heads for one batch.
        size = len(messages) - data.draw(st.integers(0, len(messages) - 1), label="held back")
        batch, messages = messages[:size], messages[size:]
        got = completions(ledger.apply(*as_arrays(batch), now_ns=now))
        assert got == model.apply(batch, now)
        now += data.draw(time_steps, label="step")
        latest = max(latest, now)
        if data.draw(st.booleans(), label="expire"):
            assert sorted(ledger.due(now).tolist()) == model.due(now)
            assert sorted(completions(ledger.expire(now))) == model.expire(now)
        assert_same(ledger, model)
    now = latest + T  # every deadline is at most this
    assert sorted(completions(ledger.expire(now))) == model.expire(now)
    assert_same(ledger, model)
    stats = ledger.statistics()
    assert (stats.pending, stats.capacity) == (0, 16)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 12),
    seed=st.integers(0, 2**32),
    data=st.data(),
)
def test_whole_trees_get_storms_outcome(n: int, seed: int, data: st.DataObject) -> None:
    """With distinct roots and random 64-bit edge ids (no coincidental zeros), every tree
    ends as Storm says: a fail anywhere → FAILED; a tuple never acked → TIMED_OUT; else
    ACKED, whatever the delivery order and batching."""
    rnd = random.Random(seed)
    roots = data.draw(st.lists(root_ids, min_size=n, max_size=n, unique=True), label="roots")
    tasks = data.draw(st.lists(spout_tasks, min_size=n, max_size=n), label="tasks")
    edges = (rnd.getrandbits(64) | 1 for _ in itertools.count())
    forest = simulate(roots, tasks, edges, rnd, max_steps=60)
    messages = data.draw(st.permutations(forest.messages), label="order")
    ledger = AckerLedger(T, initial_capacity=16)
    model = NaiveLedger(T)
    outcomes: dict[int, int] = {}
    now = 0
    while messages:
        size = len(messages) - data.draw(st.integers(0, len(messages) - 1), label="held back")
        batch, messages = messages[:size], messages[size:]
        done = completions(ledger.apply(*as_arrays(batch), now_ns=now))
        assert done == model.apply(batch, now)
        for root, _, outcome, _ in done:
            assert root not in outcomes, "a root completed twice"
            outcomes[root] = outcome
        now += data.draw(st.integers(0, T // 10), label="step")  # well within the timeout
    done = sorted(completions(ledger.expire(now + T)))
    assert done == model.expire(now + T)
    for root, task, outcome, start in done:
        assert root not in outcomes
        outcomes[root] = outcome
        assert task == tasks[roots.index(root)]
        assert now + T - start >= T
    assert outcomes == {root: int(o) for root, o in forest.expected.items()}
    assert ledger.statistics().acked == sum(o == Outcome.ACKED for o in outcomes.values())
    assert_same(ledger, model)
