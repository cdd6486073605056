"""KafkaSpout's timing on virtual time (``engine.testing.simulate``), over an in-memory
consumer: retry backoff, the maximum-retries path and the commit period follow the
topology's clock."""

from __future__ import annotations

import asyncio
import itertools
import re
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from engine import Bolt, TopologyBuilder, run_topology
from engine.kafka import (
    KafkaConfigError,
    KafkaIOError,
    KafkaSpout,
    KafkaSpoutConfig,
    KafkaSpoutRetryExponentialBackoff,
    KafkaTuple,
    ProcessingGuarantee,
    RecordTranslator,
)
from engine.testing import CrashTask, advance_time, simulate

from .fake import FakeCluster


class Timed(Bolt):
    """Records the (virtual) time each offset was executed at; fails ``fail`` always."""

    def __init__(self, fail: int | None = None) -> None:
        self.fail_offset = fail

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.clock = context.clock
        self.times: dict[int, list[float]] = {}

    def execute(self, tuple: Any) -> None:
        self.times.setdefault(tuple[2], []).append(self.clock.now_ns() / 1e9)
        if tuple[2] == self.fail_offset:
            self.collector.fail(tuple)
        else:
            self.collector.ack(tuple)

    def declare_output_fields(self, declarer: Any) -> None:
        pass


def cluster(n: int) -> FakeCluster:
    return FakeCluster(topics={"t": [[str(i).encode() for i in range(n)]]})


def topology(cluster: FakeCluster, bolt: Bolt, **options: Any) -> Any:
    config = KafkaSpoutConfig("fake:9092", ["t"], group_id="g", **options)
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(config, consumer_factory=cluster.consumer))
    builder.set_bolt("timed", bolt).shuffle_grouping("kafka")
    return builder.create_topology()


def test_retries_back_off_on_the_topologys_clock() -> None:
    fake = cluster(10)
    retry = KafkaSpoutRetryExponentialBackoff(5.0, 10.0, 4, 30.0)

    async def scenario() -> tuple[list[float], Any, Any]:
        conf = {"topology.message.timeout.secs": 300}
        t = topology(fake, Timed(fail=3), retry=retry, offset_commit_period_ms=1000)
        async with run_topology(t, conf) as running:
            await advance_time(200)
            (bolt,) = running.task_objects("timed").values()
            (spout,) = running.task_objects("kafka").values()
            return bolt.times[3], (spout.retried, spout.exhausted), running.info()

    times, counts, info = simulate(scenario())
    # Storm's backoff: initial_delay, then delay_period * 2**(fails-1), capped at max_delay;
    # the fifth failure gives the record up: acked, counted, reported, and committed past.
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps == pytest.approx([5.0, 20.0, 30.0, 30.0], abs=0.05)
    assert counts == (4, 1)
    assert [e.error for e in info.errors] == [
        "spout 'kafka': gave up on t[0] offset 3 after 5 failures (max_retries=4); acked "
        "and counted"
    ]
    assert fake.commits[("g", "t", 0)] == 10


def test_commits_wait_for_the_commit_period_on_the_topologys_clock() -> None:
    fake = cluster(100)

    async def scenario() -> list[int | None]:
        async with run_topology(topology(fake, Timed(), offset_commit_period_ms=20_000)):
            seen = [fake.commits.get(("g", "t", 0))]  # the start, committed at once
            await advance_time(10)
            seen.append(fake.commits.get(("g", "t", 0)))  # 10 s later: not yet
            await advance_time(11)
            seen.append(fake.commits.get(("g", "t", 0)))  # past 20 s: everything acked
            return seen

    assert simulate(scenario()) == [0, 0, 100]


