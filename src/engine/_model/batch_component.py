"""Batch components: bolts that take a whole ``TupleBatch`` per call.

A ``BasicBatchBolt`` is the batch form of ``BasicBolt``: its output rows are anchored to
input rows by index and every input row is acked when ``execute_batch`` returns, except
the rows it failed (``collector.fail(rows)``), whose trees alone fail. A ``BatchBolt`` is
the batch form of ``Bolt``: it acks and fails (subsets of) batches itself, now or later.
Spouts need no batch class: any spout may call ``collector.emit_batch(columns, msg_ids)``.

Per-tuple and batch components mix freely in one topology: a batch bolt fed by per-tuple
emits gets them as a batch, a per-tuple bolt fed by a batch gets ``Tuple`` views. Each is a
component kind of its own (``set_bolt`` takes all four), not a ``Bolt`` without ``execute``:
a batch bolt's collector is an ``engine.BatchCollector`` (annotate with it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .component import Component

__all__ = ["BasicBatchBolt", "BatchBolt"]


class BasicBatchBolt(Component):
    """Processes a batch; output anchored to input rows; the batch acked on return.

    >>> from engine import BasicBatchBolt
    >>> class Split(BasicBatchBolt):
    ...     def execute_batch(self, batch, collector):
    ...         # one list of output rows per input row: each word anchored to its sentence
    ...         collector.emit_flat([s.split() for s in batch.column("sentence")])
    ...     def declare_output_fields(self, declarer):
    ...         declarer.declare(["word"])

    Raise ``FailedException`` to fail every row of the batch, or call
    ``collector.fail(rows)`` to fail only those rows' trees.
    """

    def prepare(self, conf: Mapping[str, Any], context: Any) -> Any:
        """Called once per task before the first ``execute_batch``."""

    def execute_batch(self, batch: Any, collector: Any) -> Any:
        """Process every row of ``batch`` (a ``TupleBatch``); emit through ``collector``
        (the task's ``BatchCollector``)."""
        raise NotImplementedError

    def cleanup(self) -> Any:
        """Called when the topology shuts down."""


class BatchBolt(Component):
    """Processes batches and acks or fails their rows itself (Storm's rich ``Bolt``).

    >>> from engine import BatchBolt
    >>> class Keep(BatchBolt):
    ...     def prepare(self, conf, context, collector):
    ...         self.collector = collector
    ...     def execute_batch(self, batch):
    ...         ok = [i for i, v in enumerate(batch.column("n")) if v >= 0]
    ...         self.collector.emit_batch([[batch.column("n")[i] for i in ok]], anchors=ok)
    ...         self.collector.ack(batch, ok)
    ...         self.collector.fail(batch, [i for i in range(len(batch)) if i not in ok])
    ...     def declare_output_fields(self, declarer):
    ...         declarer.declare(["n"])

    Every row must eventually be acked or failed, exactly once.
    """

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> Any:
        """Called once per task before the first ``execute_batch``, with the topology's
        config, the task's ``TopologyContext`` and its ``BatchCollector``."""

    def execute_batch(self, batch: Any) -> Any:
        """Process ``batch`` (a ``TupleBatch``); ack or fail its rows, now or later."""
        raise NotImplementedError

    def cleanup(self) -> Any:
        """Called when the topology shuts down."""
