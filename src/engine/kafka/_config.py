"""``KafkaSpoutConfig``: Storm's ``KafkaSpoutConfig`` builder as one frozen record.

Validated when it is built, so a misdeclared spout fails where the topology is declared
with a message naming the option and what to change.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .._model.offsets import FirstPollOffsetStrategy, ProcessingGuarantee, RetryPolicy
from ._errors import KafkaConfigError
from ._translator import RecordTranslator

__all__ = ["KafkaSpoutConfig", "KafkaSpoutRetryExponentialBackoff"]


@dataclass(frozen=True)
class KafkaSpoutRetryExponentialBackoff(RetryPolicy):
    """Storm's retry service for failed records, in seconds.

    The first retry is due ``initial_delay_secs`` after the failure, the n-th
    ``delay_period_secs * 2**(n-1)`` after it, never more than ``max_delay_secs``; after
    ``max_retries`` retries (None: forever) the record is given up on: it counts as done
    for the commit, is counted in ``KafkaSpout.exhausted`` and reported, and is emitted on
    the config's ``retry_exhausted_stream`` when one is declared.

    >>> from engine.kafka import KafkaSpoutRetryExponentialBackoff
    >>> retry = KafkaSpoutRetryExponentialBackoff(0.0, 0.002, 5, 10.0)
    """

    config_error: ClassVar[type[Exception]] = KafkaConfigError


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise KafkaConfigError(f"KafkaSpoutConfig.{name} must be an int >= 1, got {value!r}")
    return value


@dataclass(frozen=True)
class KafkaSpoutConfig:
    """What a ``KafkaSpout`` reads and what it promises (Storm's ``KafkaSpoutConfig``).

    >>> from engine.kafka import KafkaSpoutConfig, FirstPollOffsetStrategy
    >>> config = KafkaSpoutConfig("127.0.0.1:9092", ["page-views"],
    ...     first_poll_offset_strategy=FirstPollOffsetStrategy.EARLIEST,
    ...     offset_commit_period_ms=1000)

    - ``bootstrap_servers``: ``host:port[,host:port...]``.
    - ``topics``: a list of names, or a compiled pattern matched against every topic (new
      matching topics and partitions are picked up every ``partition_refresh_period_ms``).
    - ``group_id``: the consumer group whose offsets the spout commits; default
      ``squall-<topology name>-<component id>``.
    - ``first_poll_offset_strategy``: where a new run starts; a commit made by this run of
      the topology always wins (a task restarted after a crash or moved by a rebalance
      resumes from it).
    - ``processing_guarantee``: ``AT_LEAST_ONCE`` (default), ``AT_MOST_ONCE`` or
      ``NO_GUARANTEE``.
    - ``offset_commit_period_ms``: how often the acked prefix is committed.
    - ``max_uncommitted_offsets``: per partition, emitted records past the committed offset
      at which the spout stops emitting from it (and stops fetching it).
    - ``retry``: a ``KafkaSpoutRetryExponentialBackoff``.
    - ``record_translator``: a ``RecordTranslator`` (default: topic, partition, offset,
      key, value).
    - ``emit_null_tuples``: a record the translator maps to None is emitted as a tuple of
      Nones instead of being skipped.
    - ``retry_exhausted_stream``: a stream the spout declares (with the main stream's
      fields) and sends records past ``max_retries`` to; without it they are acked and
      counted.
    - ``max_poll_records``: records taken from the client per poll (and emitted per batch).
    - ``consumer_props``: further client properties (librdkafka's names).
    """

    bootstrap_servers: str
    topics: Sequence[str] | re.Pattern[str]
    group_id: str | None = None
    first_poll_offset_strategy: FirstPollOffsetStrategy = (
        FirstPollOffsetStrategy.UNCOMMITTED_EARLIEST
    )
    processing_guarantee: ProcessingGuarantee = ProcessingGuarantee.AT_LEAST_ONCE
    offset_commit_period_ms: int = 30_000
    max_uncommitted_offsets: int = 10_000_000
    retry: RetryPolicy = field(default_factory=KafkaSpoutRetryExponentialBackoff)
    record_translator: RecordTranslator = field(default_factory=RecordTranslator)
    emit_null_tuples: bool = False
    retry_exhausted_stream: str | None = None
    partition_refresh_period_ms: int = 2_000
    max_poll_records: int = 2_000
    consumer_props: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.bootstrap_servers, str) or not self.bootstrap_servers:
            raise KafkaConfigError(
                f"KafkaSpoutConfig.bootstrap_servers must be 'host:port[,host:port...]', got "
                f"{self.bootstrap_servers!r}"
            )
        topics = self.topics
        if isinstance(topics, re.Pattern):
            pass
        elif (
            isinstance(topics, str)
            or not isinstance(topics, Sequence)
            or not topics
            or not all(isinstance(t, str) and t for t in topics)
        ):
            raise KafkaConfigError(
                f"KafkaSpoutConfig.topics must be a non-empty list of topic names or a "
                f"re.Pattern, got {topics!r}"
            )
        else:
            object.__setattr__(self, "topics", tuple(topics))
        if self.group_id is not None and (not isinstance(self.group_id, str) or not self.group_id):
            raise KafkaConfigError(
                f"KafkaSpoutConfig.group_id must be a non-empty string or None, got "
                f"{self.group_id!r}"
            )
        if not isinstance(self.first_poll_offset_strategy, FirstPollOffsetStrategy):
            raise KafkaConfigError(
                f"KafkaSpoutConfig.first_poll_offset_strategy must be a FirstPollOffsetStrategy "
                f"(EARLIEST, LATEST, UNCOMMITTED_EARLIEST, UNCOMMITTED_LATEST), got "
                f"{self.first_poll_offset_strategy!r}"
            )
        if not isinstance(self.processing_guarantee, ProcessingGuarantee):
            raise KafkaConfigError(
                f"KafkaSpoutConfig.processing_guarantee must be a ProcessingGuarantee "
                f"(AT_LEAST_ONCE, AT_MOST_ONCE, NO_GUARANTEE), got {self.processing_guarantee!r}"
            )
        for name in (
            "offset_commit_period_ms",
            "max_uncommitted_offsets",
            "partition_refresh_period_ms",
            "max_poll_records",
        ):
            _positive_int(name, getattr(self, name))
        if not isinstance(self.retry, RetryPolicy):
            raise KafkaConfigError(
                f"KafkaSpoutConfig.retry must be a KafkaSpoutRetryExponentialBackoff, got "
                f"{self.retry!r}"
            )
        if not isinstance(self.record_translator, RecordTranslator):
            raise KafkaConfigError(
                f"KafkaSpoutConfig.record_translator must be a RecordTranslator, got "
                f"{self.record_translator!r}"
            )
        stream = self.retry_exhausted_stream
        if stream is not None:
            if not isinstance(stream, str) or not stream:
                raise KafkaConfigError(
                    f"KafkaSpoutConfig.retry_exhausted_stream must be a stream name or None, "
                    f"got {stream!r}"
                )
            if stream in self.record_translator.streams:
                raise KafkaConfigError(
                    f"KafkaSpoutConfig.retry_exhausted_stream {stream!r} is also a stream of "
                    f"the record translator; give the records past max_retries a stream of "
                    f"their own"
                )
        if not isinstance(self.consumer_props, Mapping):
            raise KafkaConfigError(
                f"KafkaSpoutConfig.consumer_props must be a mapping of client properties, got "
                f"{self.consumer_props!r}"
            )
        owned = sorted(set(self.consumer_props) & _OWNED_PROPS)
        if owned:
            raise KafkaConfigError(
                f"KafkaSpoutConfig.consumer_props must not set {owned}: the spout sets them "
                f"(use bootstrap_servers / group_id, and the processing guarantee for commits)"
            )

    @property
    def commit_period_secs(self) -> float:
        """``offset_commit_period_ms`` in seconds, as the topology's clock counts."""
        return self.offset_commit_period_ms / 1000.0

    def describe_topics(self) -> str:
        """The topics for error messages: ``topics ['a', 'b']`` or ``topics matching 'x.*'``."""
        topics = self.topics
        if isinstance(topics, re.Pattern):
            return f"topics matching {topics.pattern!r}"
        return f"topics {list(topics)}"


_OWNED_PROPS = frozenset(
    {
        "bootstrap.servers",
        "group.id",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "enable.partition.eof",
    }
)