def test_the_translator_routes_skips_and_emits_null_tuples() -> None:
    fake = cluster(6)

    def translate(record: Any) -> Any:
        n = int(record.value())
        if n % 3 == 0:
            return None
        return [n] if n % 3 == 1 else KafkaTuple([n, "two"], "twos")

    from engine.kafka import KafkaTuple

    class Keep(Bolt):
        def prepare(self, conf: Any, context: Any, collector: Any) -> None:
            self.collector = collector
            self.seen: list[tuple[str, tuple[Any, ...]]] = []

        def execute(self, input: Any) -> None:
            self.seen.append((input.source_stream, tuple(input.values)))
            self.collector.ack(input)

        def declare_output_fields(self, declarer: Any) -> None:
            pass

    def run(emit_null_tuples: bool) -> list[Any]:
        translator = RecordTranslator(translate, ["n"], streams={"twos": ["n", "kind"]})
        config = KafkaSpoutConfig(
            "fake:9092",
            ["t"],
            group_id=f"g{emit_null_tuples}",
            record_translator=translator,
            emit_null_tuples=emit_null_tuples,
            offset_commit_period_ms=100,
        )
        builder = TopologyBuilder()
        builder.set_spout("kafka", KafkaSpout(config, consumer_factory=fake.consumer))
        builder.set_bolt("keep", Keep()).shuffle_grouping("kafka").shuffle_grouping("kafka", "twos")

        async def scenario() -> list[Any]:
            async with run_topology(builder.create_topology()) as running:
                await advance_time(5)
                (bolt,) = running.task_objects("keep").values()
                return sorted(bolt.seen, key=repr)

        return simulate(scenario())

    skipped = run(False)
    assert skipped == sorted(
        [("default", (1,)), ("twos", (2, "two")), ("default", (4,)), ("twos", (5, "two"))],
        key=repr,
    )
    assert fake.commits[("gFalse", "t", 0)] == 6  # the skipped records are committed past
    assert run(True) == sorted([("default", (None,))] * 2 + skipped, key=repr)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"topics": "t"},
            "KafkaSpoutConfig.topics must be a non-empty list of topic names or a re.Pattern, "
            "got 't'",
        ),
        (
            {"bootstrap_servers": ""},
            "KafkaSpoutConfig.bootstrap_servers must be 'host:port[,host:port...]', got ''",
        ),
        (
            {"offset_commit_period_ms": 0},
            "KafkaSpoutConfig.offset_commit_period_ms must be an int >= 1, got 0",
        ),
        (
            {"max_uncommitted_offsets": 2.5},
            "KafkaSpoutConfig.max_uncommitted_offsets must be an int >= 1, got 2.5",
        ),
        (
            {"first_poll_offset_strategy": "EARLIEST"},
            "KafkaSpoutConfig.first_poll_offset_"
            "strategy must be a FirstPollOffsetStrategy (EARLIEST, LATEST, UNCOMMITTED_EARLIEST, "
            "UNCOMMITTED_LATEST), got 'EARLIEST'",
        ),
        (
            {"retry_exhausted_stream": "default"},
            "KafkaSpoutConfig.retry_exhausted_stream "
            "'default' is also a stream of the record translator; give the records past "
            "max_retries a stream of their own",
        ),
        (
            {"consumer_props": {"group.id": "x"}},
            "KafkaSpoutConfig.consumer_props must not "
            "set ['group.id']: the spout sets them (use bootstrap_servers / group_id, and the "
            "processing guarantee for commits)",
        ),
    ],
)
def test_a_misdeclared_config_is_refused_naming_the_option(
    options: dict[str, Any], message: str
) -> None:
    args = {"bootstrap_servers": "127.0.0.1:9092", "topics": ["t"], **options}
    with pytest.raises(KafkaConfigError, match=f"^{re.escape(message)}$"):
        KafkaSpoutConfig(**args)


def test_a_bad_retry_policy_is_refused_in_kafkas_words() -> None:
    with pytest.raises(
        KafkaConfigError,
        match=re.escape(
            "KafkaSpoutRetryExponentialBackoff.max_retries must be an int >= 0 or None "
            "(retry forever), got -1"
        ),
    ):
        KafkaSpoutRetryExponentialBackoff(0.0, 0.002, -1, 10.0)


