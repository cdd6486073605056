"""The system components at the source of a transactional topology.

``TransactionalSpoutCoordinator`` (one task) drives transactions as Storm's does:
each active transaction goes PROCESSING (its batch is out) -> PROCESSED (the batch's tuple
tree was acked) -> COMMITTING (the commit tuple is out) -> committed (the commit tree was
acked: the next txid becomes current and is persisted). Up to ``topology.max.spout.pending``
transactions (1 if unset) are active at once, so batches are processed in parallel, but
only the current (lowest uncommitted) transaction is ever sent the commit tuple: commits
happen strictly in txid order. A failed attempt drops its transaction and every later
one; they are emitted again with new attempt ids and the metadata stored for them, so
each replay carries the identical batch.

``TransactionalSpoutBatchExecutor`` runs the spout's emitter in every task of the spout
component, inside a ``CoordinatedBolt`` with no sources: it emits an attempt's batch when
the attempt's batch tuple arrives, anchored to it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from .._model.component import Bolt, OutputFieldsDeclarer, Spout
from .._model.errors import FailedException, ReportedFailedException
from .._model.tuple import Tuple
from ..coordination import BatchOutputCollector, request_id_of
from ..coordination._seeding import task_random
from ._attempt import INIT_TXID, TransactionAttempt
from ._spouts import TransactionalSpout
from ._state import RotatingTransactionalState, StateStore

__all__ = [
    "BATCH_STREAM_ID",
    "COMMIT_STREAM_ID",
    "TransactionalSpoutBatchExecutor",
    "TransactionalSpoutCoordinator",
]

#: The coordinator's streams: ``(tx, tx-meta, committed-txid)`` and ``(tx)``.
BATCH_STREAM_ID = "batch"
COMMIT_STREAM_ID = "commit"
_CURRENT_TX = "currtx"


class _Stage(enum.Enum):
    PROCESSING = "processing"
    PROCESSED = "processed"
    COMMITTING = "committing"


class _Status:
    __slots__ = ("attempt", "stage")

    def __init__(self, attempt: TransactionAttempt) -> None:
        self.attempt = attempt
        self.stage = _Stage.PROCESSING

    def __repr__(self) -> str:
        return f"{self.attempt!r} <{self.stage.value}>"


class TransactionalSpoutCoordinator(Spout):
    """Emits batch and commit tuples, one tree per attempt (message id = the attempt).

    It only changes state in ``ack`` and ``fail`` and emits from ``next_tuple``, which the
    engine calls whenever fewer trees than ``topology.max.spout.pending`` are pending.
    """

    def __init__(self, spout: TransactionalSpout, store: StateStore, transactional_id: str) -> None:
        self.spout = spout
        self._store = store
        self._tx_id = transactional_id

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self._collector = collector
        self._state = self._store.open(self._tx_id, "coordinator")
        self._meta = RotatingTransactionalState(self._state, "meta", strict_order=True)
        self._coordinator = self.spout.get_coordinator(conf, context)
        self._current: int = self._state.get_data(_CURRENT_TX, INIT_TXID)
        self._max_active: int = conf.get("topology.max.spout.pending") or 1
        self._active: dict[int, _Status] = {}
        # attempt ids from topology.seed (a restart draws a fresh sequence: see task_random)
        self._rand = task_random(conf, context, "transaction-attempts").getrandbits
        #: transaction ids committed by this task, in order (for inspection)
        self.committed: list[int] = []

    @property
    def current_txid(self) -> int:
        """The lowest transaction id not committed yet."""
        return self._current

    def next_tuple(self) -> None:
        self._sync()

    def _sync(self) -> None:
        status = self._active.get(self._current)
        if status is not None and status.stage is _Stage.PROCESSED:
            status.stage = _Stage.COMMITTING
            self._collector.emit([status.attempt], COMMIT_STREAM_ID, status.attempt)
        active = self._active
        if len(active) >= self._max_active:
            return
        committed = self._current - 1 if self._current > INIT_TXID else None
        txid = self._current
        for _ in range(self._max_active):
            if txid not in active:
                if not (self._meta.has_cache(txid) or self._coordinator.is_ready()):
                    # a later txid cannot start before this one has its metadata: asking
                    # is_ready again could say yes and initialize it out of order
                    break
                attempt = TransactionAttempt(txid, self._rand(63))
                meta = self._meta.get_state(txid, self._coordinator.initialize_transaction)
                active[txid] = _Status(attempt)
                self._collector.emit([attempt, meta, committed], BATCH_STREAM_ID, attempt)
            txid += 1

    def ack(self, msg_id: Any) -> None:
        attempt: TransactionAttempt = msg_id
        status = self._active.get(attempt.transaction_id)
        if status is None or status.attempt != attempt:
            return  # an attempt dropped by an earlier failure
        if status.stage is _Stage.PROCESSING:
            status.stage = _Stage.PROCESSED
        elif status.stage is _Stage.COMMITTING:
            txid = attempt.transaction_id
            del self._active[txid]
            self._meta.cleanup_before(txid)
            self._current = txid + 1
            self._state.set_data(_CURRENT_TX, self._current)
            self.committed.append(txid)

    def fail(self, msg_id: Any) -> None:
        attempt: TransactionAttempt = msg_id
        txid = attempt.transaction_id
        status = self._active.get(txid)
        if status is None or status.attempt != attempt:
            return  # (Storm drops the current attempt here too; that is a bug)
        for later in [t for t in self._active if t >= txid]:
            del self._active[later]

    def close(self) -> None:
        self._coordinator.close()
        self._state.close()

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare_stream(BATCH_STREAM_ID, ["tx", "tx-meta", "committed-txid"])
        declarer.declare_stream(COMMIT_STREAM_ID, ["tx"])

    def component_configuration(self) -> Mapping[str, Any] | None:
        return {"topology.max.task.parallelism": 1}


class TransactionalSpoutBatchExecutor(Bolt):
    """Runs the spout's emitter: one batch per batch tuple, anchored to it."""

    def __init__(self, spout: TransactionalSpout) -> None:
        self.spout = spout

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self._collector = collector
        self._out = BatchOutputCollector(collector)
        self._emitter = self.spout.get_emitter(conf, context)

    def execute(self, tuple: Tuple) -> None:
        attempt = request_id_of(tuple)
        out = self._out
        out._input = tuple
        try:
            self._emitter.emit_batch(attempt, tuple["tx-meta"], out)
        except FailedException as exc:
            if isinstance(exc, ReportedFailedException):
                self._collector.report_error(exc)
            self._collector.fail(tuple)
            return
        finally:
            out._input = None
        self._collector.ack(tuple)
        committed = tuple["committed-txid"]
        if committed is not None:
            self._emitter.cleanup_before(committed)

    def cleanup(self) -> None:
        self._emitter.close()

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        self.spout.declare_output_fields(declarer)

    def component_configuration(self) -> Mapping[str, Any] | None:
        return self.spout.component_configuration()
