"""The transactional sink's key set, against a plain Python set."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_io._txn import KeyRanges, data_files, key_ranges, listed_by_spark, publish_files

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


def test_the_data_files_are_those_spark_lists(tmp_path: Path) -> None:
    # Spark's listing: names starting with "." or "_" are left out, except "_" names that
    # hold "=" (a partition folder "_k=1", a data file "_a=b.parquet") and the summary
    # files, which hold no rows; and copies in progress ("._COPYING_").
    for name in [
        "part-0.parquet",
        "_a=b.parquet",
        "k=1/part-1.parquet",
        "_k=2/part-2.parquet",
        "_SUCCESS",
        "_metadata",
        "_common_metadata",
        ".part-0.parquet.crc",
        "part-3.parquet._COPYING_",
        "_temporary/0/part-4.parquet",
        ".hidden/part-5.parquet",
    ]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    found = sorted(str(p.relative_to(tmp_path)) for p in data_files(tmp_path))
    assert found == ["_a=b.parquet", "_k=2/part-2.parquet", "k=1/part-1.parquet", "part-0.parquet"]
    assert listed_by_spark("_metadata") and listed_by_spark("_k=1")
    assert not listed_by_spark("_SUCCESS") and not listed_by_spark(".x")


def test_a_partition_folder_starting_with_an_underscore_is_published(tmp_path: Path) -> None:
    # A sink partitioned by a column "_k": Spark writes "_k=1/part-*.parquet"; leaving it
    # in the staging folder would lose its rows.
    staged, output = tmp_path / "staged", tmp_path / "out"
    for name in ["_k=1/part-0.parquet", "k=2/part-1.parquet", "_SUCCESS", ".part-0.crc"]:
        (staged / name).parent.mkdir(parents=True, exist_ok=True)
        (staged / name).write_bytes(b"x")
    output.mkdir()
    assert publish_files(staged, output) == 2
    assert (output / "_k=1" / "part-0.parquet").exists()
    assert (output / "k=2" / "part-1.parquet").exists()
    assert not (output / "_SUCCESS").exists()