def test_a_crashed_tasks_consumer_is_closed_when_its_replacement_opens() -> None:
    """A crashed task gets no ``close``; its consumer must not stay connected (and log the
    broker's absence) until the object happens to be collected: the task's new object
    closes it. Live tasks' consumers are closed by ``close`` at the end."""
    fake = cluster(10)
    made: list[Any] = []
    closed: list[threading.Event] = []

    def consumer(props: dict[str, Any]) -> Any:
        made.append(c := fake.consumer(props))
        closed.append(done := threading.Event())
        c.close = done.set  # type: ignore[method-assign]
        return c

    async def scenario() -> list[Any]:
        config = KafkaSpoutConfig("fake:9092", ["t"], group_id="g")
        builder = TopologyBuilder()
        builder.set_spout("kafka", KafkaSpout(config, consumer_factory=consumer))
        builder.set_bolt("timed", Timed()).shuffle_grouping("kafka")
        async with run_topology(builder.create_topology()) as running:
            await advance_time(1)
            crashed = list(running.task_objects("kafka").values())  # kept alive
            running.inject(CrashTask(component="kafka"))
            await advance_time(1)
            assert len(made) == 2
            assert closed[0].wait(10), "the crashed task's consumer is still open"
            assert not closed[1].is_set()
        return crashed

    assert simulate(scenario())
    assert closed[1].is_set()


class Seen(Bolt):
    """Keeps (stream, values) of every input, with what the group had committed then."""

    def __init__(self, fake: FakeCluster | None = None) -> None:
        self.fake = fake

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.seen: list[tuple[str, tuple[Any, ...]]] = []
        self.commits_seen: list[tuple[int, int]] = []

    def execute(self, input: Any) -> None:
        self.seen.append((input.source_stream, tuple(input.values)))
        if self.fake is not None:
            offset = input.values[2]
            self.commits_seen.append((offset, self.fake.commits.get(("g", "t", 0), -1)))
        self.collector.ack(input)

    def declare_output_fields(self, declarer: Any) -> None:
        pass


def routed(record: Any) -> Any:
    n = int(record.value())
    return KafkaTuple([n, "seven"], "sevens") if n % 10 == 7 else [n]


def test_rows_routed_to_several_streams_go_out_as_one_batch_per_run() -> None:
    """A record now and then on another stream (a malformed line) must not turn its whole
    chunk into single emits: each run of rows bound for one stream is one ``emit_batch``."""
    fake = cluster(0)
    translator = RecordTranslator(routed, ["n"], streams={"sevens": ["n", "kind"]})
    config = KafkaSpoutConfig("fake:9092", ["t"], group_id="g", record_translator=translator)
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(config, consumer_factory=fake.consumer))
    builder.set_bolt("seen", Seen()).shuffle_grouping("kafka").shuffle_grouping("kafka", "sevens")
    calls = {"emit": 0, "emit_batch": 0}

    def counted(name: str, method: Any) -> Any:
        def call(*args: Any) -> Any:
            calls[name] += 1
            return method(*args)

        return call

    async def scenario() -> list[Any]:
        async with run_topology(builder.create_topology()) as running:
            await advance_time(1)
            (spout,) = running.task_objects("kafka").values()
            spout._emit = counted("emit", spout._emit)
            spout._emit_batch = counted("emit_batch", spout._emit_batch)
            fake.topics["t"][0].extend(str(i).encode() for i in range(100))
            await advance_time(5)
            (bolt,) = running.task_objects("seen").values()
            return bolt.seen

    seen = simulate(scenario())
    assert sorted(seen) == sorted(
        ("sevens", (n, "seven")) if n % 10 == 7 else ("default", (n,)) for n in range(100)
    )
    assert calls["emit"] == 0
    assert 0 < calls["emit_batch"] <= 21  # 11 runs on the main stream, 10 on "sevens"


@pytest.mark.parametrize(
    ("translate", "message"),
    [
        (
            lambda r: [1, 2],
            "spout 'kafka': the record translator returned [1, 2] for t[0] offset 0 on stream "
            "'default', whose fields are ['n']; return one value per field (a list), a "
            "KafkaTuple or None",
        ),
        (
            lambda r: KafkaTuple([1], "nowhere"),
            "spout 'kafka': the record translator sent t[0] offset 0 to stream 'nowhere', "
            "which it does not declare (streams: ['default']); declare it in "
            "RecordTranslator(streams=...)",
        ),
    ],
)
def test_a_translator_returning_the_wrong_shape_is_named(translate: Any, message: str) -> None:
    fake = cluster(3)
    translator = RecordTranslator(translate, ["n"])
    config = KafkaSpoutConfig("fake:9092", ["t"], group_id="g", record_translator=translator)
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(config, consumer_factory=fake.consumer))
    builder.set_bolt("seen", Seen()).shuffle_grouping("kafka")

    async def scenario() -> list[str]:
        async with run_topology(builder.create_topology()) as running:
            await advance_time(1)
            return [e.error for e in running.info().errors if e.component == "kafka"]

    errors = simulate(scenario())
    assert errors and all(message in e for e in errors), errors


