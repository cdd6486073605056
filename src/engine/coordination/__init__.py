"""engine.coordination: Storm's ``CoordinatedBolt`` and batch bolts.

Completion tracking for request and batch ids (the first value of every tuple), the
machinery under linear DRPC (``engine.drpc``) and transactional topologies
(``engine.transactional``)::

    from engine.coordination import COORDINATED_STREAM_ID, CoordinatedBolt, SourceArgs

    builder.set_bolt("first", CoordinatedBolt(Expand()), 2).shuffle_grouping("requests")
    builder.set_bolt("count", CoordinatedBolt(Count(), {"first": SourceArgs.all()}), 2) \\
        .fields_grouping("first", ["id"]) \\
        .direct_grouping("first", COORDINATED_STREAM_ID)

``CoordinatedBolt(bolt, ..., envelope=True)`` lets ``bolt`` ignore the id entirely: it
receives ``EnvelopeTuple`` s without it and emits its own values only, while the wire keeps
Storm's id-first convention.
"""

from .._model.public import publish as _publish
from ._batch import BatchBolt, BatchBoltExecutor, BatchOutputCollector
from ._coordinated import (
    COORDINATED_STREAM_ID,
    DEFAULT_TIMEOUT_TICK_SECS,
    CoordinatedBolt,
    CoordinationStatistics,
    FinishedCallback,
    IdStreamSpec,
    SourceArgs,
    TimeoutCallback,
)
from ._envelope import ENVELOPE_ID_FIELD, EnvelopeTuple, request_id_of

__all__ = [
    "COORDINATED_STREAM_ID",
    "DEFAULT_TIMEOUT_TICK_SECS",
    "ENVELOPE_ID_FIELD",
    "BatchBolt",
    "BatchBoltExecutor",
    "BatchOutputCollector",
    "CoordinatedBolt",
    "CoordinationStatistics",
    "EnvelopeTuple",
    "FinishedCallback",
    "IdStreamSpec",
    "SourceArgs",
    "TimeoutCallback",
    "request_id_of",
]

_publish(__name__, globals(), __all__)
