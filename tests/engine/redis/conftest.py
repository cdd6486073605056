"""A real ``redis-server`` on a free loopback port, in a temporary directory.

``scripts/test.sh`` installs Debian's ``redis-server`` when it is missing. Without it the
Redis tests are skipped with the reason, except with ``CI=true``, where they fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


class RedisServer:
    """One ``redis-server`` process: AOF on and fsynced per write, so a SIGKILL loses no
    acknowledged write and ``start()`` after ``kill()`` comes back with the same data."""

    def __init__(self, executable: str, directory: Path) -> None:
        self.executable = executable
        self.directory = directory
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                self.executable,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--dir",
                str(self.directory),
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--protected-mode",
                "yes",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while True:  # setup, not a test: wait for the server to answer
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as c:
                    c.sendall(b"PING\r\n")
                    if c.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None

    def flush(self) -> None:
        import redis

        with redis.Redis(port=self.port) as client:
            client.flushall()


def _executable() -> str:
    path = shutil.which("redis-server")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is missing on CI: scripts/test.sh installs it (apt-get)")
        pytest.skip("redis-server is not installed: apt-get install -y redis-server")
    return path


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(_executable(), tmp_path_factory.mktemp("redis"))
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
    server = RedisServer(_executable(), tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()
