"""The spouts of transactional topologies: what users implement.

``TransactionalSpout`` (Storm's ``ITransactionalSpout``): a *coordinator* (one task) decides
each transaction's metadata, the *emitter* (many tasks) turns metadata into the batch and
must emit the identical batch whenever the same transaction is replayed.

``PartitionedTransactionalSpout`` (Storm's ``IPartitionedTransactionalSpout``) is the usual
way to get that right for partitioned sources (queues, logs): per partition, the emitter
says what a new batch covers (``emit_partition_batch_new`` returns its metadata, stored
before anything is sent) and re-emits exactly that on a replay (``emit_partition_batch``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._model.component import Component
from ..coordination import BatchOutputCollector
from ._attempt import TransactionAttempt
from ._state import RotatingTransactionalState, StateStore

__all__ = [
    "PartitionedCoordinator",
    "PartitionedEmitter",
    "PartitionedTransactionalSpout",
    "PartitionedTransactionalSpoutExecutor",
    "TransactionalCoordinator",
    "TransactionalEmitter",
    "TransactionalSpout",
]


class TransactionalCoordinator:
    """Decides transactions (runs in one task)."""

    def initialize_transaction(self, txid: int, prev_metadata: Any) -> Any:
        """Metadata for transaction ``txid``, never emitted before: whatever the emitters
        need to produce (and reproduce) its batch. Stored before the batch is emitted."""
        raise NotImplementedError

    def is_ready(self) -> bool:
        """True when a new transaction may start. Called often: return False (do not sleep)
        to wait."""
        return True

    def close(self) -> None:
        """Release resources."""


class TransactionalEmitter:
    """Emits batches (runs in every task of the spout component)."""

    def emit_batch(
        self, tx: TransactionAttempt, coordinator_meta: Any, collector: BatchOutputCollector
    ) -> None:
        """Emit the batch of ``tx`` for ``coordinator_meta``: always the same tuples for
        the same transaction id. The first value of every tuple is ``tx`` (unless the
        spout is enveloped)."""
        raise NotImplementedError

    def cleanup_before(self, txid: int) -> None:
        """Transactions before ``txid`` are committed: forget their state."""

    def close(self) -> None:
        """Release resources."""


class TransactionalSpout(Component):
    """Storm's ``ITransactionalSpout``: a coordinator and an emitter.

    >>> class Numbers(TransactionalSpout):      # batches of 10 numbers: 0-9, 10-19, ...
    ...     def get_coordinator(self, conf, context):
    ...         return Windows()
    ...     def get_emitter(self, conf, context):
    ...         return Emit()
    ...     def declare_output_fields(self, declarer):
    ...         declarer.declare(["tx", "n"])
    >>> class Windows(TransactionalCoordinator):
    ...     def initialize_transaction(self, txid, prev):
    ...         return (txid - 1) * 10
    >>> class Emit(TransactionalEmitter):
    ...     def emit_batch(self, tx, start, collector):
    ...         for n in range(start, start + 10):
    ...             collector.emit([tx, n])
    """

    def get_coordinator(self, conf: Mapping[str, Any], context: Any) -> TransactionalCoordinator:
        """The coordinator, made once, in the coordinator spout's one task: the single
        place that decides what each transaction contains."""
        raise NotImplementedError

    def get_emitter(self, conf: Mapping[str, Any], context: Any) -> TransactionalEmitter:
        """An emitter, made in every task of the spout component (``context`` says which):
        each emits its share of every batch the coordinator decided."""
        raise NotImplementedError


class PartitionedCoordinator:
    """How many partitions there are, and whether a new transaction may start."""

    def num_partitions(self) -> int:
        """How many partitions the source has now; asked at the start of each transaction,
        so a source may grow."""
        raise NotImplementedError

    def is_ready(self) -> bool:
        """True when a new transaction may start (by default, always). Called often: return
        False, never sleep, to wait for data."""
        return True

    def close(self) -> None:
        """Release resources."""


class PartitionedEmitter:
    """Emits one partition's part of a batch."""

    def emit_partition_batch_new(
        self,
        tx: TransactionAttempt,
        collector: BatchOutputCollector,
        partition: int,
        last_partition_meta: Any,
    ) -> Any:
        """Emit the next batch of ``partition``, which follows the one described by
        ``last_partition_meta`` (None for the first), and return its metadata: enough to
        emit exactly the same tuples again."""
        raise NotImplementedError

    def emit_partition_batch(
        self,
        tx: TransactionAttempt,
        collector: BatchOutputCollector,
        partition: int,
        partition_meta: Any,
    ) -> None:
        """Emit again the batch ``partition_meta`` describes (a replay)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release resources."""


