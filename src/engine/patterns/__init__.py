"""Storm's common patterns, ready to use.

- ``JoinBolt``: join two or more streams on a key, with a pending cache bounded in time;
  a join that never completes fails its tuples.
- ``RotatingMap`` / ``TimeCacheMap``: expiring maps with callbacks, on the runtime's clock.
- Rolling top-N (Storm's rolling-top-words): ``RollingCountBolt`` (sliding windows) →
  ``IntermediateRankingsBolt`` → ``TotalRankingsBolt``; ``build_rolling_top_n`` wires them.
- ``BatchingBolt``: hold tuples until N or a tick, process them together, ack after.
"""

from .._model.public import publish
from ._batching import BatchingBolt, BatchingBoltExecutor
from ._join import JoinBolt
from ._rolling_top import (
    IntermediateRankingsBolt,
    Rankings,
    RollingCountBolt,
    TotalRankingsBolt,
    build_rolling_top_n,
)
from ._rotating import RotatingMap, TimeCacheMap

__all__ = [
    "BatchingBolt",
    "BatchingBoltExecutor",
    "IntermediateRankingsBolt",
    "JoinBolt",
    "Rankings",
    "RollingCountBolt",
    "RotatingMap",
    "TimeCacheMap",
    "TotalRankingsBolt",
    "build_rolling_top_n",
]

publish(__name__, globals(), __all__)
del publish
