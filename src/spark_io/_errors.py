"""spark_io's exceptions, grafted onto the engine's tree::

    SquallError
    ├── TopologyError (ValueError)
    │   └── SparkConfigError            a Spark component or session is misdeclared
    └── SquallRuntimeError (RuntimeError)
        └── SparkIOError                something failed at the Spark boundary
            ├── SparkSessionError       the Spark session could not start
            ├── SourceError             a source could not be read (missing path, table)
            │   └── OffsetColumnError   missing, null, duplicate or non-integer offsets
            ├── CheckpointError         a checkpoint is corrupt, unreadable or foreign
            └── SinkError               a sink could not write its batch
                └── SinkSchemaError     tuples do not fit the schema or the existing output

Spark's own exceptions (``pyspark.errors.PySparkException``, ``py4j``'s
``Py4JJavaError``/``Py4JError``) never leave spark_io: ``map_spark_error`` turns them into
one of these and the caller raises it ``from`` the original. ``asyncio.CancelledError`` is
never caught.
"""

from __future__ import annotations

import os

from engine import SquallRuntimeError, TopologyError

__all__ = [
    "VERBOSE_ENV",
    "CheckpointError",
    "OffsetColumnError",
    "SinkError",
    "SinkSchemaError",
    "SourceError",
    "SparkConfigError",
    "SparkIOError",
    "SparkSessionError",
    "is_spark_error",
    "map_spark_error",
]


class SparkConfigError(TopologyError):
    """A Spark source, sink or session is declared with a wrong or missing option."""


class SparkIOError(SquallRuntimeError):
    """Reading, writing or checkpointing through Spark failed."""


class SparkSessionError(SparkIOError):
    """The Spark session could not be created (no Java, bind failure, ...)."""


class SourceError(SparkIOError):
    """A source could not be read."""


class OffsetColumnError(SourceError):
    """A source's offset column is missing, not an integer, null, or not unique."""


class CheckpointError(SparkIOError):
    """A checkpoint is corrupt, unreadable, unwritable or belongs to another source."""


class SinkError(SparkIOError):
    """A sink could not write its batch."""


class SinkSchemaError(SinkError):
    """Tuples do not fit the sink's schema, or the schema differs from the existing output."""


def is_spark_error(exc: BaseException) -> bool:
    """True for exceptions raised by pyspark or py4j (checked by module, no import)."""
    module = type(exc).__module__ or ""
    return module.startswith(("pyspark.", "py4j."))


#: Set to 1 to append Spark's full error text (the JVM stack included) to our messages.
VERBOSE_ENV = "SQUALL_SPARK_VERBOSE_ERRORS"


def _summary(exc: BaseException) -> str:
    """The cause of a Spark error in one line: the exception's first meaningful line and,
    for a JVM error, its root cause (``Caused by:``), without the stack trace."""
    text = str(exc).strip()
    head = ""
    root = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("at ", "...", "JVM stacktrace", "Traceback")):
            continue
        if line.startswith("An error occurred while calling"):
            continue  # py4j's preamble; the Java exception follows on the next line
        if line.startswith("Caused by: "):
            root = line[len("Caused by: ") :]
        elif not head:
            head = line.removeprefix(": ")
    summary = f"{type(exc).__name__}: {head}" if head else type(exc).__name__
    if root and root not in head:
        summary += f" (caused by {root})"
    return summary


def map_spark_error(
    exc: BaseException, what: str, error_type: type[SparkIOError] = SparkIOError
) -> SparkIOError:
    """Our error for a Spark failure while doing ``what`` (e.g. "reading parquet at /x").

    The caller raises the result ``from exc``. A missing path or table becomes a
    ``SourceError``/``SinkError`` as ``error_type`` says; the Spark error class is kept in the
    message so it can be searched for. The message is one line: ``what`` (which names the
    path or table), the cause, and the JVM's root cause; Spark's full text stays on the
    original exception (``__cause__``), and is appended when the environment variable
    ``SQUALL_SPARK_VERBOSE_ERRORS`` is 1.
    """
    message = f"{what} failed: {_summary(exc)}"
    if os.environ.get(VERBOSE_ENV) == "1":
        message += f"\n{exc}"
    return error_type(message)