class PartitionedTransactionalSpout(Component):
    """Storm's ``IPartitionedTransactionalSpout``. Partition ``p`` is emitted by the task
    with index ``p % tasks`` of the spout component.

    >>> class Log(PartitionedTransactionalSpout):
    ...     def get_coordinator(self, conf, context):
    ...         return Partitions()
    ...     def get_emitter(self, conf, context):
    ...         return Offsets()
    ...     def declare_output_fields(self, declarer):
    ...         declarer.declare(["tx", "line"])
    >>> class Partitions(PartitionedCoordinator):
    ...     def num_partitions(self):
    ...         return 4
    >>> class Offsets(PartitionedEmitter):
    ...     def emit_partition_batch_new(self, tx, collector, partition, last):
    ...         start = last[1] if last else 0
    ...         meta = (start, start + 100)
    ...         self.emit_partition_batch(tx, collector, partition, meta)
    ...         return meta
    ...     def emit_partition_batch(self, tx, collector, partition, meta):
    ...         for line in read_lines(partition, *meta):   # your source
    ...             collector.emit([tx, line])
    """

    def get_coordinator(self, conf: Mapping[str, Any], context: Any) -> PartitionedCoordinator:
        """The coordinator, made once, in the coordinator spout's one task."""
        raise NotImplementedError

    def get_emitter(self, conf: Mapping[str, Any], context: Any) -> PartitionedEmitter:
        """An emitter, made in every task of the spout component; the engine hands each
        task its partitions and stores each partition's batch metadata for replays."""
        raise NotImplementedError


class _PartitionsCoordinator(TransactionalCoordinator):
    def __init__(self, inner: PartitionedCoordinator) -> None:
        self._inner = inner

    def initialize_transaction(self, txid: int, prev_metadata: Any) -> int:
        return int(self._inner.num_partitions())

    def is_ready(self) -> bool:
        return self._inner.is_ready()

    def close(self) -> None:
        self._inner.close()


class _PartitionsEmitter(TransactionalEmitter):
    def __init__(
        self,
        inner: PartitionedEmitter,
        store: StateStore,
        transactional_id: str,
        index: int,
        num_tasks: int,
    ) -> None:
        self._inner = inner
        self._store = store
        self._tx_id = transactional_id
        self._index = index
        self._num_tasks = num_tasks
        self._states: dict[int, RotatingTransactionalState] = {}

    def _state(self, partition: int) -> RotatingTransactionalState:
        state = self._states.get(partition)
        if state is None:
            namespace = self._store.open(self._tx_id, f"partition-{partition}")
            state = self._states[partition] = RotatingTransactionalState(namespace, "meta")
        return state

    def emit_batch(
        self, tx: TransactionAttempt, num_partitions: Any, collector: BatchOutputCollector
    ) -> None:
        inner = self._inner
        for partition in range(self._index, int(num_partitions), self._num_tasks):

            def new_batch(txid: int, last_meta: Any, partition: int = partition) -> Any:
                return inner.emit_partition_batch_new(tx, collector, partition, last_meta)

            meta = self._state(partition).get_state_or_create(tx.transaction_id, new_batch)
            # None: created just now (emitted above), or skipped (a later batch exists)
            if meta is not None:
                inner.emit_partition_batch(tx, collector, partition, meta)

    def cleanup_before(self, txid: int) -> None:
        for state in self._states.values():
            state.cleanup_before(txid)

    def close(self) -> None:
        self._inner.close()


class PartitionedTransactionalSpoutExecutor(TransactionalSpout):
    """A ``PartitionedTransactionalSpout`` as a ``TransactionalSpout``: the transaction's
    metadata is the partition count, each partition's batch metadata lives in the state
    store (namespace ``partition-<p>``). The builder wraps partitioned spouts for you."""

    def __init__(
        self, spout: PartitionedTransactionalSpout, store: StateStore, transactional_id: str
    ) -> None:
        self.spout = spout
        self._store = store
        self._tx_id = transactional_id

    def get_coordinator(self, conf: Mapping[str, Any], context: Any) -> TransactionalCoordinator:
        return _PartitionsCoordinator(self.spout.get_coordinator(conf, context))

    def get_emitter(self, conf: Mapping[str, Any], context: Any) -> TransactionalEmitter:
        tasks = context.get_component_tasks(context.get_this_component_id())
        return _PartitionsEmitter(
            self.spout.get_emitter(conf, context),
            self._store,
            self._tx_id,
            context.get_this_task_index(),
            len(tasks),
        )

    def declare_output_fields(self, declarer: Any) -> None:
        self.spout.declare_output_fields(declarer)

    def component_configuration(self) -> Mapping[str, Any] | None:
        return self.spout.component_configuration()
