"""Hypothesis: every call of ``AckerLedger`` interleaved at random (``apply`` with and
without emit times, ``expire``, ``due``, ``reset_younger``), on a clock that may step back,
with bursts that grow a small table in the middle of a batch, drains that shrink it, roots
that share a bucket, and every table counted as large (so it is made ahead on a thread and
a nearly empty one waits before shrinking). Kernel and model must agree after every call."""

from __future__ import annotations

import os
from collections.abc import Iterable
from unittest import mock

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acker_kernel import AckerLedger, Op, _ledger

from .naive import (
    U64_MAX,
    Completion,
    Entry,
    Message,
    NaiveLedger,
    as_arrays,
    assert_same,
    colliding_roots,
    completions,
)

T = 1_000  # timeout, ns
INIT, ACK, FAIL, RESET = (int(op) for op in Op)
EXAMPLES = int(os.environ.get("ACKER_KERNEL_EXAMPLES", "300")) // 2

ROOTS = sorted({0, 1, 2**63, U64_MAX, *colliding_roots(15, 5, 16), *colliding_roots(3, 5, 16)})
root_ids = st.sampled_from(ROOTS) | st.integers(0, U64_MAX)
values = st.integers(0, 3) | st.integers(0, U64_MAX)
messages = st.tuples(
    st.sampled_from([INIT, ACK, ACK, FAIL, RESET]), root_ids, values, st.integers(-1, 4)
)
#: a clock may step back (deadlines stay exact), or jump past a whole timeout
steps = st.sampled_from([0, 1, T - 1, T, T + 1, -1, -T]) | st.integers(-2 * T, 3 * T)


class StartingLedger(NaiveLedger):
    """The model, with ``apply``'s optional emit times: an INIT sets its root's start."""

    def apply_with_starts(
        self, batch: list[Message], now_ns: int, starts: list[int] | None
    ) -> list[Completion]:
        done: list[Completion] = []
        for k, message in enumerate(batch):
            op, root = message[0], message[1]
            if starts is not None and op == INIT:
                entry = self.entries.get(root)
                if entry is None:  # made as by any first message, then given its start
                    entry = Entry(value=0, start=now_ns, deadline=now_ns + self.timeout_ns)
                    self.entries[root] = entry
                entry.start = starts[k]
            done += self.apply([message], now_ns)
        return done


@st.composite
def calls(draw: st.DrawFn) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    used = [0]  # roots the script has named, for resets that find their entry
    fresh = 1
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["apply", "burst", "drain", "expire", "reset", "step"]))
        if kind == "apply":
            batch = draw(st.lists(messages, max_size=12))
            starts = draw(
                st.none()
                | st.lists(st.integers(-(2**40), 2**40), min_size=len(batch), max_size=len(batch))
            )
            out.append((kind, (batch, starts)))
            used += [m[1] for m in batch]
        elif kind == "burst":  # new roots, perhaps all in one bucket: the table grows
            n = draw(st.integers(1, 120))
            bucket = draw(st.none() | st.integers(0, 15))
            if bucket is None:
                roots = [(fresh * 1000 + i) * 0x9E37 & U64_MAX for i in range(n)]
            else:
                roots = colliding_roots(bucket, n, 16, first=fresh * 1000)
            fresh += 1
            used += roots[:3]
            op = draw(st.sampled_from([INIT, ACK]))
            out.append(("apply", ([(op, r, i + 1, i % 3) for i, r in enumerate(roots)], None)))
        elif kind == "reset":
            some = st.lists(st.sampled_from(used) | root_ids, max_size=6)
            out.append(
                (kind, (draw(some), draw(st.sampled_from([0, 1, T]) | st.integers(0, 3 * T))))
            )
        elif kind == "step":
            out.append((kind, draw(steps)))
        else:
            out.append((kind, draw(st.booleans())))
    return out


def run(
    ledger: AckerLedger, model: StartingLedger, script: Iterable[tuple[str, object]], keep: int
) -> None:
    now = 0
    largest = 0
    for kind, arg in script:
        if kind == "apply":
            batch, starts = arg  # type: ignore[misc]
            start_ns = None if starts is None else np.array(starts, np.int64)
            done = ledger.apply(*as_arrays(batch), now_ns=now, start_ns=start_ns)
            assert completions(done) == model.apply_with_starts(batch, now, starts)
        elif kind == "drain":  # complete (or leave as orphans) everything: the table shrinks
            drain: list[Message] = []
            for root, entry in list(model.entries.items()):
                drain.append((ACK, root, entry.value, 0))
                if arg and entry.spout_task is None:
                    drain.append((INIT, root, 0, 1))
            assert completions(ledger.apply(*as_arrays(drain), now_ns=now)) == model.apply(
                drain, now
            )
        elif kind == "expire":
            assert sorted(ledger.due(now).tolist()) == model.due(now)
            assert sorted(completions(ledger.expire(now))) == model.expire(now)
        elif kind == "reset":
            roots, max_age = arg  # type: ignore[misc]
            got = ledger.reset_younger(np.array(roots, np.uint64), now, max_age)
            assert got == model.reset_younger(roots, now, max_age)
        else:
            now += arg  # type: ignore[operator]
        assert_same(ledger, model)
        capacity = ledger.statistics().capacity
        largest = max(largest, capacity)
        assert capacity >= min(largest, keep)  # once grown to the kept size, never below it
    # Whatever happened, every root is gone once the latest deadline passed.
    end = max([e.deadline for e in model.entries.values()], default=now)
    assert sorted(completions(ledger.expire(end))) == model.expire(end)
    assert_same(ledger, model)
    assert len(ledger) == 0


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    script=calls(),
    initial=st.sampled_from([16, 32]),
    keep=st.sampled_from([0, 64, 100, 512]),
    large=st.booleans(),
)
def test_every_call_interleaved_equals_the_model(
    script: list[tuple[str, object]], initial: int, keep: int, large: bool
) -> None:
    with mock.patch.object(_ledger, "AHEAD_MIN_BYTES", 0 if large else _ledger.AHEAD_MIN_BYTES):
        ledger = AckerLedger(T, initial_capacity=initial, keep_capacity=keep)
        run(ledger, StartingLedger(T), script, keep)
