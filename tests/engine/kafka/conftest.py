"""A real Kafka-protocol broker (Tansu, from the kafka extra) on a free loopback port.

``scripts/test.sh`` installs the kafka extra. Without it the Kafka tests are skipped with
the reason, except with ``CI=true``, where they fail.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from engine.kafka import LocalKafkaBroker


def _executable() -> str:
    try:
        import confluent_kafka  # noqa: F401

        from engine.kafka._broker import broker_executable

        return broker_executable()
    except (ImportError, FileNotFoundError) as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the kafka extra is missing on CI: scripts/test.sh installs it ({exc})")
        pytest.skip(f"the kafka extra is not installed: pip install -e '.[kafka]' ({exc})")


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[LocalKafkaBroker]:
    """One broker for the session: tests keep apart by using topics of their own."""
    broker = LocalKafkaBroker(executable=_executable())
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()


_topics = itertools.count()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name no other test of the session uses."""
    return f"{request.node.name[:40].replace('[', '-').replace(']', '')}-{next(_topics)}"


@pytest.fixture
def own_kafka_broker() -> Iterator[LocalKafkaBroker]:
    """A broker of the test's own, which it may kill and start again."""
    broker = LocalKafkaBroker(executable=_executable())
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()
