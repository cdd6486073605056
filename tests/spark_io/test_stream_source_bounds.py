"""The offsets' bounds of a ``SparkOffsetSpout`` over parquet files, as Spark's source process
reads them before a query's first micro-batch: from the files' footers when every row group
has exact statistics, else from a scan of the column; both give the same bounds."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_io._layout import OutputLayout, StreamLayout
from spark_io._stream_source import OffsetFilesReader

LAYOUT = OutputLayout("rows", (StreamLayout("rows", "default", 0, ("v",), ('"long"',)),))


def reader(location: Path, column: str = "offset") -> OffsetFilesReader:
    return OffsetFilesReader("rows", (1,), LAYOUT, 10, location=str(location), offset_column=column)


def scanned(location: Path, column: str = "offset") -> tuple[int | None, int | None]:
    """The bounds as the scan finds them (the footers not asked)."""
    r = reader(location, column)
    r._parquet_bounds = lambda: None  # type: ignore[method-assign]
    return r._bounds()


def write(path: Path, offsets: list[int], **kwargs: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({"v": pa.array(offsets, pa.int64()), "offset": pa.array(offsets, pa.int64())})
    pq.write_table(table, path, **kwargs)  # type: ignore[arg-type]


def test_footers_of_several_files_row_groups_and_partitions_give_the_scans_bounds(
    tmp_path: Path,
) -> None:
    write(tmp_path / "a.parquet", list(range(100, 200)), row_group_size=7)
    write(tmp_path / "day=2" / "b.parquet", [40, 41, 999])
    write(tmp_path / "c.parquet", [])  # an empty file: no row group
    (tmp_path / "_SUCCESS").write_bytes(b"")
    (tmp_path / ".b.parquet.crc").write_bytes(b"not parquet")
    r = reader(tmp_path)
    assert r._parquet_bounds() == (40, 1000)
    assert r._bounds() == scanned(tmp_path) == (40, 1000)
    assert (r.initial(), r.available()) == ({"offset": 40}, {"offset": 1000})


def test_one_file_as_the_location(tmp_path: Path) -> None:
    write(tmp_path / "one.parquet", [5, 2, 9])
    assert reader(tmp_path / "one.parquet")._parquet_bounds() == (2, 10)


def test_no_rows_at_all(tmp_path: Path) -> None:
    write(tmp_path / "empty.parquet", [])
    assert reader(tmp_path)._parquet_bounds() == (None, None)
    assert reader(tmp_path).available() == {"offset": 0}


@pytest.mark.parametrize("why", ["no statistics", "offsets that are not integers"])
def test_without_usable_footers_the_scan_decides(tmp_path: Path, why: str) -> None:
    if why == "no statistics":
        write(tmp_path / "a.parquet", [7, 3, 5], write_statistics=False)
    else:
        pq.write_table(pa.table({"v": [1, 2], "offset": [7.0, 3.0]}), tmp_path / "a.parquet")
    r = reader(tmp_path)
    assert r._parquet_bounds() is None
    assert r._bounds() == scanned(tmp_path) == (3, 8)


def test_the_footers_read_the_files_the_reader_scans_no_more(tmp_path: Path) -> None:
    # The rows are read by pyarrow's dataset, which leaves out every name starting with _
    # or . (Spark's listing keeps _a=b.parquet and _k=1/): bounds taken from those files'
    # footers would cover offsets the reader never finds (a LATEST first poll skipping the
    # rows appended below them).
    write(tmp_path / "a.parquet", [1, 2, 3])
    write(tmp_path / "_a=b.parquet", [50])
    write(tmp_path / "_k=1" / "c.parquet", [70])
    r = reader(tmp_path)
    assert r._parquet_bounds() == scanned(tmp_path) == (1, 4)


def test_a_csv_field_spark_reads_as_a_string_keeps_its_text(tmp_path: Path) -> None:
    # Spark reads a CSV's columns as strings (no inferSchema); pyarrow's reader inferred
    # "02139" as the integer 2139, which the cast to the string type wrote back as "2139",
    # and an empty one as "" where Spark reads null.
    (tmp_path / "rows.csv").write_text('offset,code\n0,02139\n1,00501\n2,\n3,""\n')
    string = '"string"'
    layout = OutputLayout(
        "rows", (StreamLayout("rows", "default", 0, ("offset", "code"), ('"long"', string)),)
    )
    csv = OffsetFilesReader(
        "rows", (1,), layout, 10, location=str(tmp_path), format="csv", offset_column="offset"
    )
    ((offsets, codes),) = list(csv.read_columns(0, 0, 4))
    assert offsets.to_pylist() == [0, 1, 2, 3]
    assert codes.to_pylist() == ["02139", "00501", None, None]  # Spark's nulls too
