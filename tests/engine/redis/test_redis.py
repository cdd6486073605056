"""engine.redis against a real redis-server: the store, lookup and filter bolts, Redis down
mid-run, and Redis as the state provider of stateful bolts."""

from __future__ import annotations

import asyncio
import collections
import os
import re
import signal
from typing import Any

import pytest
import redis

from engine import (
    BasicBolt,
    InvalidComponentError,
    InvalidConfigError,
    Spout,
    TopologyBuilder,
    run_topology,
)
from engine.redis import (
    RedisConfig,
    RedisDataType,
    RedisFilterBolt,
    RedisFilterMapper,
    RedisLookupBolt,
    RedisLookupMapper,
    RedisStoreBolt,
    RedisStoreMapper,
)
from engine.state import KeyValueState, RedisStateStore, StateError
from engine.testing import advance_time, simulate
from tests.engine.state.wordcount import build, committed_counts, truth

from .conftest import RedisServer

pytestmark = pytest.mark.redis


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


class Keys(Spout):
    """Emits ``(key, 1)`` for ``i < n`` (key ``k<i % keys>``), replaying failures."""

    def __init__(self, n: int, keys: int = 10) -> None:
        self.n, self.keys = n, keys

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.todo = collections.deque(range(self.n))
        self.acked: set[int] = set()
        self.failed = 0

    def next_tuple(self) -> None:
        for _ in range(64):
            if not self.todo:
                return
            i = self.todo.popleft()
            self.collector.emit([f"k{i % self.keys}", 1, i], msg_id=i)

    def ack(self, msg_id: Any) -> None:
        self.acked.add(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.failed += 1
        self.todo.append(msg_id)

    def is_exhausted(self) -> bool:
        return len(self.acked) == self.n

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["key", "one", "i"])


def run(topology: Any, conf: dict[str, Any] | None = None, during: Any = None) -> Any:
    async def main() -> Any:
        async with run_topology(
            topology, {"topology.max.spout.pending": 500, **(conf or {})}
        ) as running:
            if during is not None:
                await during(running)
            await running.wait_until_complete(timeout=60)
            return running

    return asyncio.run(main())


def client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, decode_responses=True)


@pytest.mark.parametrize(
    ("mapper", "check"),
    [
        (
            RedisStoreMapper(RedisDataType.HASH_COUNTER, "key", "one", additional_key="counts"),
            lambda r: r.hgetall("counts") == {f"k{j}": "100" for j in range(10)},
        ),
        (
            RedisStoreMapper(RedisDataType.COUNTER, "key", "one", ttl_secs=600),
            lambda r: (
                [r.get(f"k{j}") for j in range(10)] == ["100"] * 10 and 0 < r.ttl("k3") <= 600
            ),
        ),
        (
            RedisStoreMapper(RedisDataType.STRING, "key", "one"),
            lambda r: r.get("k7") == "1",
        ),
        (
            RedisStoreMapper(RedisDataType.SORTED_SET, "key", "i", additional_key="z"),
            lambda r: r.zcard("z") == 10 and r.zscore("z", "k9") >= 9,
        ),
        (
            RedisStoreMapper(RedisDataType.SET, "key", "i"),
            lambda r: r.scard("k0") == 100,
        ),
        (
            RedisStoreMapper(RedisDataType.HASH, "key", "i", additional_key="h", ttl_secs=60),
            lambda r: set(r.hgetall("h")) == {f"k{j}" for j in range(10)} and r.ttl("h") > 0,
        ),
    ],
)
def test_store_bolt_writes_every_tuple_and_acks_after_redis(
    redis_url: str, mapper: RedisStoreMapper, check: Any
) -> None:
    builder = TopologyBuilder()
    builder.set_spout("keys", Keys(1000))
    builder.set_bolt(
        "store", RedisStoreBolt(RedisConfig(url=redis_url), mapper), 2
    ).shuffle_grouping("keys")
    running = run(builder.create_topology())
    (spout,) = running.task_objects("keys").values()
    assert len(spout.acked) == 1000 and spout.failed == 0
    assert sum(b.written for b in running.task_objects("store").values()) == 1000
    with client(redis_url) as r:
        assert check(r)