def test_at_most_once_commits_each_record_before_emitting_it() -> None:
    """Storm's AT_MOST_ONCE: the polled records are committed before they are emitted, so
    a crash loses them rather than repeats them: every record is seen with the group's
    commit already past it."""
    fake = cluster(50)
    config = KafkaSpoutConfig(
        "fake:9092",
        ["t"],
        group_id="g",
        processing_guarantee=ProcessingGuarantee.AT_MOST_ONCE,
        max_poll_records=7,
    )
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(config, consumer_factory=fake.consumer))
    builder.set_bolt("seen", Seen(fake)).shuffle_grouping("kafka")

    async def scenario() -> list[tuple[int, int]]:
        async with run_topology(builder.create_topology()) as running:
            for _ in range(50):
                await advance_time(0.1)
            (bolt,) = running.task_objects("seen").values()
            return bolt.commits_seen

    seen = simulate(scenario())
    assert [offset for offset, _ in seen] == list(range(50))
    assert all(commit > offset for offset, commit in seen), seen


@pytest.mark.parametrize("latency", [0.0, 0.05])
def test_partitions_moving_between_tasks_start_where_their_old_owner_committed(
    latency: float,
) -> None:
    """A new topic matching the pattern re-deals the partitions: ``p-c`` moves from task 1
    to task 0 and ``p-d`` from task 0 to task 1. Each old owner commits what it did before
    letting go (Storm's ``onPartitionsRevoked``), and the new owner starts from that commit:
    no record is read twice, although the commit period (60 s) is far longer than the run.
    The partition task 0 keeps is committed in the same round.

    With a broker 50 ms away in real time, the re-deal still takes no virtual time: the
    spout's I/O thread goes through the loop's executor, and the virtual clock waits for it
    (it once ran on while a slow CI machine had not finished the listing)."""
    fake = FakeCluster(
        topics={"p-a": [[b"a0", b"a1"]], "p-c": [[b"c0", b"c1", b"c2"]], "p-d": [[b"d0"]]},
        latency=latency,
    )
    config = KafkaSpoutConfig(
        "fake:9092",
        re.compile("p-.*"),
        group_id="g",
        offset_commit_period_ms=60_000,
        partition_refresh_period_ms=1_000,
    )
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(config, consumer_factory=fake.consumer), 2)
    builder.set_bolt("seen", Seen()).shuffle_grouping("kafka")

    async def scenario() -> tuple[list[Any], dict[int, list[tuple[str, int]]], int]:
        async with run_topology(builder.create_topology()) as running:
            await advance_time(0.5)
            fake.topics["p-b"] = [[b"b0"]]
            for _ in range(40):
                await advance_time(0.1)
            (bolt,) = running.task_objects("seen").values()
            owned = {i: sorted(s._partitions) for i, s in running.task_objects("kafka").items()}
            return bolt.seen, owned, fake.commits[("g", "p-a", 0)]

    seen, owned, kept_commit = simulate(scenario())
    assert sorted(owned.values()) == [[("p-a", 0), ("p-c", 0)], [("p-b", 0), ("p-d", 0)]]
    values = sorted(v[4] for _, v in seen)
    assert values == [b"a0", b"a1", b"b0", b"c0", b"c1", b"c2", b"d0"]
    assert kept_commit == 2


