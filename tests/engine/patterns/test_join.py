"""``JoinBolt`` end to end under ``simulate``: joins at parallelism 1 and 3, anchoring to
every joined input, keys that never complete fail their roots, declaration errors."""

from __future__ import annotations

from typing import Any

import pytest

from engine import (
    BasicBolt,
    Fields,
    InvalidComponentError,
    InvalidConfigError,
    InvalidGroupingError,
    TopologyBuilder,
    run_topology,
)
from engine.patterns import JoinBolt
from engine.state import BasicStatefulBolt
from engine.testing import CrashTask, advance_time, simulate

from .components import ListSpout, Sink

PURCHASES = [[u, f"p{u}-{i}"] for u in range(8) for i in range(2)]
ADS = [[u, f"ad{u}"] for u in range(8)]


def topology(
    parallelism: int,
    purchases: list[list[Any]],
    ads: list[list[Any]],
    *,
    grouped: bool = True,
    replay: bool = True,
    sink: Any = None,
) -> Any:
    b = TopologyBuilder()
    b.set_spout("purchases", ListSpout(["user", "product"], purchases, 0.1, replay))
    b.set_spout("ads", ListSpout(["user_id", "ad"], ads, 0.3, replay))
    join = JoinBolt("purchases", "user").join("ads", "user_id", "purchases")
    join = join.select("user, product, ad").with_timeout(5)
    d = b.set_bolt("join", join, parallelism)
    if grouped:
        d.fields_grouping("purchases", Fields("user")).fields_grouping("ads", Fields("user_id"))
    else:
        d.shuffle_grouping("purchases").shuffle_grouping("ads")
    b.set_bolt("sink", sink or Sink()).shuffle_grouping("join")
    return b.create_topology()


def run(topo: Any, secs: float = 30) -> Any:
    async def main() -> Any:
        async with run_topology(topo, {"topology.seed": 3}, trace=True) as running:
            await advance_time(secs)
            (sink,) = running.task_objects("sink").values()
            spouts = {c: next(iter(running.task_objects(c).values())) for c in ("purchases", "ads")}
            return running.report(), sink, spouts

    return simulate(main())


def test_join_emits_every_combination_and_acks_every_input(parallelism: int) -> None:
    report, sink, spouts = run(topology(parallelism, PURCHASES, ADS))
    expected = sorted([u, p, f"ad{u}"] for u, p in PURCHASES)
    assert sorted(sink.seen["default"]) == expected
    for name, n in (("purchases", 16), ("ads", 8)):
        r = report[name]
        assert (r.acked, r.failed, r.lost) == (n, 0, 0)
        assert sorted(spouts[name].acked) == list(range(n))


def test_a_join_that_never_completes_fails_its_roots_before_the_message_timeout() -> None:
    purchases = [*PURCHASES, [99, "lonely"]]
    report, sink, spouts = run(topology(1, purchases, ADS, replay=False))
    assert spouts["purchases"].failed == [16]  # user 99 never got an ad
    assert report["purchases"].timed_out == 0  # failed by the join, not by the timeout
    (fail_time,) = spouts["purchases"].fail_times
    assert 5 <= fail_time - 1.6 <= 5 * 1.5 + 2.5  # emitted at 1.6 s; waited 5-7.5 s (+ tick)
    assert all(row[0] != 99 for row in sink.seen["default"])


def test_the_joined_output_is_anchored_to_every_input() -> None:
    class FailFirst(Sink):
        def execute(self, tuple: Any) -> None:
            if not getattr(self, "failed_one", False):
                self.failed_one = True
                self.collector.fail(tuple)
                return
            super().execute(tuple)

    _, _, spouts = run(topology(1, PURCHASES[:2], ADS[:1], sink=FailFirst(), replay=False))
    # the first output joined purchase 0 (or 1) with ad 0: both their trees failed
    assert spouts["ads"].failed == [0] and len(spouts["purchases"].failed) == 1


def test_a_join_over_shuffled_inputs_is_refused_at_start() -> None:
    topo = topology(3, PURCHASES, ADS, grouped=False)

    async def main() -> None:
        async with run_topology(topo):
            pass

    with pytest.raises(InvalidGroupingError) as err:
        simulate(main())
    assert str(err.value) in {
        "join bolt 'join': input 'ads':'default' must be fields-grouped on 'user_id' so that one "
        "key meets on one task; use fields_grouping('ads', Fields('user_id'))",
        "join bolt 'join': input 'purchases':'default' must be fields-grouped on 'user' so "
        "that one key meets on one task; use fields_grouping('purchases', Fields('user'))",
    }


