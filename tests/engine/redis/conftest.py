"""A real ``redis-server`` on a free loopback port, in a temporary directory.

``scripts/test.sh`` installs Debian's ``redis-server`` when it is missing. Without it the
Redis tests are skipped with the reason, except with ``CI=true``, where they fail.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.redis import LocalRedisServer


def _executable() -> str:
    path = shutil.which("redis-server")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is missing on CI: scripts/test.sh installs it (apt-get)")
        pytest.skip("redis-server is not installed: apt-get install -y redis-server")
    return path


#: The tests' servers: AOF fsynced per write, so a SIGKILL loses no acknowledged write.
RedisServer = LocalRedisServer


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"), durable=True, executable=_executable())
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """A running server, emptied for the test."""
    redis_server.flush()
    return redis_server.url


@pytest.fixture
def own_redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A server of the test's own, which it may kill and start again."""
    server = RedisServer(tmp_path, durable=True, executable=_executable())
    server.start()
    try:
        yield server
    finally:
        server.kill()