def test_a_consumer_made_by_a_cancelled_open_is_closed() -> None:
    """``open`` makes the consumer on the task's I/O thread; cancelled meanwhile (a kill
    while the topology starts), the consumer the thread goes on to make is closed, not left
    connected."""
    fake = cluster(3)
    listing, release, closed = threading.Event(), threading.Event(), threading.Event()

    def consumer(props: dict[str, Any]) -> Any:
        c = fake.consumer(props)
        list_topics = c.list_topics

        def slow_list_topics(timeout: float = -1) -> Any:
            listing.set()
            release.wait(10)
            return list_topics(timeout)

        c.list_topics = slow_list_topics  # type: ignore[method-assign]
        c.close = closed.set  # type: ignore[method-assign]
        return c

    class Context:
        clock = None

        def get_this_component_id(self) -> str:
            return "kafka"

        def get_this_task_index(self) -> int:
            return 0

        def get_component_tasks(self, component: str) -> list[int]:
            return [1]

        def get_storm_id(self) -> str:
            return "cancelled-open"

    spout = KafkaSpout(
        KafkaSpoutConfig("fake:9092", ["t"], group_id="g"), consumer_factory=consumer
    )

    async def main() -> bool:
        collector = SimpleNamespace(emit=None, emit_batch=None, pending_count=None)
        opening = asyncio.ensure_future(spout.open({}, Context(), collector))  # type: ignore[arg-type]
        assert await asyncio.to_thread(listing.wait, 10)
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening
        release.set()
        return await asyncio.to_thread(closed.wait, 10)

    assert asyncio.run(main()), "the consumer of the cancelled open is still open"


def test_records_of_a_partition_being_revoked_are_not_filed_under_the_one_left() -> None:
    """Task 0 holds ``p-b`` and ``p-d``; a new topic ``p-c2`` re-deals ``p-d`` to task 1.
    Until the client's unassign (on the I/O thread, here 50 ms away) has run, a poll still
    brings records of ``p-d``: with ``p-b`` the only partition left, they must not be taken
    for records of ``p-b`` (emitted under its name, its position moved past records it then
    never emits, and committed past them)."""
    fake = FakeCluster(
        topics={"p-b": [[b"b0", b"b1"]], "p-c": [[b"c0"]], "p-d": [[b"d0"]]}, latency=0.05
    )
    armed = threading.Event()

    def consumer(props: dict[str, Any]) -> Any:
        c = fake.consumer(props)
        list_topics = c.list_topics

        def listing(timeout: float = -1) -> Any:
            # At task 0's next listing, records reach p-d and the new topic appears.
            if armed.is_set() and ("p-d", 0) in c.positions:
                armed.clear()
                fake.topics["p-d"][0].extend([b"d1", b"d2", b"d3"])
                fake.topics["p-c2"] = [[b"c2-0"]]
            return list_topics(timeout)

        c.list_topics = listing  # type: ignore[method-assign]
        return c

    config = KafkaSpoutConfig(
        "fake:9092",
        re.compile("p-.*"),
        group_id="g",
        offset_commit_period_ms=60_000,
        partition_refresh_period_ms=1_000,
    )
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(config, consumer_factory=consumer), 2)
    builder.set_bolt("seen", Seen()).shuffle_grouping("kafka")

    async def scenario() -> tuple[list[Any], dict[int, list[tuple[str, int]]]]:
        async with run_topology(builder.create_topology()) as running:
            await advance_time(0.5)
            armed.set()
            for _ in range(20):
                await advance_time(0.1)
            fake.topics["p-b"][0].extend([b"b2", b"b3"])
            for _ in range(20):
                await advance_time(0.1)
            (bolt,) = running.task_objects("seen").values()
            owned = {i: sorted(s._partitions) for i, s in running.task_objects("kafka").items()}
            return bolt.seen, owned

    seen, owned = simulate(scenario())
    assert sorted(owned.values()) == [[("p-b", 0), ("p-c2", 0)], [("p-c", 0), ("p-d", 0)]]
    records = sorted((v[0], v[2], v[4]) for _, v in seen)
    assert records == [
        ("p-b", 0, b"b0"),
        ("p-b", 1, b"b1"),
        ("p-b", 2, b"b2"),
        ("p-b", 3, b"b3"),
        ("p-c", 0, b"c0"),
        ("p-c2", 0, b"c2-0"),
        ("p-d", 0, b"d0"),
        ("p-d", 1, b"d1"),
        ("p-d", 2, b"d2"),
        ("p-d", 3, b"d3"),
    ]


