"""A slow, obviously-correct acker ledger: the reference model for ``acker_kernel``.

One dict from root id to a small mutable record, one Python loop over the batch, and
Storm's acker rules written out as plainly as possible. It
also holds the test helpers that speak the protocol: a simulator of Storm's XOR acking
for random tuple trees, and root ids that collide in the kernel's hash table.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from acker_kernel import AckerLedger, Completions, Op, Outcome, Snapshot
from acker_kernel._constants import HASH_MULTIPLIER

#: One completed root: (root, spout task, outcome, start (emit) time in ns).
Completion = tuple[int, int, int, int]
#: One acker message: (op, root, value, spout task).
Message = tuple[int, int, int, int]

U64_MAX = 2**64 - 1


@dataclass
class Entry:
    value: int
    start: int
    deadline: int
    spout_task: int | None = None  # None until the INIT arrives
    failed: bool = False


class NaiveLedger:
    """The same operations as ``AckerLedger``, one Python dict and no cleverness."""

    def __init__(self, timeout_ns: int) -> None:
        self.timeout_ns = timeout_ns
        self.entries: dict[int, Entry] = {}
        self.acked = self.failed = self.timed_out = self.orphans = 0

    def apply(self, messages: Iterable[Message], now_ns: int) -> list[Completion]:
        done: list[Completion] = []
        for op, root, value, spout_task in messages:
            entry = self.entries.get(root)
            if op == Op.RESET:
                if entry is not None:
                    entry.deadline = now_ns + self.timeout_ns
                continue
            if entry is None:
                entry = Entry(value=0, start=now_ns, deadline=now_ns + self.timeout_ns)
                self.entries[root] = entry
            if op == Op.INIT:
                entry.value ^= value
                entry.spout_task = spout_task
            elif op == Op.ACK:
                entry.value ^= value
            elif op == Op.FAIL:
                entry.failed = True
                entry.deadline = now_ns + self.timeout_ns
            if entry.spout_task is None:
                continue
            if entry.failed:
                outcome = Outcome.FAILED
                self.failed += 1
            elif entry.value == 0:
                outcome = Outcome.ACKED
                self.acked += 1
            else:
                continue
            del self.entries[root]
            done.append((root, entry.spout_task, int(outcome), entry.start))
        return done

    def reset_younger(self, roots: Iterable[int], now_ns: int, max_age_ns: int) -> int:
        """RESET each root whose entry is younger than ``max_age_ns``; how many were."""
        n = 0
        for root in roots:
            entry = self.entries.get(root)
            if entry is not None and now_ns - entry.start < max_age_ns:
                entry.deadline = now_ns + self.timeout_ns
                n += 1
        return n

    def due(self, now_ns: int) -> list[int]:
        return sorted(
            root
            for root, entry in self.entries.items()
            if entry.spout_task is not None and entry.deadline <= now_ns
        )

    def expire(self, now_ns: int) -> list[Completion]:
        """The timed-out roots, sorted by root (the kernel reports them in table order)."""
        done: list[Completion] = []
        for root, entry in sorted(self.entries.items()):
            if entry.deadline > now_ns:
                continue
            del self.entries[root]
            if entry.spout_task is None:
                self.orphans += 1
            else:
                self.timed_out += 1
                done.append((root, entry.spout_task, int(Outcome.TIMED_OUT), entry.start))
        return done

    def state(self) -> dict[int, tuple[int, int, bool, bool, int, int]]:
        """root -> (value, spout task or -1, spout known, failed, deadline, start)."""
        return {
            root: (
                e.value,
                -1 if e.spout_task is None else e.spout_task,
                e.spout_task is not None,
                e.failed,
                e.deadline,
                e.start,
            )
            for root, e in self.entries.items()
        }


# --- converting the kernel's arrays to the model's shapes ---------------------------------


def as_arrays(messages: list[Message]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The ``apply`` arguments for a list of messages."""
    n = len(messages)
    ops = np.array([m[0] for m in messages], np.uint8).reshape(n)
    roots = np.array([m[1] for m in messages], np.uint64).reshape(n)
    values = np.array([m[2] for m in messages], np.uint64).reshape(n)
    tasks = np.array([m[3] for m in messages], np.int32).reshape(n)
    return ops, roots, values, tasks


def completions(done: Completions) -> list[Completion]:
    assert done.root.dtype == np.uint64
    assert done.spout_task.dtype == np.int32
    assert done.outcome.dtype == np.uint8
    assert done.start_ns.dtype == np.int64
    return list(
        zip(
            done.root.tolist(),
            done.spout_task.tolist(),
            done.outcome.tolist(),
            done.start_ns.tolist(),
            strict=True,
        )
    )


def snapshot_state(snap: Snapshot) -> dict[int, tuple[int, int, bool, bool, int, int]]:
    state = {
        root: (value, task, known, failed, deadline, start)
        for root, value, task, known, failed, deadline, start in zip(
            snap.root.tolist(),
            snap.value.tolist(),
            snap.spout_task.tolist(),
            snap.spout_known.tolist(),
            snap.failed.tolist(),
            snap.deadline_ns.tolist(),
            snap.start_ns.tolist(),
            strict=True,
        )
    }
    assert len(state) == len(snap), "a root is in the table twice"
    return state


