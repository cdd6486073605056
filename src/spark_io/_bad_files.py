"""Bad files of a files source: what the offset spout does when one file cannot be read.

Spark reads a directory as one dataset: one corrupt footer, one truncated file, one column
of another type in one file, and every query over the directory fails. A file that lacks a
column does not fail at all: Spark took the schema from another file and reads the missing
column as null. ``FileGuard`` stands between the spout's reader and the source: it finds the
file at fault (Spark names it in its error; a missing column is found by asking Spark which
files the nulls of a chunk came from), and applies the spout's ``BadFilePolicy``:

- ``FAIL`` (the default): a ``BadFileError`` naming the file and what is wrong with it. The
  spout stops reading, what it emitted completes, and the run ends with that error.
- ``SKIP``: the file is left out of the source from then on (the DataFrame is loaded again
  without it, with the same schema), the read that failed runs again, and the file is
  recorded in ``found`` for the spout to emit on its bad-file stream. Every good file is
  still read, also the ones added later to a tailed directory.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from ._errors import (
    BadFileError,
    SourceError,
    is_spark_error,
    local_path,
    map_spark_error,
    unreadable_file,
)
from ._source import SparkSource

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["BAD_FILE_FIELDS", "BadFilePolicy", "FileGuard"]

T = TypeVar("T")

#: The fields of a bad-file record: the file's path and what is wrong with it.
BAD_FILE_FIELDS = ("file", "error")
#: Formats whose files each carry their own schema: a file without a column can be told
#: from rows whose value is null. (A JSON object without a key or a short CSV line is one
#: row with a null, as Spark reads it, not a bad file.)
_SELF_DESCRIBING = ("parquet", "orc")


class BadFilePolicy(enum.Enum):
    """What the offset spout does with a file of its source that it cannot use.

    ``FAIL``: the run ends with a ``BadFileError`` naming the file (after what was emitted
    completes). ``SKIP``: the file is left out, recorded on the spout's bad-file stream
    (fields ``file``, ``error``), and every other file is read.
    """

    FAIL = "FAIL"
    SKIP = "SKIP"


class FileGuard:
    """A source's DataFrame without its bad files, for one spout task (see the module doc).

    ``where`` names the spout in messages; ``checked`` are the columns that must be in
    every file (the emitted fields not declared nullable, and the offset column). ``df`` is
    the source as it stands (None: every file was left out).
    """

    def __init__(
        self,
        source: SparkSource,
        policy: BadFilePolicy,
        checked: Sequence[str],
        where: str,
    ) -> None:
        self.source = source
        self.policy = policy
        self.checked = tuple(dict.fromkeys(checked))
        self.where = where
        self.describe = source.describe()
        self.df: DataFrame | None = None
        #: path -> what is wrong with it: the files left out (SKIP)
        self.excluded: dict[str, str] = {}
        #: (path, what is wrong) found and not yet emitted; the reader appends, the spout pops
        self.found: deque[tuple[str, str]] = deque()
        #: the schema first read, kept when files are left out
        self.schema: StructType | None = None
        #: path -> its columns, for the files whose columns were looked at
        self._columns: dict[str, frozenset[str]] = {}

    # --- reading ----------------------------------------------------------------------------
    def load(self, spark: SparkSession) -> DataFrame | None:
        """Load the source again (a tailed directory may hold new files), without the bad
        files found so far; a bad file found while reading the schema is handled here too."""
        while True:
            try:
                df = self.source.load_except(spark, self.excluded, self.schema)
                if df is not None and self.schema is None:
                    self.schema = df.schema  # read now: a bad footer fails here
                self.df = df
                return df
            except Exception as exc:
                if not self.left_out(exc):
                    raise

    def query(self, spark: SparkSession, run: Callable[[DataFrame | None], T]) -> T:
        """``run(self.df)``; when one file fails it and is left out (SKIP), again on the
        source without that file."""
        while True:
            try:
                return run(self.df)
            except Exception as exc:
                if not self.left_out(exc):
                    raise
                self.load(spark)

    # --- deciding ---------------------------------------------------------------------------
    def left_out(self, exc: BaseException) -> bool:
        """True when ``exc`` is a Spark failure on one file, now left out (SKIP); raises
        ``BadFileError`` for it under FAIL; False when it is not about one file."""
        if not (is_spark_error(exc) or isinstance(exc, SourceError)):
            return False
        bad = unreadable_file(exc)
        if bad is None:
            return False
        path, reason = bad
        self.bad(path, f"cannot be read ({reason})", exc)
        return True

    def bad(self, path: str, what: str, cause: BaseException | None = None) -> None:
        """Apply the policy to ``path``, of which ``what`` is wrong: raise or leave it out."""
        if self.policy is BadFilePolicy.FAIL or path in self.excluded:
            # (A file already left out that fails again: raise rather than loop.)
            raise BadFileError(
                f"{self.where}: file {path!r} of {self.describe} {what}; fix or remove the "
                f"file, or pass bad_files=BadFilePolicy.SKIP to skip such files onto a "
                f"bad-file stream",
                path,
                what,
            ) from cause
        self.excluded[path] = what
        self.found.append((path, what))

    # --- columns missing from a file ----------------------------------------------------------
    def check_columns(self, spark: SparkSession, table: pa.Table, rows: Column) -> bool:
        """Whether ``table``, the result of ``self.df.where(rows)``, can be used: True
        unless a file it came from lacks a checked column (Spark read it as null). Such a
        file raises under FAIL, and is left out under SKIP (False: read the rows again)."""
        df = self.df
        if df is None or self.source.kind != "files" or self.source.format not in _SELF_DESCRIBING:
            return True
        suspects = [c for c in self.checked if c in table.column_names and table[c].null_count]
        if not suspects:
            return True
        from pyspark.sql import functions as F

        nulls = F.col(f"`{suspects[0]}`").isNull()
        for name in suspects[1:]:
            nulls = nulls | F.col(f"`{name}`").isNull()
        try:
            found = df.where(rows & nulls).select("_metadata.file_path").distinct().collect()
        except Exception as exc:
            if self.left_out(exc):
                return False
            if not is_spark_error(exc):
                raise
            raise map_spark_error(
                exc, f"finding the files of {self.describe} with nulls in {suspects}", SourceError
            ) from exc
        usable = True
        for path in sorted(local_path(row[0]) for row in found):
            columns = self._columns_of(spark, path)
            if columns is None:  # unreadable, and left out
                usable = False
                continue
            missing = [c for c in suspects if c not in columns]
            if missing:
                self.bad(
                    path,
                    f"has no column {missing[0]!r} (Spark would read it as null in every row "
                    f"of the file; declare nullable=[{missing[0]!r}] if it may be missing)",
                )
                usable = False
        if not usable:
            self.load(spark)  # without the files just left out
        return usable

    def _columns_of(self, spark: SparkSession, path: str) -> frozenset[str] | None:
        """The columns of one file, or None when it cannot be read and was left out."""
        columns = self._columns.get(path)
        if columns is None:
            try:
                reader = spark.read.format(self.source.format or "parquet")
                schema = reader.options(**self.source.options).load(path).schema
            except Exception as exc:
                if self.left_out(exc):
                    return None
                if not is_spark_error(exc):
                    raise
                raise map_spark_error(exc, f"reading the schema of {path!r}", SourceError) from exc
            columns = self._columns[path] = frozenset(f.name for f in schema.fields)
        return columns