@pytest.mark.parametrize("partitions", [1, 2])
def test_records_the_translator_raised_on_are_read_again_not_committed_past(
    partitions: int,
) -> None:
    """A translator that raises (a record it cannot parse yet) must not lose the records
    polled with it: the error is recorded and the task goes on, so the spout reads them
    again; none is committed past before it was emitted and acked. With two partitions,
    the other partition's records of the same poll are filed as usual."""
    fake = FakeCluster(
        topics={"t": [[f"{p}-{i}".encode() for i in range(10)] for p in range(partitions)]}
    )
    raised: list[bytes] = []

    def translate(record: Any) -> Any:
        if record.value() == b"0-3" and not raised:
            raised.append(record.value())
            raise ValueError("cannot parse b'0-3' yet")
        return [record.value()]

    config = KafkaSpoutConfig(
        "fake:9092",
        ["t"],
        group_id="g",
        record_translator=RecordTranslator(translate, ["value"]),
        offset_commit_period_ms=100,
    )
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(config, consumer_factory=fake.consumer))
    builder.set_bolt("seen", Seen()).shuffle_grouping("kafka")

    async def scenario() -> tuple[list[Any], list[str]]:
        async with run_topology(builder.create_topology()) as running:
            await advance_time(5)
            (bolt,) = running.task_objects("seen").values()
            return bolt.seen, [e.error for e in running.info().errors]

    seen, errors = simulate(scenario())
    assert errors == ["ValueError(\"cannot parse b'0-3' yet\")"]
    assert sorted(v[0] for _, v in seen) == sorted(
        f"{p}-{i}".encode() for p in range(partitions) for i in range(10)
    )
    assert [fake.commits[("g", "t", p)] for p in range(partitions)] == [10] * partitions


def test_deactivating_commits_what_was_acked() -> None:
    """Storm's deactivate commits the acked offsets: a topology deactivated (for hours,
    say) does not sit on a commit period's acked records, to read them again if it dies
    meanwhile. The periodic commit runs in ``next_tuple``, which is not called then."""
    fake = cluster(20)

    async def scenario() -> list[int | None]:
        t = topology(fake, Timed(), offset_commit_period_ms=60_000)
        async with run_topology(t) as running:
            await advance_time(1)
            seen = [fake.commits.get(("g", "t", 0))]  # the start, committed at once
            running.deactivate()
            await advance_time(1)
            seen.append(fake.commits.get(("g", "t", 0)))
            return seen

    assert simulate(scenario()) == [0, 20]


class Hold(Bolt):
    """Holds every input unacked while ``holding``, acks them otherwise."""

    holding = True

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.offsets: list[tuple[str, int]] = []

    def execute(self, input: Any) -> None:
        self.offsets.append((input.values[0], input.values[2]))
        if not Hold.holding:
            self.collector.ack(input)

    def declare_output_fields(self, declarer: Any) -> None:
        pass


def test_a_partition_paused_before_a_rewind_is_read_again_after_it() -> None:
    """``max_uncommitted_offsets`` pauses the partition in the client; the client keeps it
    paused through the new assignment a rewind (a rollback) makes, so the rewound spout
    must resume it, or it never reads the partition again."""
    fake = cluster(20)
    Hold.holding = True

    async def scenario() -> list[tuple[str, int]]:
        conf = {"topology.message.timeout.secs": 300}
        t = topology(fake, Hold(), max_uncommitted_offsets=5)
        async with run_topology(t, conf) as running:
            await advance_time(1)
            (spout,) = running.task_objects("kafka").values()
            (bolt,) = running.task_objects("timed").values()
            assert len(bolt.offsets) == 5
            Hold.holding = False
            spout.rewind({("t", 0): 0})
            await advance_time(1)
            return bolt.offsets[5:]

    assert simulate(scenario()) == [("t", o) for o in range(20)]


