"""``LatencyRecorder`` (``engine._monitor.stats``) against the latencies themselves: counts, mean
and maximum exact, quantiles within the buckets' 1 %, however the arrays come."""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine._monitor.stats import (
    _HIGHEST_NS,
    _LINEAR,
    _N_BUCKETS,
    _SUB_BITS,
    LatencyRecorder,
    LatencySummary,
    _bucket_top,
    _buckets,
)

latencies = st.lists(st.integers(-5, _HIGHEST_NS + 10), min_size=1, max_size=300)


def exact_quantile(values: list[int], percent: float) -> int:
    """The ceil(p % of n)-th smallest value (as the summary ranks them)."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(len(ordered) * percent / 100)) - 1]


@settings(max_examples=200, deadline=None)
@given(values=latencies, cuts=st.lists(st.integers(0, 300), max_size=5), means=st.booleans())
def test_the_summary_equals_the_latencies_within_a_bucket(
    values: list[int], cuts: list[int], means: bool
) -> None:
    recorder = LatencyRecorder()
    bounds = sorted({0, len(values), *(c for c in cuts if c < len(values))})
    for lo, hi in itertools.pairwise(bounds):
        if means and hi - lo == 1:
            recorder.add_one(values[lo])
        else:
            recorder.add(np.array(values[lo:hi], np.int64))
    clipped = [min(max(v, 1), _HIGHEST_NS) for v in values]
    got = recorder.summary()
    assert got.count == recorder.count == len(values)
    assert math.isclose(got.mean_ms, sum(clipped) / len(clipped) / 1e6, rel_tol=1e-9)
    assert got.max_ms == max(clipped) / 1e6
    for percent, value in ((50, got.p50_ms), (99, got.p99_ms)):
        want = exact_quantile(clipped, percent)
        assert want / 1e6 <= value <= want * 1.008 / 1e6 + 1e-12


def test_many_arrays_are_folded_in_and_empty_ones_change_nothing() -> None:
    recorder = LatencyRecorder()
    assert recorder.summary() == LatencySummary.empty()
    recorder.add(np.zeros(0, np.int64))
    for _ in range(100):
        recorder.add(np.full(100, 2_000_000, np.int64))
    recorder.add_mean(1_000_000.0, 10_000)
    got = recorder.summary()
    assert got.count == 20_000
    assert got.p99_ms == 2.0 and got.max_ms == 2.0
    assert 0.99 <= got.p50_ms <= 1.0 * 1.008
    assert math.isclose(got.mean_ms, 1.5)


def naive_bucket(value: int) -> int:
    """The log-linear bucket of one latency, from its bits: below ``_LINEAR`` its own; above,
    ``2**_SUB_BITS`` buckets per power of two, by the bits after the leading one."""
    if value < _LINEAR:
        return value
    shift = value.bit_length() - (_SUB_BITS + 1)
    return _LINEAR + (shift - 1) * (1 << _SUB_BITS) + (value >> shift) - (1 << _SUB_BITS)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, _HIGHEST_NS), min_size=1, max_size=200))
def test_buckets_from_the_float_bits_are_the_naive_ones(values: list[int]) -> None:
    edges = [v for k in range(1, _HIGHEST_NS.bit_length()) for v in (2**k - 1, 2**k, 2**k + 1)]
    every = np.array([*values, *range(1, 1000), *(e for e in edges if e <= _HIGHEST_NS)], np.int64)
    want = [naive_bucket(v) for v in every.tolist()]
    assert _buckets(every).tolist() == want
    assert _buckets(every[every >= _LINEAR], low=_LINEAR).tolist() == [
        w for w in want if w >= _LINEAR
    ]
    assert max(want) < _N_BUCKETS
    assert all(_bucket_top(b) >= v for b, v in zip(want, every.tolist(), strict=True))
