"""engine.kafka's exceptions, grafted onto the engine's tree::

    SquallError
    ├── TopologyError (ValueError)
    │   └── KafkaConfigError        a Kafka spout or bolt is declared with a wrong option
    └── SquallRuntimeError (RuntimeError)
        └── KafkaIOError            the broker could not be reached or refused a request

The client's own errors (``confluent_kafka.KafkaException``) are mapped to ``KafkaIOError``
at the boundary and raised ``from`` the original.
"""

from __future__ import annotations

from .._model.errors import SquallRuntimeError, TopologyError

__all__ = ["KafkaConfigError", "KafkaIOError", "missing_client"]


class KafkaConfigError(TopologyError):
    """A Kafka spout, bolt or retry policy is declared with a wrong or missing option."""


class KafkaIOError(SquallRuntimeError):
    """Talking to the broker failed (unreachable, timed out, a request refused)."""


def missing_client(exc: ImportError) -> KafkaConfigError:
    """The error for a topology using engine.kafka without its client installed."""
    return KafkaConfigError(
        f"engine.kafka needs the confluent-kafka client: pip install -e '.[kafka]' ({exc})"
    )