def test_a_paused_partition_dealt_away_and_back_is_read_again() -> None:
    """Task 0's ``p-d`` is paused (``max_uncommitted_offsets``) when a new topic deals it to
    task 1; when that topic goes, ``p-d`` comes back to task 0, whose client would still
    hold it paused: the records that arrive then must be read."""
    fake = FakeCluster(
        topics={
            "p-b": [[b"b0"]],
            "p-c": [[b"c0"]],
            "p-c2": [[b"x0"]],
            "p-d": [[f"d{i}".encode() for i in range(5)]],
        }
    )
    hidden = {"p-c2"}

    def consumer(props: dict[str, Any]) -> Any:
        c = fake.consumer(props)
        list_topics = c.list_topics

        def listing(timeout: float = -1) -> Any:
            found = list_topics(timeout)
            found.topics = {k: v for k, v in found.topics.items() if k not in hidden}
            return found

        c.list_topics = listing  # type: ignore[method-assign]
        return c

    config = KafkaSpoutConfig(
        "fake:9092",
        re.compile("p-.*"),
        group_id="g",
        max_uncommitted_offsets=2,
        partition_refresh_period_ms=1_000,
    )
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(config, consumer_factory=consumer), 2)
    builder.set_bolt("hold", Hold()).shuffle_grouping("kafka")
    Hold.holding = True

    async def scenario() -> list[tuple[str, int]]:
        async with run_topology(
            builder.create_topology(), {"topology.message.timeout.secs": 300}
        ) as running:
            await advance_time(0.5)
            tasks = {s._task_index: s for s in running.task_objects("kafka").values()}
            assert sorted(tasks[0]._partitions) == [("p-b", 0), ("p-d", 0)]
            assert tasks[0]._partitions[("p-d", 0)].paused
            Hold.holding = False
            hidden.clear()  # p-d goes to task 1
            for _ in range(30):
                await advance_time(0.1)
            assert sorted(tasks[1]._partitions) == [("p-c", 0), ("p-d", 0)]
            hidden.add("p-c2")  # p-d comes back to task 0
            for _ in range(30):
                await advance_time(0.1)
            assert sorted(tasks[0]._partitions) == [("p-b", 0), ("p-d", 0)]
            fake.topics["p-d"][0].extend([b"d5", b"d6"])
            for _ in range(10):
                await advance_time(0.1)
            (bolt,) = running.task_objects("hold").values()
            return [o for o in bolt.offsets if o[0] == "p-d" and o[1] >= 5]

    assert simulate(scenario()) == [("p-d", 5), ("p-d", 6)]


def test_a_client_that_failed_fatally_is_replaced_and_reading_goes_on() -> None:
    """A fatal error leaves the client unusable: every later request fails, and ``consume``
    brings nothing. The spout reports it and reads on with a new client from the offsets it
    read up to; the dead one is closed. It went on polling the dead client, reading nothing
    more for the rest of the run."""
    from confluent_kafka import KafkaError

    fake = cluster(5)
    made: list[Any] = []
    closed: list[threading.Event] = []

    def consumer(props: dict[str, Any]) -> Any:
        made.append(c := fake.consumer(props))
        closed.append(done := threading.Event())
        c.close = done.set  # type: ignore[method-assign]
        if len(made) == 1:
            consume = c.consume

            def dies(num_messages: int = 1, timeout: float = -1) -> list[Any]:
                if fake.topics["t"][0][-1] == b"fatal" or done.is_set():
                    if not done.is_set():
                        props["error_cb"](KafkaError(KafkaError._FATAL, "fenced", fatal=True))
                    return []
                return consume(num_messages, timeout)

            c.consume = dies  # type: ignore[method-assign]
        return c

    async def scenario() -> tuple[list[int], list[str]]:
        config = KafkaSpoutConfig("fake:9092", ["t"], group_id="g", offset_commit_period_ms=500)
        builder = TopologyBuilder()
        builder.set_spout("kafka", KafkaSpout(config, consumer_factory=consumer))
        builder.set_bolt("timed", Timed()).shuffle_grouping("kafka")
        async with run_topology(builder.create_topology()) as running:
            await advance_time(1)
            fake.topics["t"][0].append(b"fatal")
            await advance_time(1)
            fake.topics["t"][0].extend([b"5", b"6"])
            await advance_time(1)
            (bolt,) = running.task_objects("timed").values()
            return sorted(bolt.times), [e.error for e in running.info().errors]

    offsets, errors = simulate(scenario())
    assert offsets == list(range(8))
    assert errors == [
        repr(
            KafkaIOError(
                "spout 'kafka' (task 0): the Kafka client failed and is unusable "
                '(KafkaError{FATAL,code=_FATAL,val=-150,str="fenced"}); a new one reads on '
                "from the last offsets read"
            )
        )
    ]
    assert len(made) == 2 and closed[0].wait(10)
    assert fake.commits[("g", "t", 0)] == 8


