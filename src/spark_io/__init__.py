"""spark_io: Spark sources and sinks for Squall topologies, with Storm's reliability.

- ``spark_session`` / ``SessionConfig``: one factory for the local Spark session (or adopt
  the user's own).
- ``SparkOffsetSpout``: KafkaSpout's semantics over a DataFrame, table or directory with an
  offset column: chunked background reads, commits of the acked prefix, retries with
  backoff, dead letters, resume after a restart; a bad file fails the run or is skipped
  onto a stream of its own (``BadFilePolicy``).
- ``SparkStreamingSpout``: a Structured Streaming query whose batches complete only when
  every tuple is acked.
- ``SparkSinkBolt``: batched writes through Spark, acked when durable; exactly once with
  ``transactional=True``.
- ``SparkRunner`` (``spark_io.runner``): the same topology as one Spark Structured
  Streaming query (spouts that re-read by position, such as ``ReplayableSpout``, as
  sources; bolts in ``mapInArrow``, stateful and windowed bolts in Spark state:
  ``applyInPandasWithState`` or ``transformWithStateInPandas``).

pyspark is imported only inside this package, and only when a component opens. The face is
lazy (PEP 562): each name imports its module on first use, so the Python process Spark starts
for each streaming source, which unpickles one spout, loads only what that spout needs.
"""

import typing as _typing

from ._lazy import lazy_face as _lazy_face

if _typing.TYPE_CHECKING:
    from ._bad_files import BadFilePolicy
    from ._errors import (
        BadFileError,
        CheckpointError,
        OffsetColumnError,
        SinkError,
        SinkSchemaError,
        SourceError,
        SparkConfigError,
        SparkIOError,
        SparkSessionError,
    )
    from ._offsets import FirstPollStrategy, ProcessingGuarantee, RetryPolicy
    from ._replayable import ReplayableSpout
    from ._session import SessionConfig, spark_session
    from ._sink import SinkTarget, SparkSinkBolt
    from ._source import SparkSource
    from ._spout import SparkOffsetSpout
    from ._streaming import SparkStreamingSpout, StreamSource
    from .runner import RUNNER_SPARK_CONF, CompiledTopology, SparkRunner, SparkTopologyRun

__all__ = [
    "RUNNER_SPARK_CONF",
    "BadFileError",
    "BadFilePolicy",
    "CheckpointError",
    "CompiledTopology",
    "FirstPollStrategy",
    "OffsetColumnError",
    "ProcessingGuarantee",
    "ReplayableSpout",
    "RetryPolicy",
    "SessionConfig",
    "SinkError",
    "SinkSchemaError",
    "SinkTarget",
    "SourceError",
    "SparkConfigError",
    "SparkIOError",
    "SparkOffsetSpout",
    "SparkRunner",
    "SparkSessionError",
    "SparkSinkBolt",
    "SparkSource",
    "SparkStreamingSpout",
    "SparkTopologyRun",
    "StreamSource",
    "spark_session",
]

#: Each public name, and the module (relative to ``spark_io``) that defines it.
_LAZY = {
    "BadFileError": "._errors",
    "BadFilePolicy": "._bad_files",
    "CheckpointError": "._errors",
    "CompiledTopology": ".runner",
    "FirstPollStrategy": "._offsets",
    "OffsetColumnError": "._errors",
    "ProcessingGuarantee": "._offsets",
    "RUNNER_SPARK_CONF": ".runner",
    "ReplayableSpout": "._replayable",
    "RetryPolicy": "._offsets",
    "SessionConfig": "._session",
    "SinkError": "._errors",
    "SinkSchemaError": "._errors",
    "SinkTarget": "._sink",
    "SourceError": "._errors",
    "SparkConfigError": "._errors",
    "SparkIOError": "._errors",
    "SparkOffsetSpout": "._spout",
    "SparkRunner": ".runner",
    "SparkSessionError": "._errors",
    "SparkSinkBolt": "._sink",
    "SparkSource": "._source",
    "SparkStreamingSpout": "._streaming",
    "SparkTopologyRun": ".runner",
    "StreamSource": "._streaming",
    "spark_session": "._session",
}


__getattr__, __dir__ = _lazy_face(__name__, globals(), _LAZY)
