"""What spouts that read by offset share (Storm's storm-kafka-client model): where a task
starts (``FirstPollOffsetStrategy``, ``first_position``), what it promises
(``ProcessingGuarantee``), when a failed record is retried (``RetryPolicy``,
``RetrySchedule``) and which offset it may commit (``OffsetTracker`` over ``Chunk`` objects:
the contiguous prefix of offsets done).

``engine.kafka``'s ``KafkaSpout`` and spark_io's offset spouts build on these; a source
package subclasses ``RetryPolicy`` to give it its own name, defaults and configuration error.

>>> from engine.offsets import RetryPolicy
>>> RetryPolicy(initial_delay_secs=0.5, max_retries=3).delay_secs(1)
0.5
"""

from ._model.offsets import (
    Chunk,
    FirstPollOffsetStrategy,
    OffsetTracker,
    ProcessingGuarantee,
    RetryPolicy,
    RetrySchedule,
    column_slice,
    first_position,
    needs_latest,
    value_at,
)
from ._model.public import publish

__all__ = [
    "Chunk",
    "FirstPollOffsetStrategy",
    "OffsetTracker",
    "ProcessingGuarantee",
    "RetryPolicy",
    "RetrySchedule",
    "column_slice",
    "first_position",
    "needs_latest",
    "value_at",
]

publish(__name__, globals(), __all__)
del publish
