"""The Spark session: one factory, tuned for a local engine that talks to Spark.

``spark_session()`` creates (or returns) the process's session with the settings measured
to work on a machine without a network: loopback binding, the
running interpreter as Spark's Python, the SQL warehouse in a temporary or given
directory, Arrow on, no UI, and (for a pip-installed pyspark) Python workers that import
pyspark with its cached bytecode (``worker_spark_home``). ``spark_session(existing=spark)``
adopts a session the user already has instead (only runtime settings such as Arrow are
applied to it).

Components hold a picklable ``SessionConfig`` and call ``get_or_create()`` in ``open``/
``prepare``: inside one process every component shares the one session.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._errors import SparkConfigError, SparkSessionError, is_spark_error, map_spark_error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["FAST_START_JAVA_OPTIONS", "SessionConfig", "spark_session"]

#: JVM flags that cut Spark's start-up by about a second; they slow long runs, so they are
#: for tests only (``SessionConfig(fast_start=True)``).
FAST_START_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

#: Runtime settings applied to every session, ours or the user's.
_RUNTIME_CONF = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}

_lock = threading.Lock()


@dataclass(frozen=True)
class SessionConfig:
    """How to create the local session if none is running yet (picklable).

    >>> SessionConfig(master="local[2]", conf={"spark.sql.shuffle.partitions": "4"})
    SessionConfig(master='local[2]', ...)
    """

    master: str = "local[2]"
    app_name: str = "squall"
    #: ``spark.sql.warehouse.dir``; None = a temporary directory removed at exit.
    warehouse_dir: str | None = None
    #: Extra Spark settings, applied last (they win over the defaults here).
    conf: Mapping[str, str] = field(default_factory=dict)
    shuffle_partitions: int = 2
    #: Add ``FAST_START_JAVA_OPTIONS`` (tests).
    fast_start: bool = False
    log_level: str = "ERROR"

    def __post_init__(self) -> None:
        if not isinstance(self.master, str) or not self.master:
            raise SparkConfigError(
                f"SessionConfig.master must be a non-empty string, got {self.master!r}"
            )
        if not isinstance(self.shuffle_partitions, int) or self.shuffle_partitions < 1:
            raise SparkConfigError(
                f"SessionConfig.shuffle_partitions must be an int >= 1, got "
                f"{self.shuffle_partitions!r}"
            )
        if "spark.jars.packages" in self.conf:
            raise SparkConfigError(
                "SessionConfig.conf sets spark.jars.packages: resolving packages needs Maven "
                "and kills the session offline; put the jars on spark.jars instead"
            )
        # A plain dict keeps the config picklable and printable.
        object.__setattr__(self, "conf", dict(self.conf))

    def get_or_create(self) -> SparkSession:
        """The process's session: the running one if any, else a new one from this config."""
        return spark_session(self)


def _temp_warehouse() -> str:
    path = tempfile.mkdtemp(prefix="squall-warehouse-")
    atexit.register(shutil.rmtree, path, True)
    return path


def _settings(config: SessionConfig) -> dict[str, str]:
    settings = {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(config.shuffle_partitions),
        "spark.sql.warehouse.dir": config.warehouse_dir or _temp_warehouse(),
        **_RUNTIME_CONF,
    }
    if config.fast_start:
        settings["spark.driver.extraJavaOptions"] = FAST_START_JAVA_OPTIONS
    settings.update({str(k): str(v) for k, v in config.conf.items()})
    return settings