def assert_same(ledger: AckerLedger, model: NaiveLedger) -> None:
    """The kernel's whole state and counters equal the model's."""
    assert snapshot_state(ledger.snapshot()) == model.state()
    stats = ledger.statistics()
    assert (stats.pending, stats.acked, stats.failed, stats.timed_out, stats.orphans) == (
        len(model.entries),
        model.acked,
        model.failed,
        model.timed_out,
        model.orphans,
    )
    assert len(ledger) == stats.pending
    assert stats.capacity & (stats.capacity - 1) == 0
    assert stats.pending <= stats.capacity * 0.75


# --- adversarial keys -----------------------------------------------------------------------

_INVERSE = pow(int(HASH_MULTIPLIER), -1, 2**64)


def colliding_roots(bucket: int, count: int, capacity: int, first: int = 0) -> list[int]:
    """``count`` root ids whose home slot is ``bucket`` in a table of ``capacity`` slots.

    The home slot is the top bits of ``root * HASH_MULTIPLIER``; multiplying the wanted
    products by the multiplier's inverse mod 2**64 gives the roots. They keep sharing one
    home slot (``bucket * 2**k``) in every larger table too, as long as the low parts
    (``first`` up to ``first + count``) stay small. Different ``first`` give different roots.
    """
    bits = capacity.bit_length() - 1
    shift = 64 - bits
    assert 0 <= bucket < capacity and first + count <= 1 << shift
    return [(((bucket << shift) | low) * _INVERSE) & U64_MAX for low in range(first, first + count)]


def home_slot(root: int, capacity: int) -> int:
    bits = capacity.bit_length() - 1
    return ((root * int(HASH_MULTIPLIER)) & U64_MAX) >> (64 - bits)


# --- Storm's XOR protocol, simulated ----------------------------------------------------------


@dataclass
class _Tuple:
    anchors: dict[int, int]  # root -> the id this tuple holds for it
    ack_val: int = 0  # XOR of the edge ids of the children emitted anchored to it


@dataclass
class Forest:
    """Acker messages of simulated tuple trees, in causal order, plus each tree's fate."""

    messages: list[Message] = field(default_factory=list)
    #: root -> the outcome Storm gives the tree once every message arrived (and, for
    #: TIMED_OUT, an expire after the deadline); only meaningful with independent edge ids.
    expected: dict[int, Outcome] = field(default_factory=dict)


def simulate(
    roots: list[int],
    spout_tasks: list[int],
    edge_id: Iterable[int],
    choices: random.Random,
    max_steps: int = 40,
) -> Forest:
    """Play Storm's acking for one spout tuple per root.

    The spout emits each root to a random number of tasks (one edge id per copy) and sends
    INIT(root, XOR of those ids, spout task). Then tuples are taken at random and a bolt
    either acks it, after emitting children anchored to it and sometimes also to a second
    pending tuple (multi-anchoring: one edge id per anchor, so a root both anchors share
    gets ``e_A ^ e_B``), or fails it, or resets its timeout, or loses it (never acks: the
    tree can only time out). Every root of a tuple gets the message.
    """
    edges = iter(edge_id)
    forest = Forest()
    pending: list[_Tuple] = []
    fates: dict[int, set[str]] = {}
    for root, task in zip(roots, spout_tasks, strict=True):
        fan_out = choices.choice([0, 1, 1, 2, 3])
        init_val = 0
        for _ in range(fan_out):
            e = next(edges)
            init_val ^= e
            pending.append(_Tuple({root: e}))
        forest.messages.append((int(Op.INIT), root, init_val, task))
        fates.setdefault(root, set())
    for _ in range(max_steps):
        if not pending:
            break
        t = pending.pop(choices.randrange(len(pending)))
        action = choices.choices(["ack", "fail", "reset", "lose"], [12, 1, 1, 1])[0]
        if action == "reset":
            forest.messages.extend((int(Op.RESET), r, 0, 0) for r in t.anchors)
            pending.append(t)
            continue
        if action == "fail":
            forest.messages.extend((int(Op.FAIL), r, 0, 0) for r in t.anchors)
            for r in t.anchors:
                fates[r].add("fail")
            continue
        if action == "lose":
            for r in t.anchors:
                fates[r].add("lose")
            continue
        for _ in range(choices.choice([0, 0, 1, 1, 2, 3])):
            anchors = [t]
            if pending and choices.random() < 0.3:
                anchors.append(pending[choices.randrange(len(pending))])
            child: dict[int, int] = {}
            for a in anchors:  # one fresh edge id per anchor, as Storm's bolt emit does
                e = next(edges)
                a.ack_val ^= e
                for r in a.anchors:
                    child[r] = child.get(r, 0) ^ e
            pending.append(_Tuple(child))
        forest.messages.extend((int(Op.ACK), r, i ^ t.ack_val, 0) for r, i in t.anchors.items())
    for t in pending:  # still pending when the simulation stops: never acked
        for r in t.anchors:
            fates[r].add("lose")
    for root, fate in fates.items():
        if "fail" in fate:
            forest.expected[root] = Outcome.FAILED
        elif "lose" in fate:
            forest.expected[root] = Outcome.TIMED_OUT
        else:
            forest.expected[root] = Outcome.ACKED
    return forest