def test_lookup_and_filter_bolts(redis_url: str) -> None:
    from engine import BasicBolt

    seen: list[tuple[str, Any]] = []

    class Sink(BasicBolt):
        def execute(self, tuple: Any, collector: Any) -> None:
            seen.append(tuple.values if tuple.source_component == "lookup" else ("pass", tuple[0]))

    with client(redis_url) as r:
        r.set("k1", "one")
        r.set("k2", "two")
    config = RedisConfig(url=redis_url)
    builder = TopologyBuilder()
    builder.set_spout("keys", Keys(10, keys=5))
    builder.set_bolt(
        "lookup", RedisLookupBolt(config, RedisLookupMapper(RedisDataType.STRING, "key"))
    ).shuffle_grouping("keys")
    builder.set_bolt(
        "filter",
        RedisFilterBolt(config, RedisFilterMapper(RedisDataType.STRING, "key"), ["key", "i"]),
    ).shuffle_grouping("keys")
    builder.set_bolt("sink", Sink()).shuffle_grouping("lookup").shuffle_grouping("filter")
    run(builder.create_topology())
    looked = sorted((list(v) for v in seen if v[0] != "pass"), key=str)
    assert looked == sorted(
        ([f"k{i % 5}", {1: b"one", 2: b"two"}.get(i % 5)] for i in range(10)), key=str
    )
    assert sorted(v[1] for v in seen if v[0] == "pass") == ["k1", "k1", "k2", "k2"]


def test_mapper_errors_name_what_to_fix() -> None:
    with pytest.raises(
        InvalidComponentError,
        match=exactly(
            "RedisStoreMapper: HASH_COUNTER needs additional_key (the name of the hash "
            "or sorted set to write in)"
        ),
    ):
        RedisStoreMapper(RedisDataType.HASH_COUNTER, "key", "one")
    with pytest.raises(
        InvalidComponentError,
        match=exactly("RedisStoreMapper: ttl_secs must be a positive int or None, got 0"),
    ):
        RedisStoreMapper(RedisDataType.STRING, "key", "one", ttl_secs=0)


