"""``SparkSource``: what a spout reads, as picklable configuration.

A source is a description (a path and format, a table name, a SQL query, or a temporary
view registered for a DataFrame), turned into a DataFrame by ``load(spark)`` inside the
spout's task, never pickled as a live Spark object.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._errors import SourceError, SparkConfigError, is_spark_error, local_path, map_spark_error

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["FILE_FORMATS", "SparkSource"]

#: File formats Spark reads without extra jars.
FILE_FORMATS = ("parquet", "json", "csv", "orc", "text")
#: Reader options that choose which files a path holds (they apply to listing it too).
_LISTING_OPTIONS = (
    "pathGlobFilter",
    "recursiveFileLookup",
    "modifiedBefore",
    "modifiedAfter",
    "ignoreMissingFiles",
)


@dataclass(frozen=True)
class SparkSource:
    """A batch source. Build one with ``files``, ``table``, ``sql`` or ``dataframe``.

    >>> SparkSource.files("data/sentences.parquet").describe()
    "parquet files at 'data/sentences.parquet'"
    """

    kind: str
    location: str
    format: str | None = None
    schema: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    name: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", {str(k): str(v) for k, v in self.options.items()})

    @classmethod
    def files(
        cls,
        path: str | os.PathLike[str],
        format: str = "parquet",
        *,
        schema: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> SparkSource:
        """Files under ``path`` (a file or a directory) in ``format``; ``schema`` is a DDL
        string such as ``"id BIGINT, sentence STRING"`` (inferred when None)."""
        if format not in FILE_FORMATS:
            raise SparkConfigError(
                f"unknown file format {format!r}; use one of {', '.join(FILE_FORMATS)}"
            )
        location = os.fspath(path)
        if not location:
            raise SparkConfigError("SparkSource.files needs a non-empty path")
        return cls("files", location, format, schema, dict(options or {}))

    @classmethod
    def table(cls, name: str) -> SparkSource:
        """A table of the session's catalog."""
        if not isinstance(name, str) or not name:
            raise SparkConfigError(f"SparkSource.table needs a table name, got {name!r}")
        return cls("table", name)

    @classmethod
    def sql(cls, query: str, *, name: str | None = None) -> SparkSource:
        """The result of a SQL query (it must return the same rows each time it runs).
        ``name`` identifies it in checkpoints and messages (default: the query text)."""
        if not isinstance(query, str) or not query.strip():
            raise SparkConfigError("SparkSource.sql needs a query")
        return cls("sql", query, name=name)

    @classmethod
    def dataframe(cls, df: DataFrame, *, name: str) -> SparkSource:
        """A DataFrame, registered as a temporary view of its session (so the source stays
        picklable). Works in the process that built ``df``; ``name`` identifies the data in
        checkpoints, so give the same name to the same data across restarts."""
        if not isinstance(name, str) or not name:
            raise SparkConfigError("SparkSource.dataframe needs a name for its checkpoints")
        if not hasattr(df, "createOrReplaceTempView"):
            raise SparkConfigError(
                f"SparkSource.dataframe needs a pyspark DataFrame, got {type(df).__name__}"
            )
        view = f"squall_source_{uuid.uuid4().hex}"
        df.createOrReplaceTempView(view)
        return cls("view", view, name=name)

    def describe(self) -> str:
        """How messages and checkpoints name this source."""
        if self.kind == "files":
            return f"{self.format} files at {self.location!r}"
        if self.kind == "table":
            return f"table {self.location!r}"
        if self.kind == "view":
            return f"dataframe {self.name!r}"
        return f"query {self.name!r}" if self.name else f"query {self.location!r}"

    def load(self, spark: SparkSession) -> DataFrame:
        """The source as a DataFrame of ``spark``; Spark's errors become ``SourceError``."""
        try:
            if self.kind == "files":
                reader = spark.read.format(self.format or "parquet").options(**self.options)
                if self.schema:
                    reader = reader.schema(self.schema)
                return reader.load(self.location)
            if self.kind in ("table", "view"):
                return spark.table(self.location)
            return spark.sql(self.location)
        except Exception as exc:
            if not is_spark_error(exc):
                raise
            raise map_spark_error(exc, f"reading {self.describe()}", SourceError) from exc

    def list_files(self, spark: SparkSession) -> list[str]:
        """The data files under a files source's path, as Spark lists them (names starting
        with ``_`` or ``.`` left out), as plain paths for local files. No file is opened."""
        if self.kind != "files":
            raise SparkConfigError(f"{self.describe()} is not a files source: it has no files")
        options = {k: v for k, v in self.options.items() if k in _LISTING_OPTIONS}
        try:
            listing = spark.read.format("binaryFile").options(**options).load(self.location)
            return [local_path(f) for f in listing.inputFiles()]
        except Exception as exc:
            if not is_spark_error(exc):
                raise
            raise map_spark_error(exc, f"listing {self.describe()}", SourceError) from exc

    def load_except(
        self, spark: SparkSession, exclude: Collection[str], schema: StructType | None = None
    ) -> DataFrame | None:
        """The source without the files in ``exclude`` (plain paths), or None when no file
        is left. ``schema`` (the one read before) keeps the columns and types the same
        whichever file would now be read for the schema."""
        if not exclude:
            return self.load(spark)
        files = [f for f in self.list_files(spark) if f not in exclude]
        if not files:
            return None
        try:
            reader = spark.read.format(self.format or "parquet").options(**self.options)
            if self.schema:
                reader = reader.schema(self.schema)
            elif schema is not None:
                reader = reader.schema(schema)
            here = local_path(self.location)
            if ":/" not in here:
                here = os.path.abspath(here)
            if files != [here] and not any(c in self.location for c in "*?["):
                # Partition columns (``key=value`` directories) are found from here.
                reader = reader.option("basePath", self.location)
            return reader.load(files)
        except Exception as exc:
            if not is_spark_error(exc):
                raise
            raise map_spark_error(exc, f"reading {self.describe()}", SourceError) from exc
