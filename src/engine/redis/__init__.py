"""engine.redis: storm-redis for Squall (the ``redis`` extra: ``pip install -e '.[redis]'``).

``RedisStoreBolt`` writes tuples (string, hash, sorted set, set, list, counters with
``INCRBY`` / ``HINCRBY``, TTL), ``RedisLookupBolt`` reads, ``RedisFilterBolt`` keeps the tuples
whose key exists; one pipeline per batch, acked only after Redis confirmed. Redis as the
state of stateful bolts is ``topology.state.provider = "redis"`` (``engine.state``).

>>> from engine.redis import RedisConfig, RedisDataType, RedisStoreBolt, RedisStoreMapper
>>> store = RedisStoreBolt(RedisConfig(host="127.0.0.1", port=6379),
...                        RedisStoreMapper(RedisDataType.COUNTER, "word", "count"))
"""

from .._model.public import publish
from ._bolts import RedisConfig, RedisFilterBolt, RedisLookupBolt, RedisStoreBolt
from ._mapper import RedisDataType, RedisFilterMapper, RedisLookupMapper, RedisStoreMapper
from ._server import LocalRedisServer

__all__ = [
    "LocalRedisServer",
    "RedisConfig",
    "RedisDataType",
    "RedisFilterBolt",
    "RedisFilterMapper",
    "RedisLookupBolt",
    "RedisLookupMapper",
    "RedisStoreBolt",
    "RedisStoreMapper",
]

publish(__name__, globals(), __all__)
del publish