def test_redis_down_mid_run_fails_and_replays_then_recovers(own_redis_server: RedisServer) -> None:
    n = 20_000
    mapper = RedisStoreMapper(RedisDataType.HASH_COUNTER, "key", "one", additional_key="counts")
    builder = TopologyBuilder()
    builder.set_spout("keys", Keys(n))
    builder.set_bolt(
        "store",
        RedisStoreBolt(RedisConfig(url=own_redis_server.url, socket_timeout_secs=2), mapper),
    ).shuffle_grouping("keys")

    async def outage(running: Any) -> None:
        (spout,) = running.task_objects("keys").values()
        while len(spout.acked) < n // 5:
            await asyncio.sleep(0.001)
        own_redis_server.kill()
        while spout.failed < 100:  # tuples fail while Redis is down
            await asyncio.sleep(0.001)
        await asyncio.to_thread(own_redis_server.start)

    running = run(builder.create_topology(), during=outage)
    (spout,) = running.task_objects("keys").values()
    assert len(spout.acked) == n and spout.failed >= 100
    assert running.info().components["store"].failed >= 100
    with client(own_redis_server.url) as r:
        counts = {k: int(v) for k, v in r.hgetall("counts").items()}
    assert set(counts) == {f"k{j}" for j in range(10)}
    assert all(c >= n // 10 for c in counts.values())  # nothing lost
    assert sum(counts.values()) <= n + spout.failed  # doubled at most by replays


def test_redis_state_store_prepares_commits_and_rolls_back(redis_url: str) -> None:
    store = RedisStateStore(redis_url, "t/count/0")
    state = KeyValueState(store)
    state.put("a", 1)
    state.put(("x", 2), [1, 2])
    state.prepare_commit(1)
    state.commit(1)
    state.put("a", 2)
    state.delete(("x", 2))
    state.prepare_commit(2)
    assert store.prepared_txid() == 2
    state.rollback()
    assert dict(state.items()) == {"a": 1, ("x", 2): [1, 2]}
    state.delete(("x", 2))
    state.prepare_commit(3)
    state.commit(3)
    assert dict(KeyValueState(RedisStateStore(redis_url, "t/count/0")).items()) == {"a": 1}
    assert store.committed_txid() == 3
    with client(redis_url) as r:
        assert r.hgetall("squall:state:t/count/0") == {"1sa": "1i1"}
    store.close()


def test_redis_state_store_commits_a_transaction_another_process_prepared(
    redis_url: str,
) -> None:
    # The commit merges what is prepared in Redis, whoever prepared it: a restarted
    # process's store (the recovery's COMMIT) commits its predecessor's transaction.
    first = KeyValueState(RedisStateStore(redis_url, "t/r/0"))
    first.put("gone", 1)
    first.prepare_commit(1)
    first.commit(1)
    first.put("a", 1)
    first.delete("gone")
    first.prepare_commit(2)
    restarted = RedisStateStore(redis_url, "t/r/0")
    restarted.commit(2)
    assert dict(KeyValueState(restarted).items()) == {"a": 1}
    assert restarted.committed_txid() == 2 and restarted.prepared_txid() is None
    first._store.commit(2)  # already committed: nothing happens
    assert dict(KeyValueState(restarted).items()) == {"a": 1}


def test_stateful_word_count_on_redis_state(redis_url: str) -> None:
    conf = {
        "topology.state.provider": "redis",
        "topology.state.provider.config": redis_url,
        "topology.state.checkpoint.interval.ms": 100,
    }
    running = run(build(300, interval_secs=0), conf)
    assert committed_counts(running) == truth(300)
    with client(redis_url) as r:
        assert r.hget("squall:state:topology/__checkpoint_spout/0:txid", "committed") is not None


def store_topology(config: RedisConfig, rows: int = 64) -> Any:
    mapper = RedisStoreMapper(RedisDataType.HASH_COUNTER, "key", "one", additional_key="counts")
    builder = TopologyBuilder()
    builder.set_spout("keys", Keys(rows))
    builder.set_bolt("store", RedisStoreBolt(config, mapper)).shuffle_grouping("keys")
    return builder.create_topology()


def first_error(config: RedisConfig, secs: float) -> Any:
    """The first error the store bolt reports in ``secs`` of virtual time."""

    async def scenario() -> Any:
        conf = {"topology.message.timeout.secs": 60, "topology.max.spout.pending": 64}
        async with run_topology(store_topology(config), conf) as running:
            await advance_time(secs)
            return running.info().errors[0]

    return simulate(scenario())


def test_an_outage_is_reported_at_once_naming_the_address_and_the_cause(
    own_redis_server: RedisServer,
) -> None:
    # The report said "network:ConnectionError" (redis's repr) with no address, after the
    # client's own ten retries had spent 3-4 s on each batch.
    own_redis_server.kill()  # nothing listens on its port any more
    port = own_redis_server.port
    error = first_error(RedisConfig(url=own_redis_server.url), 1.0)
    assert error.error.startswith(
        f"RedisStoreBolt 'store': Redis at 127.0.0.1:{port} failed (ConnectionError: Error 111 "
        f"connecting to 127.0.0.1:{port}. Connect call failed ('127.0.0.1', {port}).); "
    )
    assert error.error.endswith(" rows failed for replay")
    assert error.time_secs == pytest.approx(0.1, abs=0.05)  # the one retry, 0.1 s later


def test_a_server_that_does_not_answer_fails_the_batch_after_the_socket_timeout(
    own_redis_server: RedisServer,
) -> None:
    assert own_redis_server.process is not None
    pid = own_redis_server.process.pid
    os.kill(pid, signal.SIGSTOP)  # connections are accepted (by the kernel), never answered
    try:
        config = RedisConfig(url=own_redis_server.url, socket_timeout_secs=0.5, retries=0)
        error = first_error(config, 2.0)
    finally:
        os.kill(pid, signal.SIGCONT)
    port = own_redis_server.port
    assert error.error.startswith(
        f"RedisStoreBolt 'store': Redis at 127.0.0.1:{port} failed (TimeoutError: Timeout "
    )
    assert error.time_secs == pytest.approx(0.5, abs=0.05)


def test_redis_config_sets_the_clients_timeouts_and_retries() -> None:
    client = RedisConfig(
        url="redis://:secret@db.example:6390/2",
        socket_timeout_secs=3,
        socket_connect_timeout_secs=1,
        retries=2,
    ).client()
    kwargs = client.connection_pool.connection_kwargs
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (3, 1)
    assert client.get_retry().get_retries() == 2
    assert RedisConfig(url="redis://:secret@db.example:6390/2").address == "db.example:6390"
    assert RedisConfig(host="h", port=7000).address == "h:7000"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"socket_timeout_secs": 0},
            "RedisConfig.socket_timeout_secs must be a number of seconds > 0 or None (no "
            "limit), got 0",
        ),
        ({"retries": -1}, "RedisConfig.retries must be an int >= 0, got -1"),
        (
            {"retry_backoff_secs": "1"},
            "RedisConfig.retry_backoff_secs must be a number of seconds >= 0, got '1'",
        ),
        (
            {"url": "redis://db.example:6390", "db": 2, "password": "secret"},
            "RedisConfig: url and db and password are given together, and the url says where "
            "to connect; put db and password in the url (redis://[:password@]host[:port][/db]) "
            "or leave url out",
        ),
        (
            {"url": "redis://db.example", "port": 6390},
            "RedisConfig: url and port are given together, and the url says where to connect; "
            "put port in the url (redis://[:password@]host[:port][/db]) or leave url out",
        ),
    ],
)
def test_redis_config_refuses_bad_values(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=exactly(message)):
        RedisConfig(**kwargs)


