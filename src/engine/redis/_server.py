"""``LocalRedisServer``: a ``redis-server`` of one's own on a free loopback port, for tests,
benchmarks and examples that must not depend on a server somebody else runs."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Sequence
from pathlib import Path

from ..testing._local_server import LocalServer

__all__ = ["LocalRedisServer"]


class LocalRedisServer(LocalServer):
    """One ``redis-server`` process bound to 127.0.0.1 on a free port, its files in
    ``directory``. With ``durable=True`` the append-only file is fsynced on every write, so a
    SIGKILL loses no acknowledged write and ``start()`` after ``kill()`` comes back with the
    same data.

    >>> # with LocalRedisServer("/tmp/r") as server:
    >>> #     RedisConfig(url=server.url)
    """

    what = "redis-server"

    def __init__(
        self, directory: str | Path, *, durable: bool = False, executable: str | None = None
    ) -> None:
        exe = executable or shutil.which("redis-server")
        if exe is None:
            raise FileNotFoundError(
                "redis-server is not installed: apt-get install -y redis-server"
            )
        super().__init__()
        self.executable = exe
        self.directory = Path(directory)
        self.durable = durable

    @property
    def url(self) -> str:
        """The URL a ``RedisConfig(url=...)`` takes to reach this server (database 0)."""
        return f"redis://127.0.0.1:{self.port}/0"

    def args(self) -> Sequence[str]:
        args = [self.executable, "--bind", "127.0.0.1", "--port", str(self.port)]
        args += ["--dir", str(self.directory), "--save", "", "--protected-mode", "yes"]
        if self.durable:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        return args

    def ready(self, connection: socket.socket) -> bool:
        """Ready once it answers PING (it accepts connections while loading its data)."""
        connection.sendall(b"PING\r\n")
        return connection.recv(16).startswith(b"+PONG")

    def flush(self) -> None:
        """Empty every database."""
        import redis

        with redis.Redis(port=self.port) as client:
            client.flushall()

    def __enter__(self) -> LocalRedisServer:
        self.start()
        return self
