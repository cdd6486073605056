"""A rule-based Hypothesis machine: long mixed sequences of operations, bursts that grow a
16-slot table several times, drains and mass expiries that shrink it back, adversarial
keys that pile into one bucket. Kernel and model must agree after every step."""

from __future__ import annotations

import itertools
import os

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from acker_kernel import MAX_LOAD_FACTOR, MIN_LOAD_FACTOR, AckerLedger, Op

from .naive import (
    U64_MAX,
    Message,
    NaiveLedger,
    as_arrays,
    assert_same,
    colliding_roots,
    completions,
)

T = 1_000  # timeout, ns
INITIAL = 16
INIT, ACK, FAIL, RESET = (int(op) for op in Op)
EXAMPLES = int(os.environ.get("ACKER_KERNEL_EXAMPLES", "300")) // 3

root_ids = st.one_of(
    st.sampled_from([0, 1, U64_MAX, *colliding_roots(15, 4, INITIAL)]),
    st.integers(0, U64_MAX),
)
values = st.one_of(st.integers(0, U64_MAX), st.integers(0, 3))
spout_tasks = st.integers(-1, 8)


class LedgerMachine(RuleBasedStateMachine):
    roots = Bundle("roots")

    def __init__(self) -> None:
        super().__init__()
        self.ledger = AckerLedger(T, initial_capacity=INITIAL)
        self.model = NaiveLedger(T)
        self.now = 0
        self.batch: list[Message] = []
        self.fresh = itertools.count(1)  # keeps burst roots new
        self.capacities = [INITIAL]

    # --- building the next batch ----------------------------------------------------------

    @initialize(target=roots, root=root_ids, n=st.integers(0, 100))
    def first_roots(self, root: int, n: int) -> int:
        """Start with a first root and a burst of ``n`` others (13 or more grow the table)."""
        if n:
            self.burst(n, None, INIT)
        return root

    @rule(target=roots, root=root_ids)
    def add_root(self, root: int) -> int:
        return root

    @rule(root=roots, value=values, task=spout_tasks)
    def init(self, root: int, value: int, task: int) -> None:
        self.batch.append((INIT, root, value, task))

    @rule(root=roots, value=values)
    def ack(self, root: int, value: int) -> None:
        self.batch.append((ACK, root, value, 0))

    @rule(root=roots)
    def ack_to_zero(self, root: int) -> None:
        entry = self.model.entries.get(root)
        self.batch.append((ACK, root, entry.value if entry else 0, 0))

    @rule(root=roots)
    def fail(self, root: int) -> None:
        self.batch.append((FAIL, root, 0, 0))

    @rule(root=roots)
    def reset(self, root: int) -> None:
        self.batch.append((RESET, root, 0, 0))

    # --- calls ------------------------------------------------------------------------------

    @rule(
        some=st.lists(roots, max_size=6), max_age=st.sampled_from([0, 1, T]) | st.integers(0, 3 * T)
    )
    def reset_younger(self, some: list[int], max_age: int) -> None:
        got = self.ledger.reset_younger(
            as_arrays([(RESET, r, 0, 0) for r in some])[1], self.now, max_age
        )
        assert got == self.model.reset_younger(some, self.now, max_age)

    @rule()
    def flush(self) -> None:
        batch, self.batch = self.batch, []
        self._apply(batch)

    @rule(
        n=st.integers(1, 400),
        bucket=st.none() | st.integers(0, INITIAL - 1),
        op=st.sampled_from([INIT, ACK]),
    )
    def burst(self, n: int, bucket: int | None, op: int) -> None:
        """Many new roots at once, perhaps all in one bucket: the table must grow."""
        start = next(self.fresh) * 1000
        if bucket is None:
            new = [(start + i) * 0x9E37 & U64_MAX for i in range(n)]
        else:
            new = colliding_roots(bucket, n, INITIAL, first=start)
        self._apply([(op, r, i + 1, i % 5) for i, r in enumerate(new)])

    @rule(with_init=st.booleans())
    def drain(self, with_init: bool) -> None:
        """Complete (or leave as orphans) everything pending: the table must shrink."""
        messages: list[Message] = []
        for root, entry in list(self.model.entries.items()):
            messages.append((ACK, root, entry.value, 0))
            if with_init and entry.spout_task is None:
                messages.append((INIT, root, 0, 1))
        self._apply(messages)

    @rule(step=st.sampled_from([0, 1, T - 1, T, T + 1]) | st.integers(0, 2 * T))
    def advance(self, step: int) -> None:
        self.now += step

    @rule()
    def expire(self) -> None:
        assert sorted(self.ledger.due(self.now).tolist()) == self.model.due(self.now)
        assert sorted(completions(self.ledger.expire(self.now))) == self.model.expire(self.now)
        self._resized()

    @precondition(lambda self: self.capacities[-1] > INITIAL)
    @rule()
    def expire_everything(self) -> None:
        self.now += T
        assert sorted(completions(self.ledger.expire(self.now))) == self.model.expire(self.now)
        assert self.ledger.statistics().capacity == INITIAL
        self._resized()

    def _apply(self, messages: list[Message]) -> None:
        got = completions(self.ledger.apply(*as_arrays(messages), now_ns=self.now))
        assert got == self.model.apply(messages, self.now)
        self._resized()

    def _resized(self) -> None:
        stats = self.ledger.statistics()
        if stats.capacity != self.capacities[-1]:
            self.capacities.append(stats.capacity)
        # After every call the load is in bounds: grown when full, shrunk when nearly empty.
        assert stats.pending <= stats.capacity * MAX_LOAD_FACTOR
        assert stats.capacity == INITIAL or stats.pending >= stats.capacity * MIN_LOAD_FACTOR
        assert stats.rehashes >= len(self.capacities) - 1

    @invariant()
    def same_state(self) -> None:
        assert_same(self.ledger, self.model)

    def teardown(self) -> None:
        sizes = self.capacities
        event(f"grew {sum(b > a for a, b in itertools.pairwise(sizes))} times")
        event(f"shrank {sum(b < a for a, b in itertools.pairwise(sizes))} times")


LedgerMachine.TestCase.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_ledger_machine = LedgerMachine.TestCase


def test_a_scripted_run_grows_and_shrinks_several_times() -> None:
    """The machine's rules, in an order that is sure to resize: three bursts and drains."""
    machine = LedgerMachine()
    for n in (100, 1000, 300):
        machine.burst(n, None, INIT)
        machine.burst(n // 10, 3, ACK)
        machine.same_state()
        machine.drain(with_init=True)
        machine.same_state()
    machine.advance(T)
    machine.expire()
    machine.same_state()
    assert machine.capacities == [INITIAL, 256, INITIAL, 2048, INITIAL, 512, INITIAL]
    assert machine.ledger.statistics().rehashes == 4 + 1 + 7 + 1 + 5 + 1