@pytest.mark.parametrize("how", ["url", "mapping"])
def test_the_redis_state_store_refuses_a_client_that_decodes_replies(
    redis_url: str, how: str
) -> None:
    # The store keeps bytes (the format version byte first): a client that decodes replies
    # to str would hand the state text it cannot read back.
    url = f"{redis_url}?decode_responses=True"
    address = redis.connection.parse_url(redis_url)
    config: Any = url if how == "url" else {**address, "decode_responses": True}
    with pytest.raises(StateError) as caught:
        RedisStateStore(config, "t/decoded/0")
    assert str(caught.value) == (
        f"redis state store: bad provider config {config!r}: decode_responses must be off "
        "(the state is stored as bytes); remove it from the config"
    )


def test_the_filter_bolt_passes_a_sorted_set_member_whose_score_is_zero(redis_url: str) -> None:
    # ZSCORE answered 0.0 for a member scored 0, which the filter took for "missing".
    from engine import BasicBolt

    passed: list[str] = []

    class Sink(BasicBolt):
        def execute(self, tuple: Any, collector: Any) -> None:
            passed.append(tuple[0])

    with client(redis_url) as r:
        r.zadd("z", {"k0": 0, "k1": 1, "k2": -2})
    mapper = RedisFilterMapper(RedisDataType.SORTED_SET, "key", additional_key="z")
    builder = TopologyBuilder()
    builder.set_spout("keys", Keys(5, keys=5))
    builder.set_bolt(
        "filter", RedisFilterBolt(RedisConfig(url=redis_url), mapper, ["key"])
    ).shuffle_grouping("keys")
    builder.set_bolt("sink", Sink()).shuffle_grouping("filter")
    run(builder.create_topology())
    assert sorted(passed) == ["k0", "k1", "k2"]


class Once(Spout):
    """Emits ``(key, 1, i)`` for ``i < n`` (key ``k<i % keys>``) once: failures are kept."""

    def __init__(self, n: int, keys: int = 10) -> None:
        self.n, self.keys = n, keys

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.next = 0
        self.acked: set[int] = set()
        self.failed: set[int] = set()

    def next_tuple(self) -> None:
        while self.next < self.n:
            self.collector.emit([f"k{self.next % self.keys}", 1, self.next], msg_id=self.next)
            self.next += 1

    def ack(self, msg_id: Any) -> None:
        self.acked.add(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.failed.add(msg_id)

    def is_exhausted(self) -> bool:
        return len(self.acked) + len(self.failed) == self.n

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["key", "one", "i"])


def test_a_command_redis_refuses_fails_only_its_rows(redis_url: str) -> None:
    # One refused command (INCRBY on a key holding a list, GET on it) failed the whole
    # batch: the other rows were written, yet failed, so their replays counted them again.
    seen: list[str] = []

    class Sink(BasicBolt):
        def execute(self, tuple: Any, collector: Any) -> None:
            seen.append(tuple[0])

    with client(redis_url) as r:
        r.rpush("k3", "a list")
    config = RedisConfig(url=redis_url)
    builder = TopologyBuilder()
    builder.set_spout("keys", Once(200))
    builder.set_bolt(
        "store", RedisStoreBolt(config, RedisStoreMapper(RedisDataType.COUNTER, "key", "one"))
    ).shuffle_grouping("keys")
    builder.set_bolt(
        "lookup", RedisLookupBolt(config, RedisLookupMapper(RedisDataType.STRING, "key"))
    ).shuffle_grouping("keys")
    builder.set_bolt("sink", Sink()).shuffle_grouping("lookup")
    running = run(builder.create_topology())
    (spout,) = running.task_objects("keys").values()
    assert spout.failed == set(range(3, 200, 10))
    with client(redis_url) as r:
        assert {k: r.get(k) for k in (f"k{j}" for j in range(10) if j != 3)} == {
            f"k{j}": "20" for j in range(10) if j != 3
        }
    assert sorted(seen) == sorted(f"k{i % 10}" for i in range(200) if i % 10 != 3)
    assert sum(b.written for b in running.task_objects("store").values()) == 180
    info = running.info()
    assert info.components["store"].failed == info.components["lookup"].failed == 20
    wrongtype = "ResponseError: WRONGTYPE Operation against a key holding the wrong kind of value"
    assert info.errors
    for error in info.errors:  # one per batch holding k3's rows
        bolt = {"store": "RedisStoreBolt", "lookup": "RedisLookupBolt"}[error.component]
        assert re.fullmatch(
            rf"{bolt} '{error.component}': Redis at {re.escape(config.address)} refused \d+ "
            rf"command\(s\), the first: {wrongtype}; \d+ of \d+ rows failed for replay",
            error.error,
        ), error.error
