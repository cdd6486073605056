"""What a Redis bolt writes, reads or checks for each tuple (storm-redis's mappers).

``RedisDataType`` names the Redis structure; ``RedisStoreMapper`` / ``RedisLookupMapper`` /
``RedisFilterMapper`` say which fields give the key and the value. Subclass a mapper and
override ``get_key_from_tuple`` / ``get_value_from_tuple`` for computed keys; with the
plain field names, batch input is read column by column, without a ``Tuple`` per row.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._model.errors import InvalidComponentError

__all__ = [
    "RedisDataType",
    "RedisFilterMapper",
    "RedisLookupMapper",
    "RedisStoreMapper",
]


class RedisDataType(enum.Enum):
    """The Redis structure a mapper reads or writes, and the command it takes.

    ``additional_key`` names the hash, sorted set or counter hash the tuple's key lives in.
    """

    STRING = "STRING"  # SET key value [EX ttl] / GET / EXISTS
    HASH = "HASH"  # HSET additional_key key value / HGET / HEXISTS
    SORTED_SET = "SORTED_SET"  # ZADD additional_key value(score) key(member) / ZSCORE
    SET = "SET"  # SADD key value / SISMEMBER
    LIST = "LIST"  # RPUSH key value
    COUNTER = "COUNTER"  # INCRBY key value / GET
    HASH_COUNTER = "HASH_COUNTER"  # HINCRBY additional_key key value / HGET


_NEEDS_ADDITIONAL_KEY = {RedisDataType.HASH, RedisDataType.SORTED_SET, RedisDataType.HASH_COUNTER}


@dataclass(frozen=True)
class _Mapper:
    data_type: RedisDataType
    key_field: str
    value_field: str | None = None
    additional_key: str | None = None
    ttl_secs: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.data_type, RedisDataType):
            raise InvalidComponentError(
                f"{type(self).__name__}: data_type must be a RedisDataType, got {self.data_type!r}"
            )
        if self.data_type in _NEEDS_ADDITIONAL_KEY and not self.additional_key:
            raise InvalidComponentError(
                f"{type(self).__name__}: {self.data_type.name} needs additional_key (the name "
                f"of the hash or sorted set to write in)"
            )
        if self.ttl_secs is not None and (
            not isinstance(self.ttl_secs, int)
            or isinstance(self.ttl_secs, bool)
            or self.ttl_secs <= 0
        ):
            raise InvalidComponentError(
                f"{type(self).__name__}: ttl_secs must be a positive int or None, got "
                f"{self.ttl_secs!r}"
            )

    @property
    def by_fields(self) -> bool:
        """True when keys and values are plain fields (read column-wise from batches)."""
        cls = type(self)
        return (
            cls.get_key_from_tuple is _Mapper.get_key_from_tuple
            and cls.get_value_from_tuple is _Mapper.get_value_from_tuple
        )

    def get_key_from_tuple(self, tuple: Any) -> Any:
        """The Redis key for ``tuple``: its ``key_field``. Override it to compute keys (a
        prefix, several fields); the bolt then reads tuples one by one, not columns."""
        return tuple[self.key_field]

    def get_value_from_tuple(self, tuple: Any) -> Any:
        """The value (or member) for ``tuple``: its ``value_field``. Overriding it, as
        ``get_key_from_tuple``, trades the column-wise path for per-tuple calls."""
        return tuple[self.value_field]

    def needed_fields(self) -> Sequence[str]:
        """The input fields the mapper reads: the key field, and the value field if any."""
        return [f for f in (self.key_field, self.value_field) if f is not None]


@dataclass(frozen=True)
class RedisStoreMapper(_Mapper):
    """Writes ``value_field`` under ``key_field`` (storm-redis's ``RedisStoreMapper``).

    >>> from engine.redis import RedisDataType, RedisStoreMapper
    >>> counts = RedisStoreMapper(RedisDataType.HASH_COUNTER, "page", "views",
    ...                           additional_key="views_by_page")
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.value_field is None:
            raise InvalidComponentError("RedisStoreMapper: value_field is required")


@dataclass(frozen=True)
class RedisLookupMapper(_Mapper):
    """Reads the value stored under ``key_field``; the lookup bolt emits the input's fields
    plus ``output_field`` (the value, None when missing)."""

    output_field: str = "value"


@dataclass(frozen=True)
class RedisFilterMapper(_Mapper):
    """Checks that the tuple's key (``key_field``; for ``SET``, ``value_field`` is the
    member) exists; the filter bolt passes on only those tuples."""
