"""engine.transactional: Storm's transactional topologies, exactly-once in one process.

A coordinator cuts the stream into transactions (txid 1, 2, ...); each transaction's batch
is processed in parallel with the others' (up to ``topology.max.spout.pending``), and
committers see them strictly in txid order. A failed attempt is replayed with the very
same batch, and committed txids are persisted, so with ``TransactionalValue`` /
``TransactionalMap`` (or the opaque variants) a committer applies every batch exactly
once, across failures and restarts::

    from engine.transactional import FileStateStore, TransactionalTopologyBuilder

    builder = TransactionalTopologyBuilder("count", "numbers", Numbers(), 2,
                                           state=FileStateStore("state/"))
    builder.set_bolt("partial", PartialCount(), 2).shuffle_grouping("numbers")
    builder.set_committer_bolt("total", UpdateTotal()).global_grouping("partial")
"""

from .._model.public import publish as _publish
from ._attempt import INIT_TXID, TransactionAttempt
from ._builder import Committer, TransactionalBoltDeclarer, TransactionalTopologyBuilder
from ._coordinator import (
    BATCH_STREAM_ID,
    COMMIT_STREAM_ID,
    TransactionalSpoutBatchExecutor,
    TransactionalSpoutCoordinator,
)
from ._errors import TransactionalStateError
from ._spouts import (
    PartitionedCoordinator,
    PartitionedEmitter,
    PartitionedTransactionalSpout,
    PartitionedTransactionalSpoutExecutor,
    TransactionalCoordinator,
    TransactionalEmitter,
    TransactionalSpout,
)
from ._state import (
    FileStateStore,
    MemoryStateStore,
    RotatingTransactionalState,
    StateStore,
    TransactionalState,
)
from ._values import (
    FileMapState,
    MapState,
    MemoryMapState,
    OpaqueMap,
    OpaqueValue,
    TransactionalMap,
    TransactionalValue,
)

__all__ = [
    "BATCH_STREAM_ID",
    "COMMIT_STREAM_ID",
    "INIT_TXID",
    "Committer",
    "FileMapState",
    "FileStateStore",
    "MapState",
    "MemoryMapState",
    "MemoryStateStore",
    "OpaqueMap",
    "OpaqueValue",
    "PartitionedCoordinator",
    "PartitionedEmitter",
    "PartitionedTransactionalSpout",
    "PartitionedTransactionalSpoutExecutor",
    "RotatingTransactionalState",
    "StateStore",
    "TransactionAttempt",
    "TransactionalBoltDeclarer",
    "TransactionalCoordinator",
    "TransactionalEmitter",
    "TransactionalMap",
    "TransactionalSpout",
    "TransactionalSpoutBatchExecutor",
    "TransactionalSpoutCoordinator",
    "TransactionalState",
    "TransactionalStateError",
    "TransactionalTopologyBuilder",
    "TransactionalValue",
]

_publish(__name__, globals(), __all__)
