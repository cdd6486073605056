"""The classes users subclass: ``StatefulBolt`` and ``BasicStatefulBolt`` (Storm's
``IStatefulBolt`` / ``BaseStatefulBolt``, rich and basic forms).

A stateful bolt gets its ``KeyValueState`` in ``init_state`` before its first tuple, and
keeps it in that object; the engine checkpoints it (``engine.state`` docs). Its acks are
held back until the state that includes the tuple is committed, so a tuple is acked only
once its effect on the state is durable: after a crash the state is the last committed one
and every tuple not in it is replayed.
"""

from __future__ import annotations

from typing import Any

from .._component import BasicBolt, Bolt

__all__ = ["BasicStatefulBolt", "StatefulBolt", "StatefulComponent"]


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
