"""The classes users subclass: ``StatefulBolt`` and ``BasicStatefulBolt`` (Storm's
``IStatefulBolt`` / ``BaseStatefulBolt``, rich and basic forms), and their batch forms
``StatefulBatchBolt`` and ``BasicStatefulBatchBolt`` (a batch of rows per call).

A stateful bolt gets its ``KeyValueState`` in ``init_state`` before its first tuple, and
keeps it in that object; the engine checkpoints it (``engine.state`` docs). Its acks are
held back until the state that includes the tuple is committed, so a tuple is acked only
once its effect on the state is durable: after a crash the state is the last committed one
and every tuple not in it is replayed.
"""

from __future__ import annotations

from typing import Any

from .._model.batch_component import BasicBatchBolt, BatchBolt
from .._model.component import BasicBolt, Bolt

__all__ = [
    "BasicStatefulBatchBolt",
    "BasicStatefulBolt",
    "StatefulBatchBolt",
    "StatefulBolt",
    "StatefulComponent",
]


class StatefulComponent:
    """Storm's ``IStatefulComponent`` hooks, shared by both forms."""

    def init_state(self, state: Any) -> Any:
        """Receive the task's ``KeyValueState`` (the last committed state) before the first
        tuple, and again after a rollback."""

    def pre_prepare(self, txid: int) -> Any:
        """Called before the state is prepared for checkpoint ``txid``."""

    def pre_commit(self, txid: int) -> Any:
        """Called before the state of checkpoint ``txid`` is committed."""

    def pre_rollback(self) -> Any:
        """Called before the state rolls back to the last committed checkpoint."""


class StatefulBolt(StatefulComponent, Bolt):
    """A rich bolt with checkpointed state.

    >>> from engine.state import StatefulBolt
    >>> class WordCount(StatefulBolt):
    ...     def init_state(self, state):
    ...         self.counts = state
    ...     def prepare(self, conf, context, collector):
    ...         self.collector = collector
    ...     def execute(self, tuple):
    ...         word = tuple["word"]
    ...         self.counts.put(word, self.counts.get(word, 0) + 1)
    ...         self.collector.ack(tuple)     # held until the checkpoint commits
    """


class BasicStatefulBolt(StatefulComponent, BasicBolt):
    """A basic bolt (emits anchored, input acked after ``execute``) with checkpointed state.

    >>> from engine.state import BasicStatefulBolt
    >>> class WordCount(BasicStatefulBolt):
    ...     def init_state(self, state):
    ...         self.counts = state
    ...     def execute(self, tuple, collector):
    ...         word = tuple["word"]
    ...         self.counts.put(word, self.counts.get(word, 0) + 1)
    ...         collector.emit([word, self.counts.get(word)])
    ...     def declare_output_fields(self, declarer):
    ...         declarer.declare(["word", "count"])
    """


class BasicStatefulBatchBolt(StatefulComponent, BasicBatchBolt):
    """A basic batch bolt (rows auto-anchored, acked when ``execute_batch`` returns) with
    checkpointed state: the columnar road into state. Its rows' acks are held until the
    checkpoint that holds their effect commits, as a ``BasicStatefulBolt``'s.

    >>> from collections import Counter
    >>> from engine.state import BasicStatefulBatchBolt
    >>> class WordCount(BasicStatefulBatchBolt):
    ...     def init_state(self, state):
    ...         self.counts = state
    ...     def execute_batch(self, batch, collector):
    ...         for word, n in Counter(batch.column("word")).items():
    ...             self.counts.put(word, self.counts.get(word, 0) + n)
    """


class StatefulBatchBolt(StatefulComponent, BatchBolt):
    """A batch bolt that acks its rows itself (``collector.ack(batch, rows)``), with
    checkpointed state; those acks are held until the commit."""
