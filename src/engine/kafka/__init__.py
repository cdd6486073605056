"""engine.kafka: Storm's storm-kafka-client for Squall (the ``kafka`` extra:
``pip install -e '.[kafka]'``).

``KafkaSpout`` reads topics with per-partition offsets, commits only the contiguous acked
prefix, retries failed records with exponential backoff and honours Storm's first-poll
strategies and processing guarantees; ``KafkaBolt`` writes tuples and acks each one only
after the broker's delivery report. ``LocalKafkaBroker`` runs a Kafka-protocol broker on a
loopback port for tests, benchmarks and examples.

>>> from engine.kafka import KafkaSpout, KafkaSpoutConfig, FirstPollOffsetStrategy
>>> spout = KafkaSpout(KafkaSpoutConfig("127.0.0.1:9092", ["page-views"],
...     first_poll_offset_strategy=FirstPollOffsetStrategy.UNCOMMITTED_EARLIEST))
"""

from .._model.public import publish

# Storm's names, importable here as storm-kafka-client has them; they live (and report
# their module) in engine.offsets, which spark_io's offset spout shares.
from ..offsets import FirstPollOffsetStrategy as FirstPollOffsetStrategy
from ..offsets import ProcessingGuarantee as ProcessingGuarantee
from ._bolt import (
    DefaultTopicSelector,
    FieldNameBasedTupleToKafkaMapper,
    FieldNameTopicSelector,
    KafkaBolt,
)
from ._broker import LocalKafkaBroker
from ._config import KafkaSpoutConfig, KafkaSpoutRetryExponentialBackoff
from ._errors import KafkaConfigError, KafkaIOError
from ._spout import KafkaSpout, assign_round_robin
from ._translator import DEFAULT_FIELDS, KafkaTuple, RecordTranslator

__all__ = [
    "DEFAULT_FIELDS",
    "DefaultTopicSelector",
    "FieldNameBasedTupleToKafkaMapper",
    "FieldNameTopicSelector",
    "KafkaBolt",
    "KafkaConfigError",
    "KafkaIOError",
    "KafkaSpout",
    "KafkaSpoutConfig",
    "KafkaSpoutRetryExponentialBackoff",
    "KafkaTuple",
    "LocalKafkaBroker",
    "RecordTranslator",
    "assign_round_robin",
]

publish(__name__, globals(), __all__)
del publish
