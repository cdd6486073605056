"""A query stopped while its ``foreachBatch`` writes: the runner tells Spark it was
interrupted in words Spark reads quickly (no Spark session needed)."""

from __future__ import annotations

import re
import traceback
from typing import Any

import pytest

pytest.importorskip("pyspark")

from spark_io import SinkError
from spark_io._errors import is_interruption

#: Spark's ``StreamExecution.PROXY_ERROR``: how it knows that a Python foreachBatch failed
#: because the query's thread was interrupted (in Python's regex syntax, the same meaning).
PROXY_ERROR = re.compile(
    r"py4j.protocol.Py4JJavaError: An error occurred while calling((.|\r\n|\r|\n)*)"
    r"(java.lang.InterruptedException|java.io.InterruptedIOException|"
    r"java.nio.channels.ClosedByInterruptException)"
)


class JavaThrowable:
    """Stands in for a py4j ``JavaObject`` of a ``Throwable``."""

    def __init__(self, name: str, cause: JavaThrowable | None = None) -> None:
        self.name, self.cause = name, cause

    def getClass(self) -> Any:
        name = self.name
        return type("Class", (), {"getName": lambda self: name})()

    def getCause(self) -> JavaThrowable | None:
        return self.cause


class Py4JJavaError(Exception):
    def __init__(self, java: JavaThrowable) -> None:
        # py4j's text: the call, then the JVM's whole stack trace
        super().__init__(
            "An error occurred while calling o225.save.\n: "
            + java.name
            + "".join(f"\n\tat org.apache.spark.Frame{i}(Frame.scala:{i})" for i in range(400))
        )
        self.java_exception = java


def interrupted_write() -> Py4JJavaError:
    cause = JavaThrowable("java.lang.InterruptedException")
    return Py4JJavaError(JavaThrowable("org.apache.spark.SparkException", cause))


def test_an_interruption_is_found_in_the_jvm_causes_behind_our_error() -> None:
    try:
        try:
            raise interrupted_write()
        except Py4JJavaError as exc:
            raise SinkError("sink 'sink' writing micro-batch 3 failed") from exc
    except SinkError as ours:
        assert is_interruption(ours)
    other = Py4JJavaError(JavaThrowable("java.io.IOException", JavaThrowable("java.lang.Error")))
    assert not is_interruption(other)
    assert not is_interruption(ValueError("no JVM here"))


def sink(monkeypatch: pytest.MonkeyPatch, raised: BaseException) -> Any:
    from spark_io.runner._compile import _BatchSink

    batch_sink = _BatchSink.__new__(_BatchSink)

    def write_all(batch: Any, batch_id: int) -> None:
        raise raised

    monkeypatch.setattr(batch_sink, "_write_all", write_all)
    return batch_sink


def test_a_write_cut_short_by_stop_is_reported_to_spark_as_an_interruption_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from spark_io.runner._compile import StoppedDuringBatch

    try:
        raise SinkError("sink 'sink' writing micro-batch 3 failed") from interrupted_write()
    except SinkError as exc:
        error = exc
    with pytest.raises(StoppedDuringBatch) as info:
        sink(monkeypatch, error)(None, 3)
    # What py4j sends the JVM is the formatted traceback (``traceback.format_exc``): Spark
    # must find its pattern in it, and the text after the match's start must be short, as
    # its pattern recurses once per character there (a JVM stack trace overflowed it).
    text = "".join(traceback.format_exception(info.value))
    match = PROXY_ERROR.search(text)
    assert match is not None and "micro-batch 3" in text
    assert len(text) - match.start() < 200
    assert "Frame" not in text  # no chain: neither our error nor py4j's stack trace


def test_any_other_failure_of_a_write_goes_to_spark_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    error = SinkError("sink 'sink' writing micro-batch 3 failed: disk full")
    with pytest.raises(SinkError) as info:
        sink(monkeypatch, error)(None, 3)
    assert info.value is error
