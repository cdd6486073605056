"""``spark_io``'s face imports each module on first use: the Python process Spark starts for
each streaming source imports ``spark_io`` modules to unpickle one spout, and must not pay
for the runner, the sink, numpy or Numba when that spout needs none of them."""

from __future__ import annotations

from pathlib import Path

import pytest

import spark_io
from tests import fresh_interpreter


def loaded_after(code: str) -> list[str]:
    return fresh_interpreter.loaded_after(
        code, ("numba", "acker_kernel", "numpy", "pyspark", "pyarrow", "pandas")
    )


@pytest.mark.parametrize(
    "code", ["import spark_io", "import spark_io._errors", "from spark_io import SparkIOError"]
)
def test_errors_and_the_face_load_nothing_heavy(code: str) -> None:
    assert loaded_after(code) == []


def test_star_import_gives_every_public_name() -> None:
    namespace: dict[str, object] = {}
    exec("from spark_io import *", namespace)
    assert set(spark_io.__all__) <= set(namespace)
    assert namespace["SparkRunner"].__module__.startswith("spark_io.runner")  # type: ignore[attr-defined]
    assert set(spark_io.__all__) <= set(dir(spark_io))


def test_an_unknown_name_raises() -> None:
    with pytest.raises(AttributeError, match=r"^module 'spark_io' has no attribute 'Nope'$"):
        spark_io.Nope  # noqa: B018


def test_the_streaming_source_process_reads_offsets_without_the_engine_machinery(
    tmp_path: Path,
) -> None:
    """What Spark's per-query source process does for a ``SparkOffsetSpout`` over parquet:
    import its runner, unpickle the reader, ask for the initial and available offsets."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from spark_io._layout import OutputLayout, StreamLayout
    from spark_io._stream_source import OffsetFilesReader, dump_reader

    pq.write_table(pa.table({"word": ["a", "b", "c"], "offset": [5, 6, 7]}), tmp_path / "w.parquet")
    layout = OutputLayout("words", (StreamLayout("words", "default", 0, ("word",), ('"string"',)),))
    reader = OffsetFilesReader("words", (1, 2), layout, 10, location=str(tmp_path))
    code = (
        "import pyspark.sql.streaming.python_streaming_source_runner\n"
        "from spark_io._stream_source import load_reader\n"
        f"reader = load_reader({dump_reader(reader)!r})\n"
        "assert (reader.initial(), reader.available()) == ({'offset': 5}, {'offset': 8})\n"
        "assert 'spark_io.runner' not in sys.modules and 'engine._runtime' not in sys.modules\n"
        # the bounds come from the parquet footers: no scan, no pyarrow.dataset (~0.45 s)
        "assert 'pyarrow.dataset' not in sys.modules\n"
    )
    assert loaded_after(code) == ["numpy", "pyarrow", "pyspark"]  # not even pandas


def test_the_runners_source_process_loads_neither_the_compiler_nor_numba(
    tmp_path: Path,
) -> None:
    """The runner wraps each spout's reader in ``NamedReader``, defined in the runner's
    package: unpickling it must not import the package's compiler, which loads the engine's
    runtime and Numba (that took about 1 s of every query's start)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from spark_io._layout import OutputLayout, StreamLayout
    from spark_io._stream_source import OffsetFilesReader, dump_reader
    from spark_io.runner._commits import NamedReader

    pq.write_table(pa.table({"word": ["a", "b"], "offset": [3, 4]}), tmp_path / "w.parquet")
    layout = OutputLayout("words", (StreamLayout("words", "default", 0, ("word",), ('"string"',)),))
    inner = OffsetFilesReader("words", (1,), layout, 10, location=str(tmp_path))
    code = (
        "import pyspark.sql.streaming.python_streaming_source_runner\n"
        "from spark_io._stream_source import load_reader\n"
        f"reader = load_reader({dump_reader(NamedReader.of(inner))!r})\n"
        "assert reader.available()['offset'] == 5\n"
        "assert 'spark_io.runner._compile' not in sys.modules, 'the compiler was loaded'\n"
        "assert 'engine.runners' not in sys.modules and 'engine._runtime' not in sys.modules\n"
    )
    assert "numba" not in loaded_after(code)
