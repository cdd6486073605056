"""``LocalRedisServer``: a ``redis-server`` of one's own on a free loopback port, for tests,
benchmarks and examples that must not depend on a server somebody else runs."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

__all__ = ["LocalRedisServer"]

#: How long ``start`` waits for the server to answer PING (seconds).
START_TIMEOUT_SECS = 20.0


class LocalRedisServer:
    """One ``redis-server`` process bound to 127.0.0.1 on a free port, its files in
    ``directory``. With ``durable=True`` the append-only file is fsynced on every write, so a
    SIGKILL loses no acknowledged write and ``start()`` after ``kill()`` comes back with the
    same data.

    >>> # with LocalRedisServer("/tmp/r") as server:
    >>> #     RedisConfig(url=server.url)
    """

    def __init__(
        self, directory: str | Path, *, durable: bool = False, executable: str | None = None
    ) -> None:
        exe = executable or shutil.which("redis-server")
        if exe is None:
            raise FileNotFoundError(
                "redis-server is not installed: apt-get install -y redis-server"
            )
        self.executable = exe
        self.directory = Path(directory)
        self.durable = durable
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port: int = s.getsockname()[1]
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The URL a ``RedisConfig(url=...)`` takes to reach this server (database 0)."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server and return once it answers PING."""
        args = [self.executable, "--bind", "127.0.0.1", "--port", str(self.port)]
        args += ["--dir", str(self.directory), "--save", "", "--protected-mode", "yes"]
        if self.durable:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_SECS
        while True:  # a process start, not a test: poll until it answers
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as c:
                    c.sendall(b"PING\r\n")
                    if c.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL the server (no shutdown save), if it runs."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None

    def flush(self) -> None:
        """Empty every database."""
        import redis

        with redis.Redis(port=self.port) as client:
            client.flushall()

    def __enter__(self) -> LocalRedisServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill()
