"""The runner's tests share the test process's one session; made here first (the directory
sorts before the other Spark tests), it gets ``RUNNER_SPARK_CONF``: Spark's Python workers
fork from a daemon that imported the engine once, seconds saved per worker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from spark_io import RUNNER_SPARK_CONF, SessionConfig, spark_session

    session = spark_session(
        SessionConfig(
            app_name="squall-tests",
            warehouse_dir=str(tmp_path_factory.mktemp("warehouse")),
            fast_start=True,
            conf=RUNNER_SPARK_CONF,
        )
    )
    yield session
    session.stop()
