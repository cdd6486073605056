"""Spark's errors mapped to ours: one line naming the path, the cause and the root cause."""

from __future__ import annotations

import pytest

from spark_io import SinkError, SourceError
from spark_io._errors import VERBOSE_ENV, is_spark_error, map_spark_error

JAVA_TEXT = """An error occurred while calling o123.save.
: org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to file:/out.
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.taskFailedWhileWritingRowsError(QueryExecutionErrors.scala:775)
\tat org.apache.spark.sql.execution.datasources.FileFormatWriter$.executeTask(FileFormatWriter.scala:420)
\t... 17 more
Caused by: java.io.IOException: Mkdirs failed to create file:/out/_temporary/0
\tat org.apache.hadoop.fs.ChecksumFileSystem.create(ChecksumFileSystem.java:715)
"""


class Py4JJavaError(Exception):
    """Stands in for py4j's: recognised by its module."""


Py4JJavaError.__module__ = "py4j.protocol"


def test_a_jvm_error_is_shortened_to_the_cause_and_the_root_cause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(VERBOSE_ENV, raising=False)
    exc = Py4JJavaError(JAVA_TEXT)
    assert is_spark_error(exc)
    error = map_spark_error(exc, "writing 3 rows to parquet files at '/out'", SinkError)
    assert isinstance(error, SinkError)
    assert str(error) == (
        "writing 3 rows to parquet files at '/out' failed: Py4JJavaError: "
        "org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows "
        "to file:/out. (caused by java.io.IOException: Mkdirs failed to create "
        "file:/out/_temporary/0)"
    )


def test_the_verbose_flag_appends_sparks_full_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VERBOSE_ENV, "1")
    error = map_spark_error(Py4JJavaError(JAVA_TEXT), "reading table 't'", SourceError)
    first, rest = str(error).split("\n", 1)
    assert first.startswith("reading table 't' failed: Py4JJavaError: org.apache.spark")
    assert rest == JAVA_TEXT


def test_a_python_side_spark_error_keeps_its_first_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VERBOSE_ENV, raising=False)

    class AnalysisException(Exception):
        pass

    AnalysisException.__module__ = "pyspark.errors.exceptions.captured"
    exc = AnalysisException(
        "[PATH_NOT_FOUND] Path does not exist: file:/nowhere. SQLSTATE: 42K03\n\n"
        "JVM stacktrace:\norg.apache.spark.sql.AnalysisException: ...\n\tat x.y(Z.scala:1)"
    )
    assert str(map_spark_error(exc, "reading parquet files at '/nowhere'", SourceError)) == (
        "reading parquet files at '/nowhere' failed: AnalysisException: [PATH_NOT_FOUND] Path "
        "does not exist: file:/nowhere. SQLSTATE: 42K03"
    )
