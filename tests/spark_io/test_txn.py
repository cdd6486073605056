"""The transactional sink's key set, against a plain Python set."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_io._txn import KeyRanges, key_ranges

keys_lists = st.lists(st.integers(-50, 200), max_size=60)


@given(st.sets(st.integers(-1000, 1000), max_size=100))
def test_key_ranges_cover_exactly_the_keys(keys: set[int]) -> None:
    starts, ends = key_ranges(np.array(sorted(keys), np.int64))
    covered = {k for s, e in zip(starts.tolist(), ends.tolist(), strict=True) for k in range(s, e)}
    assert covered == keys
    assert all(e < s for e, s in zip(ends[:-1].tolist(), starts[1:].tolist(), strict=True))


@settings(max_examples=150)
@given(st.lists(keys_lists, max_size=6), keys_lists)
def test_key_set_membership_matches_a_set(batches: list[list[int]], probe: list[int]) -> None:
    model: set[int] = set()
    ranges = KeyRanges()
    for batch in batches:
        starts, ends = key_ranges(np.unique(np.array(batch, np.int64)))
        ranges.add(starts, ends)
        model.update(batch)
        assert len(ranges) == len(model)
    mask = ranges.contains(np.array(probe, np.int64))
    assert mask.tolist() == [k in model for k in probe]


def test_an_empty_set_contains_nothing() -> None:
    assert KeyRanges().contains(np.array([0, 1], np.int64)).tolist() == [False, False]
