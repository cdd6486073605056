"""Batch bolts: one bolt instance per request or batch id, told when its batch is complete.

Storm's ``IBatchBolt`` and ``BatchBoltExecutor``. A ``BatchBolt`` is written as if it saw one
batch only: ``prepare`` receives the batch id, ``execute`` every tuple of the batch,
``finish_batch`` runs once the ``CoordinatedBolt`` around it knows the batch is complete
at this task. The DRPC and transactional builders wrap batch bolts for you.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from typing import Any

from .._execution.collector import BasicOutputCollector, OutputCollector
from .._model.component import Bolt, Component, OutputFieldsDeclarer
from .._model.errors import FailedException, InvalidComponentError, ReportedFailedException
from .._model.tuple import Tuple
from ._coordinated import FinishedCallback, TimeoutCallback
from ._envelope import request_id_of

__all__ = ["BatchBolt", "BatchBoltExecutor", "BatchOutputCollector"]


class BatchOutputCollector(BasicOutputCollector):
    """What a ``BatchBolt`` emits through.

    Emits made in ``execute`` are anchored to the tuple being executed; emits made in
    ``finish_batch`` are anchored to the batch's coordination tuples, so they stay in the
    request's (or transaction's) tuple tree either way. (A ``BasicOutputCollector`` whose
    input its executor sets to the anchor of the moment.)
    """

    __slots__ = ()


class BatchBolt(Component):
    """Processes one batch: subclass it and override ``execute`` and ``finish_batch``.

    >>> from engine.coordination import BatchBolt
    >>> class CountBatch(BatchBolt):
    ...     def prepare(self, conf, context, collector, id):
    ...         self.collector, self.id, self.count = collector, id, 0
    ...     def execute(self, tuple):
    ...         self.count += 1
    ...     def finish_batch(self):
    ...         self.collector.emit([self.id, self.count])
    ...     def declare_output_fields(self, declarer):
    ...         declarer.declare(["id", "count"])

    A fresh copy of the bolt (a pickle copy of the declared object) serves each id. Raise
    ``FailedException`` in ``execute`` or ``finish_batch`` to fail the batch.
    """

    def prepare(
        self,
        conf: Mapping[str, Any],
        context: Any,
        collector: BatchOutputCollector,
        id: Any,
    ) -> None:
        """Called once per batch, before its first tuple (or before ``finish_batch`` for a
        batch that brought this task no tuples)."""

    def execute(self, tuple: Tuple) -> None:
        """One tuple of the batch. It is acked when this returns (failed if it raises
        ``FailedException``); emit results here, or keep state for ``finish_batch``."""
        raise NotImplementedError

    def finish_batch(self) -> None:
        """Every tuple of the batch reached this task: emit the batch's results here."""


class BatchBoltExecutor(Bolt, FinishedCallback, TimeoutCallback):
    """Runs a ``BatchBolt`` as a bolt: one instance per id, ``finish_batch`` on
    ``finished_id``. Wrap it in a ``CoordinatedBolt`` (the builders do)."""

    def __init__(self, bolt: BatchBolt) -> None:
        if not isinstance(bolt, BatchBolt):
            raise InvalidComponentError(
                f"BatchBoltExecutor runs an engine.coordination.BatchBolt, got "
                f"{type(bolt).__name__}"
            )
        if type(bolt).execute is BatchBolt.execute:
            raise InvalidComponentError(
                f"batch bolt {type(bolt).__name__} does not implement execute"
            )
        self._bolt = bolt

    @property
    def bolt(self) -> BatchBolt:
        """The batch bolt as declared: the prototype each id's copy is made from."""
        return self._bolt

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: OutputCollector) -> None:
        self._conf = conf
        self._context = context
        self._collector = collector
        self._out = BatchOutputCollector(collector)
        self._prototype = pickle.dumps(self._bolt)
        self._open: dict[Any, BatchBolt] = {}

    def _bolt_for(self, id: Any) -> BatchBolt:
        bolt = self._open.get(id)
        if bolt is None:
            bolt = self._open[id] = pickle.loads(self._prototype)
            bolt.prepare(self._conf, self._context, self._out, id)
        return bolt

    def execute(self, tuple: Tuple) -> None:
        bolt = self._bolt_for(request_id_of(tuple))
        out = self._out
        out._input = tuple
        try:
            bolt.execute(tuple)
        except FailedException as exc:
            if isinstance(exc, ReportedFailedException):
                self._collector.report_error(exc)
            self._collector.fail(tuple)
            return
        finally:
            out._input = None
        self._collector.ack(tuple)

    def finished_id(self, id: Any) -> None:
        bolt = self._open.pop(id, None) or self._bolt_for_finish(id)
        bolt.finish_batch()

    def _bolt_for_finish(self, id: Any) -> BatchBolt:
        bolt = self._bolt_for(id)
        del self._open[id]
        return bolt

    def timeout_id(self, id: Any) -> None:
        self._open.pop(id, None)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        self._bolt.declare_output_fields(declarer)

    def component_configuration(self) -> Mapping[str, Any] | None:
        return self._bolt.component_configuration()
