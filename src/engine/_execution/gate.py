"""Gates: an object that stands in front of a bolt's input, and the acks it may hold back.

``engine.state`` wraps every stateful bolt, and every bolt upstream of one, to align the
checkpoint barriers over the bolt's inputs and to run the checkpoint between the tuples
that came before a barrier and those that came after. Yet the tuples themselves should run
the way the wrapped bolt runs without it: a basic bolt on the executor's per-tuple fast
path, a batch bolt on its columns. So the wrapper is an ``InputGate``: the executor runs
the gate's ``delegate`` as it runs any bolt of that kind, and hands every input item (a
list of tuples or a ``TupleBatch``) to the gate's ``admit`` first, which yields the parts
to execute now and does its own work between them. A gate never looks at each tuple of an
item: what it must find (a barrier) travels as an item of its own.

``AckHold``: a stateful bolt acks a tuple only once the checkpoint holding the tuple's
effect has committed. The hold stands in for the acker operations of the task's collector
(``BoltExecutor.hold_acks``): ACKs are kept, as arrays of (root, value), until the gate
releases them at the commit or fails their trees at a rollback; FAILs and RESETs go out at
once. The bolt's own acks, the basic bolt's automatic ones included, are thus held without
a per-tuple wrapper.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .._columnar.batch import TupleBatch
from .._columnar.batch_collector import BatchCollector
from .._model.tuple import Tuple
from .acker import AckerOps

__all__ = ["AckHold", "HeldAcks", "InputGate"]

#: Acks taken out of a hold: (roots, values), uint64 arrays of one length.
HeldAcks = tuple[np.ndarray, np.ndarray]
_NONE = np.zeros(0, np.uint64)


class InputGate(ABC):
    """A bolt object in front of the bolt it runs (``delegate``); see the module's doc.

    The executor calls ``bind`` before ``prepare``, then ``prepare`` with the signature of
    the delegate's kind (without a collector for a basic bolt), and passes every input
    through ``admit``. Tick tuples do not pass through it.
    """

    delegate: Any

    @abstractmethod
    def bind(
        self,
        control: BatchCollector,
        hold_acks: Callable[[], AckHold],
        failures: Callable[[], int],
    ) -> None:
        """Receive the gate's own collector (``control``: what it emits, acks and fails
        itself; never held), how to hold the task's acks from now on, and how many input
        tuples the bolt failed so far (``failures()``: by its collector, by raising, or
        by an injected fault)."""

    @abstractmethod
    def admit(self, item: list[Tuple] | TupleBatch) -> Iterator[list[Tuple] | TupleBatch]:
        """The parts of ``item`` to execute now, in order (and any kept earlier that may
        run now); the gate acts between them."""


class AckHold:
    """A task's ACK operations, kept (``BoltExecutor.hold_acks``); other operations pass.

    It has the parts of ``AckerOps`` a bolt's collectors use: the per-tuple lists
    (``ack_roots`` / ``ack_vals``, appended to) and ``add_acks`` / ``add_fails`` /
    ``add_resets`` for arrays.
    """

    __slots__ = ("_notify", "_ops", "ack_roots", "ack_vals", "chunks", "held_in_chunks")

    def __init__(self, ops: AckerOps, notify: Callable[[], None]) -> None:
        self._ops = ops
        self._notify = notify
        self.ack_roots: list[int] = []
        self.ack_vals: list[int] = []
        self.chunks: list[HeldAcks] = []
        self.held_in_chunks = 0

    def __len__(self) -> int:
        """ACK operations held (a run of one root's acks may have been folded into one)."""
        return len(self.ack_roots) + self.held_in_chunks

    def add_acks(self, roots: np.ndarray, values: np.ndarray) -> None:
        """Hold the ACKs of ``roots`` with ``values`` (a batch's acks, as arrays)."""
        if roots.shape[0]:
            self.chunks.append((roots, values))
            self.held_in_chunks += int(roots.shape[0])

    def add_fails(self, roots: np.ndarray) -> None:
        """FAILs are not held: they go to the acker now."""
        self._ops.add_fails(roots)

    def add_resets(self, roots: np.ndarray) -> None:
        """RESETs are not held: they go to the acker now."""
        self._ops.add_resets(roots)

    def take(self) -> HeldAcks:
        """Every ACK held so far, as arrays; the hold is then empty."""
        parts = [(np.array(self.ack_roots, np.uint64), np.array(self.ack_vals, np.uint64))]
        parts.extend(self.chunks)
        self.ack_roots.clear()  # in place: collectors hold the bound appends
        self.ack_vals.clear()
        self.chunks.clear()
        self.held_in_chunks = 0
        if len(parts) == 1:
            return parts[0]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def release(self, acks: HeldAcks) -> None:
        """Send ``acks`` (from ``take``) to the acker: their tuples are acked."""
        roots, values = acks
        if roots.shape[0]:
            self._ops.add_acks(roots, values)
            self._notify()

    def fail(self, acks: HeldAcks) -> None:
        """Fail the trees of ``acks`` (from ``take``): their tuples are replayed."""
        roots = acks[0]
        if roots.shape[0]:
            self._ops.add_fails(np.unique(roots))
            self._notify()


def join_held(parts: list[HeldAcks]) -> HeldAcks:
    """Several ``take`` results as one."""
    if not parts:
        return _NONE, _NONE
    if len(parts) == 1:
        return parts[0]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
