"""The transactional sink's key set, against a plain Python set."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_io._txn import (
    STAGING_DIR,
    KeyRanges,
    clean_stale_staging,
    data_files,
    key_ranges,
    listed_by_spark,
    publish_files,
    stage_dir,
)

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


def _in_another_process(script: str, output: Path) -> None:
    """Run ``script`` (``output`` is ``sys.argv[1]``) in a process of its own."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])}
    prelude = "import sys; from pathlib import Path; from spark_io import _txn; "
    subprocess.run(
        [sys.executable, "-c", prelude + script, str(output)], env=env, check=True, timeout=120
    )


def test_a_sink_starting_in_another_process_leaves_what_this_one_stages_alone(
    tmp_path: Path,
) -> None:
    # Another process starting a sink on the same output cleans the staging folder of what
    # processes that are gone left there; the batch this process is writing is not theirs
    # (removed, its rows were published as nothing and acked).
    output = tmp_path / "out"
    staged = stage_dir(output)
    staged.mkdir(parents=True)
    (staged / "part-0.parquet").write_bytes(b"rows")
    _in_another_process("_txn.clean_stale_staging(Path(sys.argv[1]))", output)
    assert (staged / "part-0.parquet").exists()
    # What a process that has ended staged is removed.
    _in_another_process(
        "s = _txn.stage_dir(Path(sys.argv[1])); s.mkdir(parents=True); "
        "(s / 'part-1.parquet').write_bytes(b'rows'); print(s)",
        output,
    )
    clean_stale_staging(output)
    left = sorted(p.name for p in (output / STAGING_DIR).iterdir() if not p.name.startswith("."))
    assert left == [staged.name]
    assert publish_files(staged, output) == 1
