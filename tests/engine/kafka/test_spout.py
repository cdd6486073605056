"""KafkaSpout against a real broker: first-poll strategies on a first run, after an earlier
run's commit and after a crash in the same run; commits of the contiguous acked prefix only;
retries and the maximum-retries path; max_uncommitted_offsets; rebalance of the spout's
parallelism; partitions that appear while it runs."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from engine import TopologyBuilder, run_topology
from engine.kafka import (
    FirstPollOffsetStrategy,
    KafkaSpout,
    KafkaSpoutConfig,
    KafkaSpoutRetryExponentialBackoff,
    LocalKafkaBroker,
    ProcessingGuarantee,
)
from engine.testing import CrashTask

from .helpers import SEEN, Record, commit, commit_rounds, committed, offsets, produce, until

pytestmark = pytest.mark.kafka

S = FirstPollOffsetStrategy


def topology(
    broker: LocalKafkaBroker,
    topic: str,
    name: str,
    *,
    tasks: int = 1,
    executors: int | None = None,
    bolt: Record | None = None,
    **options: Any,
) -> Any:
    config = KafkaSpoutConfig(
        broker.bootstrap_servers,
        options.pop("topics", [topic]),
        group_id=options.pop("group_id", topic),
        offset_commit_period_ms=options.pop("offset_commit_period_ms", 50),
        **options,
    )
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(config), executors or tasks).set_num_tasks(tasks)
    builder.set_bolt("record", bolt or Record(name)).shuffle_grouping("kafka")
    return builder.create_topology()


CONF = {"topology.message.timeout.secs": 30, "topology.max.spout.pending": 10_000}


def spouts(running: Any) -> list[KafkaSpout]:
    return list(running.task_objects("kafka").values())


async def opened(running: Any) -> None:
    await until(
        lambda: all(getattr(s, "_consumer", None) is not None for s in spouts(running)),
        what="the spout tasks to open",
    )


# --- first poll ------------------------------------------------------------------------------

#: strategy -> (offsets read with no commit, offsets read after an earlier run committed 20);
#: 0..49 exist when the topology starts (packed into one producer batch: the broker's
#: "latest offset" then falls short of the end), 50..59 are produced after it started.
FIRST_POLL = {
    S.EARLIEST: (range(0, 60), range(0, 60)),
    S.LATEST: (range(50, 60), range(50, 60)),
    S.UNCOMMITTED_EARLIEST: (range(0, 60), range(20, 60)),
    S.UNCOMMITTED_LATEST: (range(50, 60), range(20, 60)),
}


@pytest.mark.parametrize("earlier_commit", [False, True], ids=["first-run", "after-commit"])
@pytest.mark.parametrize("strategy", list(S), ids=lambda s: s.name)
def test_first_poll_strategy_on_a_new_run(
    kafka_broker: LocalKafkaBroker, topic_name: str, strategy: S, earlier_commit: bool
) -> None:
    kafka_broker.create_topic(topic_name)
    produce(kafka_broker.bootstrap_servers, topic_name, range(50))
    if earlier_commit:
        commit(kafka_broker.bootstrap_servers, topic_name, topic_name, 20)
    expected = list(FIRST_POLL[strategy][earlier_commit])

    async def main() -> None:
        t = topology(kafka_broker, topic_name, topic_name, first_poll_offset_strategy=strategy)
        async with run_topology(t, CONF) as running:
            await opened(running)
            produce(kafka_broker.bootstrap_servers, topic_name, range(50, 60))
            await until(lambda: 59 in offsets(topic_name), what="offset 59")
            await running.wait_until_idle(timeout=30)

    asyncio.run(main())
    assert offsets(topic_name) == expected
    # The start (and then each acked prefix) is committed as this run's.
    assert committed(kafka_broker.bootstrap_servers, topic_name, topic_name) == [60]


@pytest.mark.parametrize("strategy", list(S), ids=lambda s: s.name)
def test_a_task_restarted_in_the_same_run_resumes_from_its_commit(
    kafka_broker: LocalKafkaBroker, topic_name: str, strategy: S
) -> None:
    """Whatever the strategy: EARLIEST does not read everything again, LATEST does not skip
    what arrived while the task was down."""
    kafka_broker.create_topic(topic_name)
    servers = kafka_broker.bootstrap_servers
    produce(servers, topic_name, range(50))
    first = list(FIRST_POLL[strategy][False])[: -10 if strategy.name.endswith("LATEST") else 50]

    async def main() -> None:
        t = topology(kafka_broker, topic_name, topic_name, first_poll_offset_strategy=strategy)
        async with run_topology(t, CONF) as running:
            await opened(running)
            await until(lambda: offsets(topic_name) == first, what="the first records")
            await until(lambda: committed(servers, topic_name, topic_name) == [50])
            running.deactivate()
            await running.wait_until_idle(timeout=30)
            (before,) = spouts(running)
            produce(servers, topic_name, range(50, 60))  # while nothing reads
            running.inject(CrashTask(component="kafka"))
            await until(lambda: spouts(running)[0] is not before, what="the restart")
            await opened(running)
            running.activate()
            await until(lambda: 59 in offsets(topic_name), what="offset 59")
            await running.wait_until_idle(timeout=30)

    asyncio.run(main())
    assert offsets(topic_name) == first + list(range(50, 60))


def test_latest_skips_every_record_of_a_packed_last_batch(
    kafka_broker: LocalKafkaBroker, topic_name: str
) -> None:
    """The broker answers "latest offset" with the last batch's start + 1: 10 records in one
    batch must not make LATEST read the last 9 of them."""
    kafka_broker.create_topic(topic_name)
    servers = kafka_broker.bootstrap_servers
    produce(servers, topic_name, range(10))

    async def main() -> None:
        t = topology(kafka_broker, topic_name, topic_name, first_poll_offset_strategy=S.LATEST)
        async with run_topology(t, CONF) as running:
            await opened(running)
            assert committed(servers, topic_name, topic_name) == [10]
            produce(servers, topic_name, ["new"])
            await until(lambda: 10 in offsets(topic_name), what="offset 10")
            await running.wait_until_idle(timeout=30)

    asyncio.run(main())
    assert offsets(topic_name) == [10]


# --- commits ---------------------------------------------------------------------------------


def test_only_the_contiguous_acked_prefix_is_committed(
    kafka_broker: LocalKafkaBroker, topic_name: str
) -> None:
    kafka_broker.create_topic(topic_name)
    servers = kafka_broker.bootstrap_servers
    produce(servers, topic_name, range(100))
    bolt = Record(topic_name, hold=lambda offset: offset in (30, 31, 70))

    async def main() -> None:
        t = topology(kafka_broker, topic_name, topic_name, bolt=bolt)
        async with run_topology(t, CONF) as running:
            await until(lambda: len(offsets(topic_name)) == 100, what="every record")
            (spout,) = spouts(running)
            # Everything but 30, 31 and 70 is acked: the commit stops at 30 and stays.
            await until(lambda: spout._done and committed(servers, topic_name, topic_name) == [30])
            await commit_rounds(spout, 3)
            assert committed(servers, topic_name, topic_name) == [30]
            assert spout.committed == {(topic_name, 0): 30}
            (recorder,) = running.task_objects("record").values()
            recorder.release()
            await until(lambda: committed(servers, topic_name, topic_name) == [100])

    asyncio.run(main())
    assert offsets(topic_name) == list(range(100))


# --- retries ---------------------------------------------------------------------------------


def test_a_failed_record_is_retried_then_given_up_on_and_counted(
    kafka_broker: LocalKafkaBroker, topic_name: str
) -> None:
    kafka_broker.create_topic(topic_name)
    servers = kafka_broker.bootstrap_servers
    produce(servers, topic_name, range(20))
    retry = KafkaSpoutRetryExponentialBackoff(0.0, 0.001, 3, 0.01)

    async def main() -> Any:
        t = topology(
            kafka_broker, topic_name, topic_name, bolt=Record(topic_name, fail=[7]), retry=retry
        )
        async with run_topology(t, CONF) as running:
            await until(lambda: committed(servers, topic_name, topic_name) == [20])
            (spout,) = spouts(running)
            return spout.retried, spout.exhausted, running.info()

    retried, exhausted, info = asyncio.run(main())
    # One first try and three retries of offset 7; then it is given up on, acked and counted.
    assert offsets(topic_name).count(7) == 4
    assert (retried, exhausted) == (3, 1)
    errors = [e.error for e in info.errors if e.component == "kafka"]
    assert errors == [
        f"spout 'kafka': gave up on {topic_name}[0] offset 7 after 4 failures (max_retries=3); "
        f"acked and counted"
    ]


def test_records_past_max_retries_go_to_the_declared_stream(
    kafka_broker: LocalKafkaBroker, topic_name: str
) -> None:
    kafka_broker.create_topic(topic_name)
    servers = kafka_broker.bootstrap_servers
    produce(servers, topic_name, range(20))
    dead = f"{topic_name}-dead"
    config = KafkaSpoutConfig(
        servers,
        [topic_name],
        group_id=topic_name,
        offset_commit_period_ms=50,
        retry=KafkaSpoutRetryExponentialBackoff(0.0, 0.001, 1, 0.01),
        retry_exhausted_stream="exhausted",
    )
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(config))
    builder.set_bolt("record", Record(topic_name, fail=[3, 4])).shuffle_grouping("kafka")
    builder.set_bolt("dead", Record(dead)).shuffle_grouping("kafka", "exhausted")

    async def main() -> None:
        async with run_topology(builder.create_topology(), CONF):
            await until(lambda: committed(servers, topic_name, topic_name) == [20])

    asyncio.run(main())
    assert sorted(offsets(dead)) == [3, 4]
    assert offsets(topic_name).count(3) == 2  # the first try and max_retries=1 retry


# --- holding back ----------------------------------------------------------------------------


def test_max_uncommitted_offsets_holds_the_spout_back(
    kafka_broker: LocalKafkaBroker, topic_name: str
) -> None:
    kafka_broker.create_topic(topic_name)
    servers = kafka_broker.bootstrap_servers
    produce(servers, topic_name, range(100))
    bolt = Record(topic_name, hold=lambda offset: True)

    async def main() -> None:
        t = topology(kafka_broker, topic_name, topic_name, bolt=bolt, max_uncommitted_offsets=10)
        async with run_topology(t, CONF) as running:
            await until(lambda: len(offsets(topic_name)) == 10, what="10 records")
            (spout,) = spouts(running)
            await commit_rounds(spout, 3)  # a while of asking it for tuples
            assert offsets(topic_name) == list(range(10))  # held back
            (recorder,) = running.task_objects("record").values()
            recorder.release()  # 10 done: 10 more may go
            await until(lambda: len(offsets(topic_name)) == 20, what="20 records")
            await commit_rounds(spout, 3)
            assert offsets(topic_name) == list(range(20))
            recorder.hold = None
            recorder.release()
            await until(lambda: committed(servers, topic_name, topic_name) == [100])

    asyncio.run(main())
    assert offsets(topic_name) == list(range(100))


# --- partitions ------------------------------------------------------------------------------


def test_partitions_are_dealt_round_robin_and_survive_a_rebalance(
    kafka_broker: LocalKafkaBroker, topic_name: str
) -> None:
    kafka_broker.create_topic(topic_name, partitions=4)
    servers = kafka_broker.bootstrap_servers
    for p in range(4):
        produce(servers, topic_name, range(25), partition=p)

    def seen() -> set[tuple[int, int]]:
        return {(p, o) for p, o, _ in SEEN[topic_name]}

    async def main() -> None:
        t = topology(kafka_broker, topic_name, topic_name, tasks=2, executors=1)
        async with run_topology(t, CONF) as running:
            await until(lambda: len(seen()) == 100, what="the first 100 records")
            owned = sorted(sorted(s._partitions) for s in spouts(running))
            assert owned == [
                [(topic_name, 0), (topic_name, 2)],
                [(topic_name, 1), (topic_name, 3)],
            ]
            await running.rebalance("kafka", 2)  # commits, then re-opens on two executors
            assert committed(servers, topic_name, topic_name, 4) == [25] * 4
            for p in range(4):
                produce(servers, topic_name, range(25, 50), partition=p)
            await until(lambda: len(seen()) == 200, what="the next 100 records")
            await running.wait_until_idle(timeout=30)

    asyncio.run(main())
    # Each record exactly once: the rebalance waited for every tree, and the re-opened
    # tasks resumed from this run's commits.
    assert sorted((p, o) for p, o, _ in SEEN[topic_name]) == sorted(
        (p, o) for p in range(4) for o in range(50)
    )


def test_topics_matching_a_pattern_are_picked_up_while_running(
    kafka_broker: LocalKafkaBroker, topic_name: str
) -> None:
    servers = kafka_broker.bootstrap_servers
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    kafka_broker.create_topic(first)
    produce(servers, first, range(5))

    async def main() -> None:
        t = topology(
            kafka_broker,
            topic_name,
            topic_name,
            topics=re.compile(re.escape(topic_name) + "-.*"),
            partition_refresh_period_ms=50,
        )
        async with run_topology(t, CONF):
            await until(lambda: len(SEEN[topic_name]) == 5, what="the first topic")
            kafka_broker.create_topic(second)
            produce(servers, second, range(5, 8))
            await until(lambda: len(SEEN[topic_name]) == 8, what="the second topic")

    asyncio.run(main())
    assert sorted(int(v) for _, _, v in SEEN[topic_name]) == list(range(8))


# --- guarantees ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "guarantee", [ProcessingGuarantee.AT_MOST_ONCE, ProcessingGuarantee.NO_GUARANTEE]
)
def test_untracked_guarantees_emit_everything_once_and_commit_it(
    kafka_broker: LocalKafkaBroker, topic_name: str, guarantee: ProcessingGuarantee
) -> None:
    kafka_broker.create_topic(topic_name)
    servers = kafka_broker.bootstrap_servers
    produce(servers, topic_name, range(50))

    async def main() -> None:
        t = topology(
            kafka_broker,
            topic_name,
            topic_name,
            processing_guarantee=guarantee,
            bolt=Record(topic_name, fail=[5]),
        )
        async with run_topology(t, CONF) as running:
            await until(lambda: len(offsets(topic_name)) == 50, what="50 records")
            await until(lambda: committed(servers, topic_name, topic_name) == [50])
            await commit_rounds(spouts(running)[0], 2)
            assert spouts(running)[0].retried == 0

    asyncio.run(main())
    assert offsets(topic_name) == list(range(50))  # the failed one is not replayed