class FailOnceHoldB(Bolt):
    """Fails ``p-b`` offset 0 once; holds the other ``p-b`` tuples until ``release``."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.failed = False
        self.held: list[Any] = []

    def execute(self, input: Any) -> None:
        if input.values[0] != "p-b":
            self.collector.ack(input)
        elif input.values[2] == 0 and not self.failed:
            self.failed = True
            self.collector.fail(input)
        else:
            self.held.append(input)

    def release(self) -> None:
        held, self.held = self.held, []
        for t in held:
            self.collector.ack(t)

    def declare_output_fields(self, declarer: Any) -> None:
        pass


def test_acks_and_failures_of_a_partition_let_go_are_not_kept() -> None:
    """``p-b`` is let go (its topic is no longer listed) with a record waiting for its
    retry and tuples in flight, which are acked afterwards. The failure count and the late
    acks belong to no partition of the task any more: they are dropped, so a task whose
    partitions move keeps bounded sets. They stayed for the rest of the run (no commit walk
    or retry ever took them out)."""
    fake = FakeCluster(
        topics={"p-a": [[b"a0", b"a1"]], "p-b": [[f"b{i}".encode() for i in range(5)]]}
    )
    hidden: set[str] = set()

    def consumer(props: dict[str, Any]) -> Any:
        c = fake.consumer(props)
        list_topics = c.list_topics

        def listing(timeout: float = -1) -> Any:
            found = list_topics(timeout)
            found.topics = {k: v for k, v in found.topics.items() if k not in hidden}
            return found

        c.list_topics = listing  # type: ignore[method-assign]
        return c

    config = KafkaSpoutConfig(
        "fake:9092",
        re.compile("p-.*"),
        group_id="g",
        retry=KafkaSpoutRetryExponentialBackoff(60.0, 60.0, None, 60.0),
        offset_commit_period_ms=1_000,
        partition_refresh_period_ms=1_000,
    )
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(config, consumer_factory=consumer))
    builder.set_bolt("bolt", FailOnceHoldB()).shuffle_grouping("kafka")

    async def scenario() -> tuple[Any, ...]:
        conf = {"topology.message.timeout.secs": 300}
        async with run_topology(builder.create_topology(), conf) as running:
            await advance_time(0.5)
            (spout,) = running.task_objects("kafka").values()
            (bolt,) = running.task_objects("bolt").values()
            before = (len(spout._fails), len(bolt.held))
            hidden.add("p-b")
            await advance_time(2)
            assert sorted(spout._partitions) == [("p-a", 0)]
            bolt.release()  # late acks
            await advance_time(2)
            return before, dict(spout._fails), set(spout._done), spout.committed

    before, fails, done, committed = simulate(scenario())
    assert before == (1, 4)
    assert (fails, done) == ({}, set())
    assert committed == {("p-a", 0): 2}


def test_partitions_claimed_by_a_refresh_not_installed_yet_are_let_go_at_close() -> None:
    """``close`` while a refresh has claimed new partitions (on the I/O thread) and
    ``next_tuple`` has not installed them yet: the claim is let go with the partitions the
    task holds. It was kept, and a task the partitions went to after a rebalance waited
    ``partition_refresh_period_ms`` + 10 s for them, then warned that another task held
    them."""
    from engine.kafka._spout import _OWNERS

    fake = FakeCluster(topics={"p-a": [[b"a0"]]})
    config = KafkaSpoutConfig("fake:9092", re.compile("p-.*"), group_id="g")
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(config, consumer_factory=fake.consumer))
    builder.set_bolt("seen", Seen()).shuffle_grouping("kafka")

    async def scenario() -> tuple[list[Any], list[Any]]:
        async with run_topology(builder.create_topology()) as running:
            await advance_time(0.5)
            (spout,) = running.task_objects("kafka").values()
            running.deactivate()  # no next_tuple: what a refresh took stays uninstalled
            await advance_time(0.5)
            fake.topics["p-b"] = [[b"b0"]]
            # The refresh's second step, as ``_refreshed`` submits it for a new partition.
            take = spout._submit(spout._take_blocking, spout._open_consumer(), [("p-b", 0)])
            spout._refreshing = take
            await take
            run = spout._run
            claimed = sorted(k[2:] for k in _OWNERS if k[0] == run)
        return claimed, sorted(k[2:] for k in _OWNERS if k[0] == run)

    claimed, left = simulate(scenario())
    assert claimed == [("p-a", 0), ("p-b", 0)]
    assert left == []
