"""One local Spark session for the whole test process (a JVM costs seconds and 0.5 GB), and
helpers to run a topology to its end."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import RunningTopology, StormTopology, run_topology


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from spark_io import SessionConfig, spark_session

    session = spark_session(
        SessionConfig(
            app_name="squall-tests",
            warehouse_dir=str(tmp_path_factory.mktemp("warehouse")),
            fast_start=True,
        )
    )
    yield session
    session.stop()


def write_parquet(path: Path, columns: dict[str, list[Any]], **kwargs: Any) -> Path:
    """A parquet file of ``columns`` (pyarrow only: no Spark job)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path, **kwargs)
    return path


def run(
    topology: StormTopology,
    conf: dict[str, Any] | None = None,
    *,
    timeout: float = 60,
    until: Callable[[RunningTopology], Any] | None = None,
    read: Callable[[RunningTopology], Any] | None = None,
) -> Any:
    """Run ``topology`` until complete (or until the async ``until(running)`` returns), then
    return ``read(running)`` (default: its info)."""

    async def main() -> Any:
        async with run_topology(topology, conf) as running:
            if until is None:
                await running.wait_until_complete(timeout)
            else:
                await asyncio.wait_for(until(running), timeout)
            return read(running) if read is not None else running.info()

    import uvloop

    return uvloop.run(main())
