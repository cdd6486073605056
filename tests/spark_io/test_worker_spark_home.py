"""Spark's Python processes import pyspark from the installed package, with its cached
bytecode, not from ``pyspark.zip`` (which each process compiled from source)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyspark
import pytest

from spark_io._session import worker_spark_home

PACKAGE = Path(pyspark.__file__).resolve().parent


def test_the_home_is_the_package_without_its_python_zips() -> None:
    home = Path(worker_spark_home() or "")
    assert home.is_dir() and home != PACKAGE
    assert (home / "bin" / "spark-submit").resolve() == PACKAGE / "bin" / "spark-submit"
    assert (home / "jars").resolve() == PACKAGE / "jars"
    assert not (home / "python" / "lib" / "pyspark.zip").exists()
    assert (PACKAGE / "python" / "lib" / "pyspark.zip").is_file()  # what Spark would use
    assert worker_spark_home() == str(home)  # made once


def test_a_damaged_home_is_made_again(tmp_path: Path) -> None:
    # in a folder of its own: the session of the other tests runs on the shared one
    home = Path(worker_spark_home(str(tmp_path)) or "")
    assert home.parent == tmp_path
    (home / "jars").unlink()
    assert worker_spark_home(str(tmp_path)) == str(home)
    assert (home / "jars").resolve() == PACKAGE / "jars"


def test_a_spark_home_the_user_set_is_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    assert worker_spark_home() is None


def test_the_sessions_workers_import_pyspark_from_the_package(spark: Any) -> None:
    """The session of the tests was made by ``spark_session``: a Python worker says where
    its pyspark came from; the driver's environment has no SPARK_HOME left over."""
    where = spark.range(1).mapInArrow(_pyspark_location, "where STRING").collect()[0]["where"]
    assert ".zip" not in where and Path(where).resolve().parent == PACKAGE
    assert "SPARK_HOME" not in os.environ or os.environ["SPARK_HOME"] != worker_spark_home()


def _pyspark_location(batches: Any) -> Any:
    import pyarrow as pa
    import pyspark as worker_pyspark

    for _ in batches:
        yield pa.RecordBatch.from_pydict({"where": [worker_pyspark.__file__]})