def spark_session(
    config: SessionConfig | None = None, *, existing: SparkSession | None = None
) -> SparkSession:
    """The Spark session spark_io uses: ``existing`` if given, the running one if any, else a
    new local session built from ``config``.

    >>> spark = spark_session(SessionConfig(app_name="wordcount"))   # doctest: +SKIP
    >>> spark_session(existing=spark) is spark                       # doctest: +SKIP
    True

    Raises ``SparkSessionError`` (from Spark's error) when the session cannot start, e.g.
    without Java 17+.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - the spark extra is not installed
        raise SparkSessionError(
            "spark_io needs pyspark and pyarrow: pip install 'squall[spark]'"
        ) from exc
    if existing is not None:
        if not isinstance(existing, SparkSession):
            raise SparkConfigError(
                f"existing must be a pyspark.sql.SparkSession, got {type(existing).__name__}"
            )
        _apply_runtime_conf(existing)
        return existing
    config = config or SessionConfig()
    with _lock:
        active = SparkSession.getActiveSession()
        if active is None:
            # The session every thread shares (getActiveSession is per thread).
            active = getattr(SparkSession, "_instantiatedSession", None)
        if active is not None and not _stopped(active):
            _apply_runtime_conf(active)
            return active
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # Spark's Python workers must import pyarrow: run them with this interpreter.
        os.environ["PYSPARK_PYTHON"] = sys.executable
        builder = SparkSession.builder.master(config.master).appName(config.app_name)
        for key, value in _settings(config).items():
            builder = builder.config(key, value)
        # The JVM takes its environment when it starts: the Spark home is set for that
        # moment only, so the rest of the process sees the environment it had.
        home = worker_spark_home()
        try:
            if home is not None:
                os.environ["SPARK_HOME"] = home
            session = builder.getOrCreate()
            session.sparkContext.setLogLevel(config.log_level)
        except Exception as exc:
            if not is_spark_error(exc):
                raise
            raise map_spark_error(
                exc,
                f"starting a local Spark session (master {config.master!r}; Java 17+ "
                "must be on PATH or JAVA_HOME)",
                SparkSessionError,
            ) from exc
        finally:
            if home is not None:
                os.environ.pop("SPARK_HOME", None)
        return session


#: Entries of the pyspark package that a Spark home made by ``worker_spark_home`` leaves out.
_NOT_IN_WORKER_HOME = frozenset({"python"})


def worker_spark_home(root: str | None = None) -> str | None:
    """A Spark home for the JVM of a session started here, whose Python processes import
    pyspark from the installed package; None where that does not apply.

    Spark starts every Python process (workers, daemons, each streaming query's source
    process) with ``$SPARK_HOME/python/lib/pyspark.zip`` first on its path, and Python
    cannot cache the bytecode of modules it imports from a zip: each such process compiled
    pyspark from source, about a second of CPU each (measured: a warm query's start to its
    first micro-batch 1.4-1.5 s with the zip, 0.5-0.6 s without; the first query of a
    session 27.5 s against 12.9 s). A pip-installed pyspark is its own Spark home and holds
    the zip's files as a package, with their bytecode cached: this home links everything
    of it but ``python/``, so the zip is not found and workers, which run this interpreter
    (``PYSPARK_PYTHON``), import the same pyspark from the package.

    None (Spark's own layout kept) when ``SPARK_HOME`` is set (a Spark distribution, or the
    user's choice), when pyspark is not laid out as a pip package, or when the home cannot
    be made. It lives in the temporary directory, one per user, pyspark location and
    version (``root`` puts it in another folder), and is made again if something removed part
    of it.
    """
    if "SPARK_HOME" in os.environ:
        return None
    try:
        import pyspark
    except ImportError:  # pragma: no cover - the spark extra is not installed
        return None
    package = Path(pyspark.__file__).resolve().parent
    if not (package / "jars").is_dir() or not (package / "bin" / "spark-submit").is_file():
        return None
    entries = [e for e in sorted(package.iterdir()) if e.name not in _NOT_IN_WORKER_HOME]
    digest = hashlib.sha256(f"{package}\0{pyspark.__version__}".encode()).hexdigest()[:16]
    user = getattr(os, "getuid", lambda: 0)()
    home = Path(root or tempfile.gettempdir()) / f"squall-spark-home-{user}-{digest}"

    def complete() -> bool:
        return (
            all((home / e.name).resolve() == e.resolve() for e in entries)
            and not (home / "python").exists()
        )

    if home.is_dir() and complete():
        return str(home)
    try:
        staging = Path(tempfile.mkdtemp(prefix=f"{home.name}-", dir=home.parent))
        for entry in entries:
            (staging / entry.name).symlink_to(entry)
        if home.is_dir():
            shutil.rmtree(home, ignore_errors=True)  # damaged: made again
        try:
            staging.rename(home)
        except OSError:  # another process made it meanwhile
            shutil.rmtree(staging, ignore_errors=True)
    except OSError:
        return None
    return str(home) if home.is_dir() and complete() else None


def _stopped(session: Any) -> bool:
    sc = getattr(session, "_sc", None)
    return sc is None or getattr(sc, "_jsc", None) is None


def _apply_runtime_conf(session: SparkSession) -> None:
    try:
        for key, value in _RUNTIME_CONF.items():
            session.conf.set(key, value)
    except Exception as exc:
        if not is_spark_error(exc):
            raise
        raise map_spark_error(exc, "configuring the Spark session", SparkSessionError) from exc
