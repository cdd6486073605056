"""From a Kafka record to the values a spout emits (Storm's ``RecordTranslator``).

The translator sees the client's record (``confluent_kafka.Message``), whose accessors carry
Storm's ``ConsumerRecord`` names: ``topic()``, ``partition()``, ``offset()``, ``key()``,
``value()``, ``timestamp()`` (a ``(type, milliseconds)`` pair) and ``headers()``. It returns
the values to emit, a ``KafkaTuple`` to send them on another declared stream, or None to skip
the record (which then counts as done at once, or, with ``emit_null_tuples``, is emitted as
a tuple of Nones).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from .._model.component import DEFAULT_STREAM_ID
from ._errors import KafkaConfigError

__all__ = ["DEFAULT_FIELDS", "KafkaTuple", "RecordTranslator"]

#: What the default translator emits (Storm's ``DefaultRecordTranslator``).
DEFAULT_FIELDS = ("topic", "partition", "offset", "key", "value")


class KafkaTuple(NamedTuple):
    """Values routed to ``stream`` (Storm's ``KafkaTuple.routedTo``)."""

    values: Sequence[Any]
    stream: str


class RecordTranslator:
    """``func(record)`` -> values (or ``KafkaTuple`` / None), declared as ``fields`` on
    ``stream``; ``streams`` declares further streams a ``KafkaTuple`` may name.

    >>> from engine.kafka import RecordTranslator
    >>> lines = RecordTranslator(lambda r: [r.value().decode()], ["line"])
    >>> by_kind = RecordTranslator(
    ...     lambda r: [r.value()] if r.key() else KafkaTuple([r.value()], "unkeyed"),
    ...     ["value"], streams={"unkeyed": ["value"]})

    Without ``func`` it is the default translator: ``topic, partition, offset, key, value``
    (key and value as bytes), emitted column by column without a call per record.
    """

    def __init__(
        self,
        func: Callable[[Any], Any] | None = None,
        fields: Sequence[str] = DEFAULT_FIELDS,
        stream: str = DEFAULT_STREAM_ID,
        *,
        streams: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        if func is not None and not callable(func):
            raise KafkaConfigError(
                f"RecordTranslator: func must be a callable record -> values, got {func!r}"
            )
        declared = {stream: fields, **dict(streams or {})}
        for name, names in declared.items():
            if not isinstance(name, str) or not name:
                raise KafkaConfigError(
                    f"RecordTranslator: stream names must be non-empty strings, got {name!r}"
                )
            if (
                isinstance(names, str)
                or not names
                or not all(isinstance(f, str) and f for f in names)
            ):
                raise KafkaConfigError(
                    f"RecordTranslator: the fields of stream {name!r} must be a non-empty "
                    f"list of names, got {names!r}"
                )
        if func is None and (tuple(fields) != DEFAULT_FIELDS or streams):
            raise KafkaConfigError(
                f"RecordTranslator: without func the translator emits {list(DEFAULT_FIELDS)} "
                f"on one stream; pass func to emit other fields"
            )
        self.func = func
        self.stream = stream
        self.streams: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in declared.items()}

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields of the main stream."""
        return self.streams[self.stream]

    def __repr__(self) -> str:
        what = "default" if self.func is None else getattr(self.func, "__name__", "func")
        return f"RecordTranslator({what}, streams={self.streams})"
