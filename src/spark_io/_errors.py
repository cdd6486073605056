"""spark_io's exceptions, grafted onto the engine's tree::

    SquallError
    ├── TopologyError (ValueError)
    │   └── SparkConfigError            a Spark component or session is misdeclared
    └── SquallRuntimeError (RuntimeError)
        └── SparkIOError                something failed at the Spark boundary
            ├── SparkSessionError       the Spark session could not start
            ├── SourceError             a source could not be read (missing path, table)
            │   ├── OffsetColumnError   missing, null, duplicate or non-integer offsets
            │   └── BadFileError        one file of a source is unreadable or lacks a field
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
from typing import Any
from urllib.parse import urlsplit

from engine import SquallRuntimeError, TopologyError

__all__ = [
    "VERBOSE_ENV",
    "BadFileError",
    "CheckpointError",
    "OffsetColumnError",
    "SinkError",
    "SinkSchemaError",
    "SourceError",
    "SparkConfigError",
    "SparkIOError",
    "SparkSessionError",
    "is_interruption",
    "is_spark_error",
    "local_path",
    "map_spark_error",
    "unreadable_file",
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


class BadFileError(SourceError):
    """One file of a files source cannot be read (corrupt, truncated, gone, a column of
    another type) or lacks a field the spout emits. ``path`` names the file, ``reason``
    says what is wrong with it."""

    def __init__(self, message: str, path: str = "", reason: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.path, self.reason))


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


#: The JVM exceptions by which Spark knows a query's thread was interrupted (``stop``).
INTERRUPTIONS = frozenset(
    {
        "java.lang.InterruptedException",
        "java.io.InterruptedIOException",
        "java.nio.channels.ClosedByInterruptException",
    }
)


def is_interruption(exc: BaseException) -> bool:
    """True when ``exc`` (or what it was raised from) is a py4j error whose JVM exception, or
    one of its causes, is an interruption (``INTERRUPTIONS``): a Spark call cut short by the
    query's ``stop``."""
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        java = getattr(error, "java_exception", None)
        depth = 0
        while java is not None and depth < 32:
            try:
                if str(java.getClass().getName()) in INTERRUPTIONS:
                    return True
                java = java.getCause()
            except Exception:  # the JVM object is gone: no more to learn
                break
            depth += 1
        error = error.__cause__ or error.__context__
    return False


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


#: Spark's error condition for a file it could not read (its parameter ``path`` names it).
_FAILED_READ_FILE = "FAILED_READ_FILE"


def local_path(uri: str) -> str:
    """A ``file:`` URI as a plain path (``file:///x`` and ``file:/x`` are both ``/x``);
    any other location as it is."""
    if uri.startswith("file:"):
        return urlsplit(uri).path
    return uri


def unreadable_file(exc: BaseException) -> tuple[str, str] | None:
    """``(path, reason)`` when Spark failed because one file could not be read, else None.

    Spark raises a ``SparkException`` of condition ``FAILED_READ_FILE.*`` with the file's
    path as a message parameter, often wrapped (``Exception thrown in awaitResult``) by the
    job that read it; the JVM cause chain is walked to find it. ``reason`` is the
    condition and the root cause's message, in one line.
    """
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    if java is None:
        # Our own error mapped from Spark's (raised ``from`` it): look at Spark's.
        cause = exc.__cause__
        return None if cause is None else unreadable_file(cause)
    path: str | None = None
    condition = ""
    root = ""
    seen = 0
    while java is not None and seen < 32:  # a cause chain, bounded against cycles
        seen += 1
        try:
            cond = java.getCondition()
        except Exception:  # not a SparkThrowable (a py4j error): no condition
            cond = None
        if path is None and cond and str(cond).startswith(_FAILED_READ_FILE):
            params = dict(java.getMessageParameters())
            path = params.get("path")
            condition = str(cond)
        try:
            message = java.getMessage()
            java = java.getCause()
        except Exception:
            break
        if path is not None and message:
            root = " ".join(str(message).split())
    if path is None:
        return None
    reason = condition if not root or root.startswith("[") else f"{condition}: {root}"
    return local_path(path), reason
