"""``RotatingMap`` and ``TimeCacheMap``: Storm's expiring maps, on the runtime's clock.

A ``RotatingMap`` keeps its entries in buckets; ``rotate()`` drops the oldest bucket and
hands each of its entries to the expiry callback. A ``TimeCacheMap`` rotates itself by the
clock (``context.clock``, virtual under ``simulate``): an entry expires between
``expiration_secs`` and ``expiration_secs * (1 + 1 / (num_buckets - 1))`` after its last
``put``. It has no thread or task of its own: it rotates whenever it is used, and
``expire()`` (call it on tick tuples) rotates without an access.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

__all__ = ["RotatingMap", "TimeCacheMap"]

K = TypeVar("K")
V = TypeVar("V")

ExpiredCallback = Callable[[Any, Any], Any]


class RotatingMap(Generic[K, V]):
    """Entries in ``num_buckets`` buckets, newest first; ``rotate`` expires the oldest.

    >>> expired = []
    >>> m = RotatingMap(2, lambda k, v: expired.append((k, v)))
    >>> m.put("a", 1); _ = m.rotate(); m.put("b", 2); _ = m.rotate()
    >>> expired, m.get("b"), "a" in m
    ([('a', 1)], 2, False)
    """

    def __init__(
        self, num_buckets: int = 3, expired_callback: ExpiredCallback | None = None
    ) -> None:
        if not isinstance(num_buckets, int) or isinstance(num_buckets, bool) or num_buckets < 2:
            raise ValueError(f"RotatingMap needs num_buckets >= 2, got {num_buckets!r}")
        self._buckets: list[dict[K, V]] = [{} for _ in range(num_buckets)]
        self._callback = expired_callback

    def put(self, key: K, value: V) -> None:
        """Set ``key`` in the newest bucket (it expires last)."""
        buckets = self._buckets
        buckets[0][key] = value
        for bucket in buckets[1:]:
            bucket.pop(key, None)

    def get(self, key: K, default: Any = None) -> Any:
        """The value of ``key`` from the newest bucket holding it, else ``default``."""
        for bucket in self._buckets:
            if key in bucket:
                return bucket[key]
        return default

    def contains_key(self, key: K) -> bool:
        """Storm's ``containsKey``: ``key in map``."""
        return any(key in bucket for bucket in self._buckets)

    __contains__ = contains_key

    def remove(self, key: K) -> V | None:
        """Drop ``key`` (no callback); returns its value or None."""
        for bucket in self._buckets:
            if key in bucket:
                return bucket.pop(key)
        return None

    def size(self) -> int:
        """Entries in every bucket (``len(map)``)."""
        return sum(len(bucket) for bucket in self._buckets)

    __len__ = size

    def __iter__(self) -> Iterator[K]:
        for bucket in self._buckets:
            yield from bucket

    def rotate(self) -> dict[K, V]:
        """Drop the oldest bucket: its entries go to the callback, oldest first, and are
        returned."""
        dead = self._buckets.pop()
        self._buckets.insert(0, {})
        if self._callback is not None:
            for key, value in dead.items():
                self._callback(key, value)
        return dead


class TimeCacheMap(RotatingMap[K, V]):
    """A ``RotatingMap`` that rotates by ``clock`` (anything with ``now_ns()``: pass
    ``context.clock``).

    >>> class Clock:
    ...     now = 0
    ...     def now_ns(self): return self.now
    >>> clock, expired = Clock(), []
    >>> m = TimeCacheMap(2.0, clock, lambda k, v: expired.append(k))
    >>> m.put("a", 1); clock.now = 3 * 10**9; m.expire(); expired
    ['a']
    """

    def __init__(
        self,
        expiration_secs: float,
        clock: Any,
        expired_callback: ExpiredCallback | None = None,
        num_buckets: int = 3,
    ) -> None:
        super().__init__(num_buckets, expired_callback)
        if isinstance(expiration_secs, bool) or not (
            isinstance(expiration_secs, (int, float)) and expiration_secs > 0
        ):
            raise ValueError(f"TimeCacheMap needs expiration_secs > 0, got {expiration_secs!r}")
        if not callable(getattr(clock, "now_ns", None)):
            raise ValueError(
                f"TimeCacheMap needs a clock with now_ns() (context.clock), got {clock!r}"
            )
        self.expiration_secs = expiration_secs
        self._clock = clock
        self._period_ns = max(1, round(expiration_secs * 1e9 / (num_buckets - 1)))
        self._next_ns = clock.now_ns() + self._period_ns

    def expire(self) -> None:
        """Rotate once per period that passed on the clock, expiring what is due."""
        now = self._clock.now_ns()
        if now < self._next_ns:
            return
        periods = (now - self._next_ns) // self._period_ns + 1
        for _ in range(min(periods, len(self._buckets))):
            self.rotate()
        self._next_ns += periods * self._period_ns

    def put(self, key: K, value: V) -> None:
        self.expire()
        super().put(key, value)

    def get(self, key: K, default: Any = None) -> Any:
        self.expire()
        return super().get(key, default)

    def contains_key(self, key: K) -> bool:
        self.expire()
        return super().contains_key(key)

    __contains__ = contains_key

    def remove(self, key: K) -> V | None:
        self.expire()
        return super().remove(key)

    def size(self) -> int:
        self.expire()
        return super().size()

    __len__ = size