def test_join_declaration_errors() -> None:
    with pytest.raises(InvalidComponentError) as err:
        JoinBolt("a", "k").join("b", "k", "c")
    assert str(err.value) == (
        "JoinBolt: join('b', 'k', 'c'): 'c' is not joined yet (sources so far: ['a'])"
    )
    b = TopologyBuilder()
    b.set_spout("a", ListSpout(["k"], []))
    b.set_bolt("join", JoinBolt("a", "k").select("k").with_timeout(1)).shuffle_grouping("a")
    with pytest.raises(InvalidComponentError) as err:
        b.create_topology()
    assert str(err.value) == "join bolt 'join' joins one source; add .join(source, field, prior)"
    join = JoinBolt("purchases", "user").join("ads", "user_id", "purchases").select("user, ad")
    with pytest.raises(InvalidConfigError) as cerr:
        join.with_timeout(25).validate_topology_conf("join", {"topology.message.timeout.secs": 30})
    assert str(cerr.value) == (
        "join bolt 'join': with_timeout(25) lets a key wait up to 37.5 s, not below "
        "topology.message.timeout.secs = 30: its tuples would time out first; lower with_timeout"
    )


def test_a_subscription_the_join_does_not_join_is_refused_at_start() -> None:
    b = TopologyBuilder()
    b.set_spout("purchases", ListSpout(["user", "product"], PURCHASES))
    b.set_spout("ads", ListSpout(["user_id", "ad"], ADS))
    b.set_spout("clicks", ListSpout(["user", "url"], []))
    join = JoinBolt("purchases", "user").join("ads", "user_id", "purchases")
    b.set_bolt("join", join.select("user, product, ad").with_timeout(5)).shuffle_grouping(
        "purchases"
    ).shuffle_grouping("ads").shuffle_grouping("clicks")
    b.set_bolt("sink", Sink()).shuffle_grouping("join")

    async def main() -> None:
        async with run_topology(b.create_topology()):
            pass

    with pytest.raises(InvalidGroupingError) as err:
        simulate(main())
    assert str(err.value) == (
        "join bolt 'join': subscribes to 'clicks':'default' but joins no component 'clicks' "
        "(it joins ['purchases', 'ads']); join it with .join('clicks', field, prior) or drop "
        "the subscription"
    )


class PassAds(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        collector.emit(list(tuple.values))

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["user_id", "ad"])


class CountJoined(BasicStatefulBolt):
    def init_state(self, state: Any) -> None:
        self.counts = state

    def execute(self, tuple: Any, collector: Any) -> None:
        self.counts.put(tuple[0], self.counts.get(tuple[0], 0) + 1)


def test_a_join_upstream_of_a_stateful_bolt_is_not_refused_for_its_checkpoint_streams(
    parallelism: int,
) -> None:
    """Checkpoint wiring subscribes the join to barrier streams it does not join."""
    b = TopologyBuilder()
    b.set_spout("purchases", ListSpout(["user", "product"], PURCHASES, 0.1))
    b.set_bolt("ads", PassAds(), parallelism).shuffle_grouping("ad_source")
    b.set_spout("ad_source", ListSpout(["user_id", "ad"], ADS, 0.3))
    join = JoinBolt("purchases", "user").join("ads", "user_id", "purchases")
    d = b.set_bolt("join", join.select("user, product, ad").with_timeout(5), parallelism)
    d.fields_grouping("purchases", Fields("user")).fields_grouping("ads", Fields("user_id"))
    b.set_bolt("count", CountJoined()).shuffle_grouping("join")

    async def main() -> Any:
        async with run_topology(b.create_topology(), {"topology.seed": 3}, trace=True) as running:
            await advance_time(30)
            return running.report()

    report = simulate(main())
    assert (report["purchases"].acked, report["ad_source"].acked) == (16, 8)


class StreamSpout(ListSpout):
    """A ``ListSpout`` that emits on ``stream``."""

    def __init__(self, stream: str, fields: list[str], rows: list[list[Any]]) -> None:
        super().__init__(fields, rows)
        self.stream = stream

    def next_tuple(self) -> None:
        if self.todo:
            i = self.todo.popleft()
            self.collector.emit(list(self.rows[i]), stream=self.stream, msg_id=i)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare_stream(self.stream, self.fields)


