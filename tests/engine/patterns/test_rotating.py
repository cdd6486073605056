"""``RotatingMap`` and ``TimeCacheMap``: expiry through callbacks, on a clock."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.patterns import RotatingMap, TimeCacheMap


class FakeClock:
    def __init__(self) -> None:
        self.now = 0

    def now_ns(self) -> int:
        return self.now


def test_rotating_map_expires_the_oldest_bucket_through_the_callback() -> None:
    expired: list[tuple[str, int]] = []
    m: RotatingMap[str, int] = RotatingMap(3, lambda k, v: expired.append((k, v)))
    m.put("a", 1)
    m.rotate()
    m.put("b", 2)
    m.rotate()
    assert len(m) == 2 and expired == []
    m.put("a", 10)  # refreshed: back in the newest bucket
    assert m.rotate() == {}
    assert m.rotate() == {"b": 2} and expired == [("b", 2)]
    assert m.get("a") == 10 and m.contains_key("a") and "b" not in m
    assert m.remove("a") == 10 and m.remove("a") is None and len(m) == 0
    m.rotate()
    assert expired == [("b", 2)]  # removed entries never reach the callback


@settings(max_examples=200, deadline=None)
@given(
    expiration=st.integers(1, 20),
    buckets=st.integers(2, 5),
    puts=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 100)), max_size=30),
    step=st.integers(1, 7),
)
def test_time_cache_map_expires_each_key_within_storms_bounds(
    expiration: int, buckets: int, puts: list[tuple[int, int]], step: int
) -> None:
    """A key expires between ``expiration`` and ``expiration * (1 + 1/(buckets-1))`` after
    its last put (checked at ``step``-second granularity), through the callback, once."""
    clock = FakeClock()
    expired: list[tuple[int, int, float]] = []  # key, its last put time, expiry time
    m: TimeCacheMap[int, Any] = TimeCacheMap(
        expiration, clock, lambda k, v: expired.append((k, v, clock.now / 1e9)), buckets
    )
    last_put: dict[int, float] = {}
    t = 0
    for key, at in sorted(puts, key=lambda p: p[1]):
        while t + step <= at:
            t += step
            clock.now = t * 10**9
            m.expire()
        clock.now = at * 10**9
        m.put(key, at)
        last_put[key] = at
        t = at
    end = t + expiration * 3
    while t < end:
        t += step
        clock.now = t * 10**9
        m.expire()
    upper = expiration * (1 + 1 / (buckets - 1))
    assert len({(k, v) for k, v, _ in expired}) == len(expired)  # each put expires once
    assert {(k, v) for k, v, _ in expired} >= set(last_put.items())
    for _, put_at, when in expired:
        assert expiration <= when - put_at <= upper + step


def test_time_cache_map_needs_a_clock() -> None:
    with pytest.raises(ValueError, match=r"needs a clock with now_ns\(\) \(context.clock\)"):
        TimeCacheMap(1.0, object())
    with pytest.raises(ValueError, match="needs expiration_secs > 0, got 0"):
        TimeCacheMap(0, FakeClock())
