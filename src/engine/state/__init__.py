"""engine.state: stateful bolts with checkpoints (Storm's ``IStatefulBolt``).

Subclass ``StatefulBolt`` (or ``BasicStatefulBolt``, or a batch form:
``BasicStatefulBatchBolt``, ``StatefulBatchBolt``), keep your state in the
``KeyValueState`` handed to ``init_state``, and declare the bolt as usual:
``create_topology`` adds the checkpoint spout and the barrier forwarders (see the README,
"Stateful bolts and checkpoints"). ``topology.state.provider`` chooses where state lives:
``"memory"`` (default), ``"sqlite"`` (a file: ``topology.state.provider.config``) or
``"redis"``; ``topology.state.checkpoint.interval.ms`` how often it is committed.
``StatefulWindowedBolt`` is a windowed bolt with such a state (Storm's
``IStatefulWindowedBolt``): its tuples are acked once they left the window and the state
holding their effect committed, or, behind ``RewindableSpout``s, its window is saved with
each checkpoint (Storm's persistent windows) and its tuples acked at the first commit.

>>> from engine import Config, Fields, TopologyBuilder
>>> from engine.state import BasicStatefulBolt
>>> class WordCount(BasicStatefulBolt):
...     def init_state(self, state):
...         self.counts = state
...     def execute(self, tuple, collector):
...         self.counts.put(tuple[0], self.counts.get(tuple[0], 0) + 1)
>>> conf = Config({"topology.state.provider": "sqlite",
...                "topology.state.provider.config": "state/word-count.sqlite"})
"""

from .._model.public import publish
from ._bolt import (
    BasicStatefulBatchBolt,
    BasicStatefulBolt,
    StatefulBatchBolt,
    StatefulBolt,
    StatefulComponent,
)
from ._checkpoint import (
    CHECKPOINT_COMPONENT_ID,
    CHECKPOINT_STREAM_ID,
    COMMIT,
    INITSTATE,
    PREPARE,
    ROLLBACK,
    CheckpointSpout,
)
from ._errors import StateError, StateFormatError
from ._key_value import KeyValueState
from ._provider import open_state_store, state_namespace
from ._redis_store import RedisStateStore
from ._rewindable import RewindableSpout, RewindableSpoutExecutor
from ._serialization import FORMAT_VERSION, decode, encode
from ._sink import CheckpointedFileSink, CheckpointedSink
from ._sqlite import SqliteStateStore
from ._stateful_executor import CheckpointTupleForwarder, StatefulBoltExecutor
from ._store import InMemoryStateStore, StateStore
from ._windowed_bolt import StatefulWindowedBolt
from ._windowed_executor import StatefulWindowedBoltExecutor
from ._wiring import wire_checkpoints

__all__ = [
    "CHECKPOINT_COMPONENT_ID",
    "CHECKPOINT_STREAM_ID",
    "COMMIT",
    "FORMAT_VERSION",
    "INITSTATE",
    "PREPARE",
    "ROLLBACK",
    "BasicStatefulBatchBolt",
    "BasicStatefulBolt",
    "CheckpointSpout",
    "CheckpointTupleForwarder",
    "CheckpointedFileSink",
    "CheckpointedSink",
    "InMemoryStateStore",
    "KeyValueState",
    "RedisStateStore",
    "RewindableSpout",
    "RewindableSpoutExecutor",
    "SqliteStateStore",
    "StateError",
    "StateFormatError",
    "StateStore",
    "StatefulBatchBolt",
    "StatefulBolt",
    "StatefulBoltExecutor",
    "StatefulComponent",
    "StatefulWindowedBolt",
    "StatefulWindowedBoltExecutor",
    "decode",
    "encode",
    "open_state_store",
    "state_namespace",
    "wire_checkpoints",
]

publish(__name__, globals(), __all__)
del publish