def test_a_stream_join_picks_each_field_from_its_own_tuple() -> None:
    """Two components emit the joined stream with their fields in different orders."""
    b = TopologyBuilder()
    b.set_spout("web", StreamSpout("orders", ["user", "product"], [[1, "book"]]))
    b.set_spout("shop", StreamSpout("orders", ["product", "user"], [["pen", 2]]))
    b.set_spout("ads", StreamSpout("ads", ["user_id", "ad"], [[1, "ad1"], [2, "ad2"]]))
    join = JoinBolt("orders", "user", selector="stream").join("ads", "user_id", "orders")
    d = b.set_bolt("join", join.select("user, product, ad").with_timeout(5))
    d.shuffle_grouping("web", "orders").shuffle_grouping("shop", "orders")
    d.shuffle_grouping("ads", "ads")
    b.set_bolt("sink", Sink()).shuffle_grouping("join")

    async def main() -> Any:
        async with run_topology(b.create_topology(), {"topology.seed": 3}) as running:
            await advance_time(10)
            (sink,) = running.task_objects("sink").values()
            return sink

    sink = simulate(main())
    assert sorted(sink.seen["default"], key=str) == [[1, "book", "ad1"], [2, "pen", "ad2"]]


def test_a_stream_join_refuses_an_input_without_the_key_or_a_selected_field() -> None:
    def start(shop_fields: list[str]) -> None:
        b = TopologyBuilder()
        b.set_spout("web", StreamSpout("orders", ["user", "product"], []))
        b.set_spout("shop", StreamSpout("orders", shop_fields, []))
        b.set_spout("ads", StreamSpout("ads", ["user_id", "ad"], []))
        join = JoinBolt("orders", "user", selector="stream").join("ads", "user_id", "orders")
        d = b.set_bolt("join", join.select("user, product, ad").with_timeout(5))
        d.shuffle_grouping("web", "orders").shuffle_grouping("shop", "orders")
        d.shuffle_grouping("ads", "ads")

        async def main() -> None:
            async with run_topology(b.create_topology()):
                pass

        simulate(main())

    with pytest.raises(InvalidComponentError) as err:
        start(["product", "customer"])
    assert str(err.value) == (
        "join bolt 'join': input 'shop':'orders' (joined as 'orders') has no key field 'user' "
        "(its fields: ['product', 'customer'])"
    )
    with pytest.raises(InvalidComponentError) as err:
        start(["item", "user"])
    assert str(err.value) == (
        "join bolt 'join': input 'shop':'orders' (joined as 'orders') has no selected field "
        "'product' (its fields: ['item', 'user']); declare it there or select another field"
    )


def test_a_restarted_join_fails_an_unjoined_tuple_within_its_longest_wait() -> None:
    """A restarted task's cache rotates out of step with the ticks: an unjoined tuple still
    fails within 1.5 x with_timeout, the wait the message timeout is checked against."""
    # user 98 (at 0 s) is lost in the crash; user 99 arrives at 5.15 s, just after a
    # rotation of the restarted task's cache (its periods count from 2.6 s)
    purchases = ListSpout(["user", "product"], [[98, "lost"], [99, "lonely"]], 5.15, False)
    b = TopologyBuilder()
    b.set_spout("purchases", purchases)
    b.set_spout("ads", ListSpout(["user_id", "ad"], []))
    join = JoinBolt("purchases", "user").join("ads", "user_id", "purchases")
    d = b.set_bolt("join", join.select("user, product, ad").with_timeout(5))
    d.shuffle_grouping("purchases").shuffle_grouping("ads")
    faults = [CrashTask(component="join", at=2.6)]

    async def main() -> Any:
        async with run_topology(b.create_topology(), faults=faults) as running:
            await advance_time(20)
            return next(iter(running.task_objects("purchases").values()))

    spout = simulate(main())
    assert spout.failed == [1]
    (fail_time,) = spout.fail_times
    assert 5 <= fail_time - 5.15 <= 5 * 1.5


def test_the_longest_wait_checked_counts_the_tick_period() -> None:
    join = JoinBolt("purchases", "user").join("ads", "user_id", "purchases").select("user, ad")
    join.with_timeout(10)
    assert join.component_configuration() == {"topology.tick.tuple.freq.secs": 2.5}
    conf = {"topology.message.timeout.secs": 30, "topology.tick.tuple.freq.secs": 20}
    join.validate_topology_conf("join", {**conf, "topology.tick.tuple.freq.secs": 2.5})
    with pytest.raises(InvalidConfigError) as err:
        join.validate_topology_conf("join", conf)
    assert str(err.value) == (
        "join bolt 'join': with_timeout(10) and a tick every 20 s lets a key wait up to "
        "32.5 s, not below topology.message.timeout.secs = 30: its tuples would time out "
        "first; lower with_timeout"
    )
    with pytest.raises(InvalidConfigError) as err:
        join.validate_topology_conf("join", {**conf, "topology.tick.tuple.freq.secs": None})
    assert str(err.value) == (
        "join bolt 'join': topology.tick.tuple.freq.secs is unset, and the join expires its "
        "tuples on tick tuples; leave it to the bolt (with_timeout / 4) or set it"
    )
