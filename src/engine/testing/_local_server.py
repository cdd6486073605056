"""``LocalServer``: a server process of one's own on a free loopback port, for tests,
benchmarks and examples that must not depend on a server somebody else runs
(``engine.redis.LocalRedisServer``, ``engine.kafka.LocalKafkaBroker``).

A subclass says how to start its server (``args()``) and how to tell it is ready
(``ready()``, tried on a fresh connection); ``start`` polls until it is, ``kill`` stops it
with SIGKILL (a crash, not a shutdown) and ``start`` again brings it back on the same port.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any

__all__ = ["LocalServer", "free_port"]

#: How long ``start`` waits for the server to be ready (seconds).
START_TIMEOUT_SECS = 20.0


def free_port() -> int:
    """A loopback port no one listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalServer:
    """One server process bound to 127.0.0.1 on ``port`` (a free one by default)."""

    #: what the errors call the server
    what = "the server"

    def __init__(self, *, port: int | None = None) -> None:
        self.port: int = free_port() if port is None else port
        self.process: subprocess.Popen[bytes] | None = None

    def args(self) -> Sequence[str]:
        """The command line that starts the server on ``self.port``."""
        raise NotImplementedError(f"{type(self).__name__} must implement args()")

    def ready(self, connection: socket.socket) -> bool:
        """Whether the server answering on ``connection`` is ready (default: it accepted)."""
        return True

    def start(self) -> None:
        """Start the server and return once it is ready."""
        self.process = subprocess.Popen(
            self.args(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + START_TIMEOUT_SECS
        while True:  # a process start, not a test: poll until it answers
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as c:
                    if self.ready(c):
                        return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"{self.what} did not start on port {self.port}")
            time.sleep(0.01)

    def kill(self) -> None:
        """SIGKILL the server, if it runs."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None

    def __enter__(self) -> Any:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill()
