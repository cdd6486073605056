"""Bad files in a SparkOffsetSpout's source, against real Spark and real files: a file that
cannot be read ends the run naming it (``BadFilePolicy.FAIL``) or is skipped onto a stream
of its own while every good file is read (``BadFilePolicy.SKIP``); a file that lacks a field
is a bad file unless the field is declared nullable."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from engine import BasicBolt, RunningTopology, StormTopology, TopologyBuilder, run_topology
from engine._command.cli import main
from spark_io import (
    BadFileError,
    BadFilePolicy,
    OffsetColumnError,
    SparkConfigError,
    SparkOffsetSpout,
    SparkSource,
)

from .conftest import write_parquet

pytestmark = pytest.mark.spark

#: Rows per file; files part-0 .. part-3 hold offsets 0-2499, 2500-4999, ...
ROWS = 2_500


class Collect(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self.bad: list[list[str]] = []

    def execute(self, tuple: Any, collector: Any) -> None:
        if tuple.source_stream == "bad_files":
            self.bad.append(list(tuple.values))
        else:
            self.rows.append(tuple.values)


def corrupt_footer(path: Path) -> Path:
    """Overwrite the parquet footer (its metadata) with garbage, length and magic kept."""
    raw = path.read_bytes()
    n = int.from_bytes(raw[-8:-4], "little")
    path.write_bytes(raw[: -8 - n] + b"\xff" * n + raw[-8:])
    return path


def part(directory: Path, k: int, **columns: Any) -> Path:
    ids = list(range(k * ROWS, (k + 1) * ROWS))
    data = {"id": ids, "v": [f"v{i}" for i in ids]} if not columns else {"id": ids, **columns}
    return write_parquet(directory / f"part-{k}.parquet", data)


def four_files(directory: Path, corrupt: int | None = 1) -> Path:
    for k in range(4):
        part(directory, k)
    if corrupt is not None:
        corrupt_footer(directory / f"part-{corrupt}.parquet")
    return directory


def spout(source: Path, ck: Path, **kwargs: Any) -> SparkOffsetSpout:
    kwargs.setdefault("chunk_rows", 1_000)
    return SparkOffsetSpout(
        SparkSource.files(source), "id", ["id", "v"], checkpoint_dir=ck, **kwargs
    )


def topology(s: SparkOffsetSpout) -> StormTopology:
    builder = TopologyBuilder()
    builder.set_spout("src", s)
    bolt = builder.set_bolt("collect", Collect()).shuffle_grouping("src")
    if s.bad_files is BadFilePolicy.SKIP:
        bolt.shuffle_grouping("src", s.bad_file_stream)
    return builder.create_topology()


def collected(running: RunningTopology) -> Collect:
    (bolt,) = running.task_objects("collect").values()
    return bolt  # type: ignore[no-any-return]


def committed(ck: Path) -> list[int | None]:
    return json.loads((ck / "offsets.json").read_text())["committed"]


def run_to_error(topo: StormTopology, until: Any = None) -> tuple[BaseException, Collect]:
    """Run until ``wait_until_complete`` raises; the error and what the bolt got."""

    async def main() -> tuple[BaseException, Collect]:
        async with run_topology(topo) as running:
            if until is not None:
                await until(running)
            with pytest.raises(Exception) as info:
                await running.wait_until_complete(60)
            return info.value, collected(running)

    import uvloop

    return uvloop.run(main())


def run_to_end(topo: StormTopology, until: Any = None) -> Collect:
    async def main() -> Collect:
        async with run_topology(topo) as running:
            if until is not None:
                await asyncio.wait_for(until(running), 60)
            else:
                await running.wait_until_complete(60)
            return collected(running)

    import uvloop

    return uvloop.run(main())


def unreadable(directory: Path, name: str) -> str:
    return (
        f"spout 'src': file {str(directory / name)!r} of parquet files at {str(directory)!r} "
        f"cannot be read (FAILED_READ_FILE.NO_HINT: don't know what type: 15); fix or remove "
        f"the file, or pass bad_files=BadFilePolicy.SKIP to skip such files onto a bad-file "
        f"stream"
    )


# --- BadFilePolicy.FAIL, the default --------------------------------------------------------


def test_a_corrupt_file_ends_the_run_with_an_error_naming_it(spark: Any, tmp_path: Path) -> None:
    data = four_files(tmp_path / "in")
    error, bolt = run_to_error(topology(spout(data, tmp_path / "ck")))
    assert isinstance(error, BadFileError)
    assert str(error) == unreadable(data, "part-1.parquet")
    assert error.path == str(data / "part-1.parquet")
    assert bolt.rows == []  # the first query over the directory failed: nothing was read


def test_a_column_of_another_type_in_one_file_ends_the_run_naming_it(
    spark: Any, tmp_path: Path
) -> None:
    # The schema comes from part-0; part-2's column v holds integers.
    data = tmp_path / "in"
    for k in (0, 1, 3):
        part(data, k)
    part(data, 2, v=list(range(ROWS)))
    ck = tmp_path / "ck"
    error, bolt = run_to_error(topology(spout(data, ck)))
    assert isinstance(error, BadFileError)
    assert str(error) == (
        f"spout 'src': file {str(data / 'part-2.parquet')!r} of parquet files at "
        f"{str(data)!r} cannot be read (FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH: "
        f"column: [v], physicalType: INT64, logicalType: string); fix or remove the file, or "
        f"pass bad_files=BadFilePolicy.SKIP to skip such files onto a bad-file stream"
    )
    # Spark reads the files in one job, which fails as a whole: nothing was emitted, and
    # the read that failed is not committed.
    assert bolt.rows == []
    assert committed(ck) == [0]


def test_a_tailing_spout_ends_the_run_at_a_bad_file(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "in"
    part(data, 0)
    s = spout(data, tmp_path / "ck", bounded=False, poll_interval_secs=0.1)

    async def until(running: RunningTopology) -> None:
        while len(collected(running).rows) < ROWS:
            await asyncio.sleep(0.05)
        corrupt_footer(part(data, 1))

    error, bolt = run_to_error(topology(s), until)
    assert str(error) == unreadable(data, "part-1.parquet")
    assert len(bolt.rows) == ROWS


def test_duplicate_offsets_end_the_run_and_nothing_past_them_is_committed(
    spark: Any, tmp_path: Path
) -> None:
    ids = [*range(0, 100), 100, 150, 150, 160]
    data = write_parquet(tmp_path / "in.parquet", {"id": ids, "v": [f"v{i}" for i in ids]})
    ck = tmp_path / "ck"
    error, bolt = run_to_error(topology(spout(data, ck, chunk_rows=100)))
    assert isinstance(error, OffsetColumnError)
    assert str(error) == (
        f"parquet files at {str(data)!r}: offset column 'id' is not unique: offset 150 "
        f"appears 2 times (offsets must be unique, non-negative integers)"
    )
    assert bolt.rows == []  # the batch holding them is never emitted
    assert committed(ck) == [0]


#: ``squall run``'s target below reads its directories from here.
BAD_DIR_ENV = "SQUALL_TEST_BAD_FILES_DIR"


def bad_source_topology() -> StormTopology:
    """A target for ``squall run``: the spout over a directory with a corrupt file."""
    work = Path(os.environ[BAD_DIR_ENV])
    return topology(spout(work / "in", work / "ck"))


def test_squall_run_exits_non_zero_naming_the_bad_file(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = four_files(tmp_path / "in")
    monkeypatch.setenv(BAD_DIR_ENV, str(tmp_path))
    code = main(["run", f"{__name__}:bad_source_topology", "--interval", "5"])
    assert code == 1
    assert f"squall: {unreadable(data, 'part-1.parquet')}\n" in capsys.readouterr().err


# --- BadFilePolicy.SKIP ----------------------------------------------------------------------


def test_skip_reads_every_good_file_and_records_the_bad_one(spark: Any, tmp_path: Path) -> None:
    data = four_files(tmp_path / "in")
    ck = tmp_path / "ck"
    bolt = run_to_end(topology(spout(data, ck, bad_files=BadFilePolicy.SKIP)))
    good = [*range(0, ROWS), *range(2 * ROWS, 4 * ROWS)]
    assert sorted(r[0] for r in bolt.rows) == good
    assert bolt.bad == [
        [
            str(data / "part-1.parquet"),
            "cannot be read (FAILED_READ_FILE.NO_HINT: don't know what type: 15)",
        ]
    ]
    assert committed(ck) == [4 * ROWS]


def test_skip_finds_a_bad_file_while_reading_the_schema(spark: Any, tmp_path: Path) -> None:
    # Spark reads the schema from one file; here it is the corrupt one.
    data = four_files(tmp_path / "in", corrupt=0)
    bolt = run_to_end(topology(spout(data, tmp_path / "ck", bad_files=BadFilePolicy.SKIP)))
    assert sorted(r[0] for r in bolt.rows) == list(range(ROWS, 4 * ROWS))
    assert [path for path, _ in bolt.bad] == [str(data / "part-0.parquet")]


def test_a_tailing_spout_skips_a_bad_file_and_reads_the_files_added_later(
    spark: Any, tmp_path: Path
) -> None:
    data = tmp_path / "in"
    part(data, 0)
    s = spout(
        data, tmp_path / "ck", bounded=False, poll_interval_secs=0.1, bad_files=BadFilePolicy.SKIP
    )

    async def until(running: RunningTopology) -> None:
        bolt = collected(running)
        while len(bolt.rows) < ROWS:
            await asyncio.sleep(0.05)
        corrupt_footer(part(data, 1))
        while not bolt.bad:
            await asyncio.sleep(0.05)
        part(data, 2)
        part(data, 3)
        while len(bolt.rows) < 3 * ROWS:
            await asyncio.sleep(0.05)

    bolt = run_to_end(topology(s), until)
    assert sorted(r[0] for r in bolt.rows) == [*range(0, ROWS), *range(2 * ROWS, 4 * ROWS)]
    assert [path for path, _ in bolt.bad] == [str(data / "part-1.parquet")]


# --- declaration ------------------------------------------------------------------------------


def test_skip_needs_a_files_source_and_a_stream_of_its_own(tmp_path: Path) -> None:
    with pytest.raises(SparkConfigError) as info:
        SparkOffsetSpout(
            SparkSource.table("t"),
            "id",
            ["id"],
            checkpoint_dir=tmp_path,
            bad_files=BadFilePolicy.SKIP,
        )
    assert str(info.value) == (
        "bad_files=BadFilePolicy.SKIP leaves files out of a files source; table 't' is not "
        "one (use SparkSource.files)"
    )
    with pytest.raises(SparkConfigError) as info:
        spout(tmp_path, tmp_path, bad_files=BadFilePolicy.SKIP, bad_file_stream="default")
    assert str(info.value) == (
        "bad_file_stream 'default' is the stream of the rows; give the bad-file records a "
        "stream of their own"
    )


# --- a file without a field ---------------------------------------------------------------------


def without_v_in_part_2(directory: Path) -> Path:
    for k in (0, 1, 3):
        part(directory, k)
    part(directory, 2, w=[1] * ROWS)  # no column v
    return directory


def test_a_file_without_a_field_ends_the_run_naming_the_file_and_the_field(
    spark: Any, tmp_path: Path
) -> None:
    data = without_v_in_part_2(tmp_path / "in")
    error, bolt = run_to_error(topology(spout(data, tmp_path / "ck")))
    assert isinstance(error, BadFileError)
    assert str(error) == (
        f"spout 'src': file {str(data / 'part-2.parquet')!r} of parquet files at "
        f"{str(data)!r} has no column 'v' (Spark would read it as null in every row of the "
        f"file; declare nullable=['v'] if it may be missing); fix or remove the file, or pass "
        f"bad_files=BadFilePolicy.SKIP to skip such files onto a bad-file stream"
    )
    assert all(r[1] is not None for r in bolt.rows)  # no None was emitted


def test_a_field_declared_nullable_may_be_missing(spark: Any, tmp_path: Path) -> None:
    data = without_v_in_part_2(tmp_path / "in")
    bolt = run_to_end(topology(spout(data, tmp_path / "ck", nullable=["v"])))
    rows = sorted(bolt.rows)
    assert [r[0] for r in rows] == list(range(4 * ROWS))
    assert [r[0] for r in rows if r[1] is None] == list(range(2 * ROWS, 3 * ROWS))


def test_skip_leaves_out_a_file_without_a_field(spark: Any, tmp_path: Path) -> None:
    data = without_v_in_part_2(tmp_path / "in")
    bolt = run_to_end(topology(spout(data, tmp_path / "ck", bad_files=BadFilePolicy.SKIP)))
    assert sorted(r[0] for r in bolt.rows) == [*range(0, 2 * ROWS), *range(3 * ROWS, 4 * ROWS)]
    assert bolt.bad == [
        [
            str(data / "part-2.parquet"),
            "has no column 'v' (Spark would read it as null in every row of the file; declare "
            "nullable=['v'] if it may be missing)",
        ]
    ]


def test_null_values_in_a_file_that_has_the_field_are_rows_like_any_other(
    spark: Any, tmp_path: Path
) -> None:
    data = tmp_path / "in"
    part(data, 0)
    part(data, 1, v=[None if i % 2 else "x" for i in range(ROWS)])
    bolt = run_to_end(topology(spout(data, tmp_path / "ck")))
    assert len(bolt.rows) == 2 * ROWS
    assert sum(r[1] is None for r in bolt.rows) == ROWS // 2


def test_nullable_must_name_emitted_fields(tmp_path: Path) -> None:
    with pytest.raises(SparkConfigError) as info:
        spout(tmp_path, tmp_path, nullable=["w"])
    assert str(info.value) == "nullable must list emitted fields (of ['id', 'v']), got ['w']"
