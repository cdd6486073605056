"""TopologyBuilder: every misdeclaration is rejected at build time with a message that names
the component or stream at fault; a valid topology keeps what was declared and pickles."""

from __future__ import annotations

import pickle
import random
import re
import threading
from typing import Any

import pytest

from engine import (
    BasicBatchBolt,
    BasicBolt,
    BatchBolt,
    Bolt,
    BoltDeclarer,
    CustomStreamGrouping,
    Fields,
    InvalidComponentError,
    InvalidConfigError,
    InvalidDeclarationError,
    InvalidGroupingError,
    OutputFieldsDeclarer,
    Spout,
    SpoutDeclarer,
    StormTopology,
    TopologyBuilder,
    TopologyError,
)
from engine._execution.groupers import make_grouper
from engine._model.component import StreamInfo
from engine._model.grouping import Grouping, GroupingKind
from engine._model.topology import Subscription


def exactly(message: str) -> str:
    """A ``pytest.raises(match=...)`` pattern that only the whole ``message`` matches."""
    return f"^{re.escape(message)}$"


# --- components ---------------------------------------------------------------------------


class WordSpout(Spout):
    """Declares a plain stream, a two-field stream and a direct stream."""

    def next_tuple(self) -> None:
        pass

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["word"])
        declarer.declare_stream("counts", Fields("word", "count"))
        declarer.declare_stream("direct", ["word"], direct=True)


class PassBolt(Bolt):
    def execute(self, tuple: Any) -> None:
        pass

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["word"])


class UpperBolt(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        pass


class SinkBolt(Bolt):
    def execute(self, tuple: Any) -> None:
        pass


class LazySpout(Spout):
    """Forgot next_tuple."""


class ForgetfulBolt(Bolt):
    """Forgot execute."""


class ForgetfulBasicBolt(BasicBolt):
    """Forgot execute."""


class BaseSpout(Spout):
    def next_tuple(self) -> None:
        pass


class InheritingSpout(BaseSpout):
    """next_tuple comes from a user base class: that counts."""


class LockedBolt(Bolt):
    def __init__(self) -> None:
        self.lock = threading.Lock()

    def execute(self, tuple: Any) -> None:
        pass


class ConfiguredBolt(Bolt):
    def __init__(self, conf: dict[str, Any]) -> None:
        self.conf = conf

    def execute(self, tuple: Any) -> None:
        pass

    def component_configuration(self) -> dict[str, Any]:
        return self.conf


class FirstTask(CustomStreamGrouping):
    def prepare(self, context: Any, stream: Any, target_tasks: list[int]) -> None:
        self.tasks = target_tasks

    def choose_tasks(self, task_id: int, values: Any) -> list[int]:
        return self.tasks[:1]


class LockedGrouping(FirstTask):
    def __init__(self) -> None:
        self.lock = threading.Lock()


class ChooselessGrouping(CustomStreamGrouping):
    """Forgot choose_tasks."""


def declaring(declare: Any) -> Spout:
    """A spout whose declare_output_fields is ``declare(declarer)``."""

    class Declaring(Spout):
        def next_tuple(self) -> None:
            pass

        def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
            declare(declarer)

    return Declaring()


def with_words() -> TopologyBuilder:
    builder = TopologyBuilder()
    builder.set_spout("words", WordSpout())
    return builder


# --- component ids --------------------------------------------------------------------------


@pytest.mark.parametrize("second", ["spout", "bolt"])
def test_duplicate_component_id_is_rejected(second: str) -> None:
    builder = with_words()
    with pytest.raises(
        InvalidComponentError,
        match=exactly("component id 'words' is used twice; every spout and bolt needs its own id"),
    ):
        if second == "spout":
            builder.set_spout("words", WordSpout())
        else:
            builder.set_bolt("words", PassBolt())


@pytest.mark.parametrize("cid", ["__acker", "__system", "__"])
def test_reserved_component_id_is_rejected(cid: str) -> None:
    with pytest.raises(
        InvalidComponentError,
        match=exactly(
            f"component id {cid!r} is reserved (ids starting with '__' belong to the system, "
            f"like '__acker'); rename the component"
        ),
    ):
        TopologyBuilder().set_bolt(cid, PassBolt())


def test_single_underscore_component_id_is_allowed() -> None:
    builder = TopologyBuilder()
    builder.set_spout("_words", WordSpout())
    assert list(builder.create_topology().spouts) == ["_words"]


@pytest.mark.parametrize("cid", ["", 5, None, b"words"])
def test_component_id_must_be_a_non_empty_string(cid: Any) -> None:
    with pytest.raises(
        InvalidComponentError,
        match=exactly(f"component ids must be non-empty strings, got {cid!r}"),
    ):
        TopologyBuilder().set_spout(cid, WordSpout())


# --- parallelism and tasks ----------------------------------------------------------------


@pytest.mark.parametrize("hint", [0, -1, 1.5, "2", None, True, False])
@pytest.mark.parametrize("kind", ["spout", "bolt"])
def test_parallelism_hint_must_be_a_positive_int(kind: str, hint: Any) -> None:
    builder = TopologyBuilder()
    with pytest.raises(
        InvalidComponentError,
        match=exactly(f"component 'c': parallelism_hint must be a positive int, got {hint!r}"),
    ):
        if kind == "spout":
            builder.set_spout("c", WordSpout(), hint)
        else:
            builder.set_bolt("c", PassBolt(), hint)


def test_rejected_component_does_not_take_its_id() -> None:
    builder = TopologyBuilder()
    with pytest.raises(InvalidComponentError):
        builder.set_spout("words", WordSpout(), 0)
    builder.set_spout("words", WordSpout(), 2)
    assert builder.create_topology().spouts["words"].parallelism == 2


@pytest.mark.parametrize("num_tasks", [0, -3, 2.0, None, True])
def test_num_tasks_must_be_a_positive_int(num_tasks: Any) -> None:
    declarer = with_words().set_bolt("count", PassBolt())
    with pytest.raises(
        InvalidComponentError,
        match=exactly(f"component 'count': num_tasks must be a positive int, got {num_tasks!r}"),
    ):
        declarer.set_num_tasks(num_tasks)


def test_num_tasks_defaults_to_the_parallelism_hint() -> None:
    builder = with_words()
    builder.set_bolt("count", PassBolt(), 3).shuffle_grouping("words")
    spec = builder.create_topology().bolts["count"]
    assert (spec.parallelism, spec.num_tasks, spec.num_executors) == (3, 3, 3)


def test_set_num_tasks_above_the_hint_keeps_the_executors() -> None:
    builder = with_words()
    declarer = builder.set_bolt("count", PassBolt(), 2)
    assert declarer.set_num_tasks(8) is declarer
    declarer.shuffle_grouping("words")  # chaining after set_num_tasks still subscribes
    spec = builder.create_topology().bolts["count"]
    assert (spec.parallelism, spec.num_tasks, spec.num_executors) == (2, 8, 2)


def test_fewer_tasks_than_the_hint_means_fewer_executors() -> None:
    builder = with_words()
    builder.set_bolt("count", PassBolt(), 4).set_num_tasks(2)
    spec = builder.create_topology().bolts["count"]
    assert (spec.parallelism, spec.num_tasks, spec.num_executors) == (4, 2, 2)


# --- component types ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("component", "suffix"),
    [
        (PassBolt(), "got PassBolt (a bolt: use set_bolt)"),
        (UpperBolt(), "got UpperBolt (a bolt: use set_bolt)"),
        (object(), "got object"),
    ],
)
def test_set_spout_needs_a_spout(component: Any, suffix: str) -> None:
    with pytest.raises(
        InvalidComponentError,
        match=exactly(f"spout 'words' must be an instance of engine.Spout, {suffix}"),
    ):
        TopologyBuilder().set_spout("words", component)


def test_batch_bolts_are_their_own_kind_and_must_implement_execute_batch() -> None:
    assert not isinstance(BatchBolt(), Bolt) and not isinstance(BasicBatchBolt(), BasicBolt)
    assert not hasattr(BatchBolt(), "execute") and not hasattr(BasicBatchBolt(), "execute")

    class Lazy(BasicBatchBolt):
        pass

    class Idle(BatchBolt):
        pass

    for bolt in (Lazy(), Idle()):
        name = type(bolt).__name__
        with pytest.raises(
            InvalidComponentError,
            match=exactly(f"bolt 'b' ({name}) does not implement execute_batch"),
        ):
            TopologyBuilder().set_bolt("b", bolt)


@pytest.mark.parametrize(
    ("component", "suffix"),
    [(WordSpout(), "got WordSpout (a spout: use set_spout)"), ("split", "got str")],
)
def test_set_bolt_needs_a_bolt(component: Any, suffix: str) -> None:
    with pytest.raises(
        InvalidComponentError,
        match=exactly(
            f"bolt 'split' must be an instance of engine.Bolt, engine.BasicBolt, "
            f"engine.BatchBolt or engine.BasicBatchBolt, {suffix}"
        ),
    ):
        TopologyBuilder().set_bolt("split", component)


def test_passing_a_component_class_names_the_class() -> None:
    with pytest.raises(InvalidComponentError) as info:
        TopologyBuilder().set_spout("words", WordSpout)  # type: ignore[arg-type]
    assert "WordSpout" in str(info.value)


def test_spout_without_next_tuple_is_rejected() -> None:
    with pytest.raises(
        InvalidComponentError,
        match=exactly("spout 'words' (LazySpout) does not implement next_tuple"),
    ):
        TopologyBuilder().set_spout("words", LazySpout())


@pytest.mark.parametrize("bolt", [ForgetfulBolt(), ForgetfulBasicBolt()])
def test_bolt_without_execute_is_rejected(bolt: Any) -> None:
    name = type(bolt).__name__
    with pytest.raises(
        InvalidComponentError,
        match=exactly(f"bolt 'split' ({name}) does not implement execute"),
    ):
        TopologyBuilder().set_bolt("split", bolt)


def test_inherited_next_tuple_counts() -> None:
    builder = TopologyBuilder()
    assert isinstance(builder.set_spout("words", InheritingSpout()), SpoutDeclarer)


def test_basic_bolt_is_accepted() -> None:
    builder = with_words()
    assert isinstance(
        builder.set_bolt("upper", UpperBolt()).shuffle_grouping("words"), BoltDeclarer
    )
    assert not builder.create_topology().bolts["upper"].is_spout


# --- subscriptions --------------------------------------------------------------------------


def test_grouping_on_unknown_component() -> None:
    builder = with_words()
    builder.set_bolt("count", PassBolt()).shuffle_grouping("nope")
    with pytest.raises(
        InvalidGroupingError,
        match=exactly(
            "bolt 'count': shuffle_grouping on 'nope': no component 'nope' in the topology "
            "(components: ['count', 'words'])"
        ),
    ):
        builder.create_topology()


def test_grouping_on_unknown_stream() -> None:
    builder = with_words()
    builder.set_bolt("count", PassBolt()).global_grouping("words", "nope")
    with pytest.raises(
        InvalidGroupingError,
        match=exactly(
            "bolt 'count': global_grouping on 'words': 'words' declares no stream 'nope' "
            "(its streams: ['counts', 'default', 'direct']); declare it in "
            "declare_output_fields or pick one of these"
        ),
    ):
        builder.create_topology()


def test_grouping_on_a_component_without_streams() -> None:
    builder = with_words()
    builder.set_bolt("sink", SinkBolt()).shuffle_grouping("words")
    builder.set_bolt("after", PassBolt()).shuffle_grouping("sink")
    with pytest.raises(
        InvalidGroupingError,
        match=exactly(
            "bolt 'after': shuffle_grouping on 'sink': 'sink' declares no stream 'default' "
            "(its streams: []); declare it in declare_output_fields or pick one of these"
        ),
    ):
        builder.create_topology()


@pytest.mark.parametrize("method", ["fields_grouping", "partial_key_grouping"])
def test_grouping_on_unknown_field(method: str) -> None:
    builder = with_words()
    # 'count' is a field of the 'counts' stream, not of 'default'
    getattr(builder.set_bolt("count", PassBolt()), method)("words", ["word", "count"])
    with pytest.raises(
        InvalidGroupingError,
        match=exactly(
            f"bolt 'count': {method}(['word', 'count']) on 'words': stream 'default' has no "
            f"field 'count' (its fields: ['word'])"
        ),
    ):
        builder.create_topology()


@pytest.mark.parametrize("fields", [Fields("count"), ["count"], "count", ("count",)])
def test_fields_may_be_given_as_fields_list_or_name(fields: Any) -> None:
    builder = with_words()
    builder.set_bolt("count", PassBolt()).fields_grouping("words", fields, stream="counts")
    [(bolt, grouping)] = builder.create_topology().subscribers("words", "counts")
    assert (bolt, grouping) == ("count", Grouping(GroupingKind.FIELDS, Fields("count")))


def test_grouping_fields_must_be_names() -> None:
    with pytest.raises(
        InvalidGroupingError,
        match=exactly("bolt 'count': grouping fields must be Fields or a list of names, got 5"),
    ):
        with_words().set_bolt("count", PassBolt()).fields_grouping("words", 5)  # type: ignore[arg-type]


def test_duplicate_grouping_fields_name_the_bolt() -> None:
    with pytest.raises(InvalidGroupingError, match=r"^bolt 'count': .*'word'"):
        with_words().set_bolt("count", PassBolt()).fields_grouping("words", ["word", "word"])


def test_fields_grouping_on_no_fields_acts_as_global() -> None:
    builder = with_words()
    builder.set_bolt("count", PassBolt()).fields_grouping("words", [])
    [(_, grouping)] = builder.create_topology().subscribers("words", "default")
    grouper = make_grouper(
        grouping, Fields("word"), [4, 5, 6, 7], random.Random(0), None, ("words", "default")
    )
    assert {grouper.choose([w]) for w in ["a", "b", "c"]} == {(4,)}
    assert grouper.fixed == (4,)


def test_direct_grouping_on_a_non_direct_stream() -> None:
    builder = with_words()
    builder.set_bolt("count", PassBolt()).direct_grouping("words")
    with pytest.raises(
        InvalidGroupingError,
        match=exactly(
            "bolt 'count': direct_grouping on 'words': stream 'default' is not direct; "
            "declare it with direct=True or use another grouping"
        ),
    ):
        builder.create_topology()


@pytest.mark.parametrize(
    ("method", "args"),
    [
        ("shuffle_grouping", ()),
        ("local_or_shuffle_grouping", ()),
        ("fields_grouping", (["word"],)),
        ("partial_key_grouping", (["word"],)),
        ("all_grouping", ()),
        ("global_grouping", ()),
        ("none_grouping", ()),
        ("custom_grouping", (FirstTask(),)),
    ],
)
def test_non_direct_grouping_on_a_direct_stream(method: str, args: tuple[Any, ...]) -> None:
    builder = with_words()
    getattr(builder.set_bolt("count", PassBolt()), method)("words", *args, stream="direct")
    shown = method + (
        f"({args[0]!r})" if method in ("fields_grouping", "partial_key_grouping") else ""
    )
    with pytest.raises(
        InvalidGroupingError,
        match=exactly(
            f"bolt 'count': {shown} on 'words': stream 'direct' is direct (its tuples go where "
            f"emit_direct sends them); subscribe with direct_grouping"
        ),
    ):
        builder.create_topology()


def test_direct_grouping_on_a_direct_stream() -> None:
    builder = with_words()
    builder.set_bolt("count", PassBolt()).direct_grouping("words", "direct")
    topology = builder.create_topology()
    assert topology.subscribers("words", "direct") == [("count", Grouping(GroupingKind.DIRECT))]


def test_duplicate_subscription_is_rejected_when_declared() -> None:
    declarer = with_words().set_bolt("count", PassBolt()).shuffle_grouping("words")
    with pytest.raises(
        InvalidGroupingError,
        match=exactly(
            "bolt 'count' subscribes to stream 'default' of 'words' twice (shuffle_grouping "
            "and fields_grouping(['word'])); keep one"
        ),
    ):
        declarer.fields_grouping("words", ["word"])


def test_one_bolt_may_subscribe_to_several_streams_of_one_component() -> None:
    builder = with_words()
    builder.set_bolt("count", PassBolt()).shuffle_grouping("words").fields_grouping(
        "words", ["word"], stream="counts"
    )
    assert builder.create_topology().bolts["count"].inputs == (
        Subscription("words", "default", Grouping(GroupingKind.SHUFFLE)),
        Subscription("words", "counts", Grouping(GroupingKind.FIELDS, Fields("word"))),
    )


@pytest.mark.parametrize(
    "method", ["shuffle_grouping", "fields_grouping", "direct_grouping", "custom_grouping"]
)
def test_spouts_take_no_inputs(method: str) -> None:
    declarer = with_words().set_spout("more", WordSpout())
    with pytest.raises(
        InvalidGroupingError,
        match=exactly(
            f"spout 'more' cannot subscribe to streams ({method}): spouts take no inputs; "
            f"declare the component with set_bolt instead"
        ),
    ):
        getattr(declarer, method)("words")


def test_spout_declarer_other_attributes_are_attribute_errors() -> None:
    declarer = with_words().set_spout("more", WordSpout())
    with pytest.raises(AttributeError, match="has no attribute 'no_such_thing'"):
        declarer.no_such_thing  # noqa: B018
    assert not hasattr(declarer, "no_such_thing")
    assert hasattr(declarer, "shuffle_grouping")  # callable, raises only when called


def test_component_id_of_a_subscription_must_be_a_string() -> None:
    with pytest.raises(
        InvalidGroupingError,
        match=exactly("bolt 'count': shuffle_grouping needs a component id string, got 5"),
    ):
        with_words().set_bolt("count", PassBolt()).shuffle_grouping(5)  # type: ignore[arg-type]


def test_stream_id_of_a_subscription_must_be_a_string() -> None:
    # The classic slip: fields and stream swapped.
    with pytest.raises(
        InvalidGroupingError,
        match=exactly(
            "bolt 'count': stream ids are strings, got Fields('word') "
            "(pass the stream as stream=...)"
        ),
    ):
        with_words().set_bolt("count", PassBolt()).fields_grouping(
            "words",
            "counts",
            Fields("word"),  # type: ignore[arg-type]
        )


def test_custom_grouping_needs_a_custom_stream_grouping() -> None:
    with pytest.raises(
        InvalidGroupingError,
        match=exactly(
            "bolt 'count': custom_grouping needs a CustomStreamGrouping instance, got function"
        ),
    ):
        with_words().set_bolt("count", PassBolt()).custom_grouping(
            "words",
            lambda task, values: [task],  # type: ignore[arg-type]
        )


def test_custom_grouping_without_choose_tasks_is_rejected() -> None:
    with pytest.raises(InvalidGroupingError, match=r"^bolt 'count': .*ChooselessGrouping"):
        with_words().set_bolt("count", PassBolt()).custom_grouping("words", ChooselessGrouping())


def test_uncopyable_custom_grouping_is_rejected() -> None:
    builder = with_words()
    builder.set_bolt("count", PassBolt()).custom_grouping("words", LockedGrouping())
    with pytest.raises(
        InvalidComponentError,
        match=exactly(
            "bolt 'count': custom grouping on 'words' (LockedGrouping) cannot be copied for "
            "each task: attribute 'lock' (lock): cannot pickle '_thread.lock' object. "
            "Components are copied per task like Storm's; create such state (connections, "
            "locks, open files, threads) in open()/prepare() instead"
        ),
    ):
        builder.create_topology()


# --- output declarations ----------------------------------------------------------------------


def test_declare_output_fields_raising_is_wrapped() -> None:
    def declare(declarer: OutputFieldsDeclarer) -> None:
        raise KeyError("oops")

    builder = TopologyBuilder()
    builder.set_spout("words", declaring(declare))
    with pytest.raises(
        InvalidDeclarationError,
        match=exactly("component 'words': declare_output_fields raised KeyError('oops')"),
    ) as info:
        builder.create_topology()
    assert isinstance(info.value.__cause__, KeyError)


@pytest.mark.parametrize(
    ("declare", "message"),
    [
        (
            lambda d: (d.declare(["word"]), d.declare_stream("default", ["other"])),
            "component 'words': stream 'default' is declared twice",
        ),
        (
            lambda d: (d.declare_stream("s", ["a"]), d.declare_stream("s", ["a"], direct=True)),
            "component 'words': stream 's' is declared twice",
        ),
        (
            lambda d: d.declare_stream("__tick", ["word"]),
            "component 'words': stream id '__tick' is reserved (ids starting with '__' belong "
            "to the system); rename the stream",
        ),
        (
            lambda d: d.declare_stream("", ["word"]),
            "component 'words': stream ids must be non-empty strings, got ''",
        ),
        (
            lambda d: d.declare_stream(None, ["word"]),
            "component 'words': stream ids must be non-empty strings, got None",
        ),
        (
            lambda d: d.declare("word"),
            "component 'words': stream 'default': pass Fields('word') or a list of names, "
            "not a bare string",
        ),
    ],
    ids=["twice-default", "twice-named", "reserved", "empty", "none", "bare-string"],
)
def test_bad_declarations(declare: Any, message: str) -> None:
    builder = TopologyBuilder()
    builder.set_spout("words", declaring(declare))
    with pytest.raises(InvalidDeclarationError, match=exactly(message)):
        builder.create_topology()


def test_duplicate_declared_field_names_name_the_component() -> None:
    builder = TopologyBuilder()
    builder.set_spout("words", declaring(lambda d: d.declare_stream("pairs", ["word", "word"])))
    with pytest.raises(
        InvalidDeclarationError, match=r"^component 'words': .*'pairs'.*duplicate field name 'word'"
    ):
        builder.create_topology()


def test_declarer_without_component_id_has_no_prefix() -> None:
    declarer = OutputFieldsDeclarer()
    with pytest.raises(
        InvalidDeclarationError,
        match=exactly(
            "stream id '__ack' is reserved (ids starting with '__' belong to the system); "
            "rename the stream"
        ),
    ):
        declarer.declare_stream("__ack", ["id"])


def test_declarer_records_streams() -> None:
    declarer = OutputFieldsDeclarer("words")
    declarer.declare(("word",))
    declarer.declare_stream("pairs", Fields("a", "b"), direct=1)  # type: ignore[arg-type]
    assert declarer.streams == {
        "default": StreamInfo(Fields("word"), direct=False),
        "pairs": StreamInfo(Fields("a", "b"), direct=True),
    }


def test_multiple_streams_are_kept() -> None:
    topology = with_words().create_topology()
    assert topology.spouts["words"].streams == {
        "default": StreamInfo(Fields("word")),
        "counts": StreamInfo(Fields("word", "count")),
        "direct": StreamInfo(Fields("word"), direct=True),
    }


# --- component configuration ------------------------------------------------------------------


def test_non_component_config_key_is_rejected() -> None:
    builder = with_words()
    builder.set_bolt("count", PassBolt()).add_configuration("topology.message.timeout.secs", 5)
    with pytest.raises(
        InvalidConfigError,
        match=exactly(
            "component 'count': 'topology.message.timeout.secs' cannot be set per component; "
            "set it in the topology's config instead (per-component keys: "
            "['topology.blocking.warn.secs', 'topology.bolt.max.inflight', 'topology.debug', "
            "'topology.debug.sample.rate', "
            "'topology.executor.receive.buffer.size', 'topology.kryo.register', "
            "'topology.max.spout.pending', 'topology.max.task.parallelism', "
            "'topology.producer.batch.size', 'topology.sleep.spout.wait.strategy.time.ms', "
            "'topology.tick.tuple.freq.secs'])"
        ),
    ):
        builder.create_topology()


def test_non_component_key_from_component_configuration_is_rejected() -> None:
    builder = with_words()
    builder.set_bolt("count", ConfiguredBolt({"topology.workers": 2}))
    with pytest.raises(
        InvalidConfigError,
        match="^" + re.escape("component 'count': 'topology.workers' cannot be set per component"),
    ):
        builder.create_topology()


def test_mistyped_component_config_key_suggests_the_closest() -> None:
    builder = with_words()
    builder.set_bolt("count", PassBolt()).add_configurations({"topology.max.spout.pendng": 10})
    with pytest.raises(
        InvalidConfigError,
        match=exactly(
            "component 'count': unknown config key 'topology.max.spout.pendng'; "
            "did you mean 'topology.max.spout.pending'?"
        ),
    ):
        builder.create_topology()


def test_bad_component_config_value_names_the_component() -> None:
    builder = with_words()
    builder.set_spout("more", WordSpout()).set_max_spout_pending(0)
    with pytest.raises(
        InvalidConfigError,
        match=exactly(
            "component 'more': 'topology.max.spout.pending' must be a positive int or None, got 0"
        ),
    ):
        builder.create_topology()


def test_non_string_component_config_key_is_rejected() -> None:
    builder = with_words()
    builder.set_bolt("count", PassBolt()).add_configuration(7, "x")  # type: ignore[arg-type]
    with pytest.raises(
        InvalidConfigError, match=exactly("component 'count': config keys must be strings, got 7")
    ):
        builder.create_topology()


def test_component_config_overlays_component_configuration() -> None:
    builder = with_words()
    declarer = builder.set_bolt(
        "count", ConfiguredBolt({"topology.debug": True, "my.key": 1, "my.other": "a"})
    )
    declarer.add_configuration("my.key", 2).set_debug(False).set_max_spout_pending(100)
    assert builder.create_topology().bolts["count"].config == {
        "topology.debug": False,
        "my.key": 2,
        "my.other": "a",
        "topology.max.spout.pending": 100,
    }


# --- copying per task --------------------------------------------------------------------------


def test_uncopyable_component_is_rejected_naming_the_attribute() -> None:
    builder = with_words()
    builder.set_bolt("count", LockedBolt()).shuffle_grouping("words")
    with pytest.raises(
        InvalidComponentError,
        match=exactly(
            "component 'count' (LockedBolt) cannot be copied for each task: attribute 'lock' "
            "(lock): cannot pickle '_thread.lock' object. Components are copied per task like "
            "Storm's; create such state (connections, locks, open files, threads) in "
            "open()/prepare() instead"
        ),
    ) as info:
        builder.create_topology()
    assert isinstance(info.value.__cause__, TypeError)


def wired() -> StormTopology:
    builder = with_words()
    builder.set_spout("more", WordSpout(), 2).set_num_tasks(3).set_debug(False)
    builder.set_bolt("split", PassBolt(), 2).shuffle_grouping("words").all_grouping("more")
    builder.set_bolt("count", UpperBolt(), 4).fields_grouping("split", Fields("word"))
    builder.set_bolt("pick", SinkBolt()).custom_grouping("words", FirstTask(), stream="counts")
    builder.set_bolt("direct", SinkBolt()).direct_grouping("words", "direct")
    return builder.create_topology()


def test_topology_splits_spouts_and_bolts() -> None:
    topology = wired()
    assert sorted(topology.spouts) == ["more", "words"]
    assert sorted(topology.bolts) == ["count", "direct", "pick", "split"]
    assert topology.components == {**topology.spouts, **topology.bolts}
    assert all(spec.id == cid for cid, spec in topology.components.items())


def test_topology_pickles() -> None:
    topology = wired()
    copy = pickle.loads(pickle.dumps(topology))
    assert isinstance(copy, StormTopology)
    assert copy.components.keys() == topology.components.keys()
    for cid, spec in topology.components.items():
        twin = copy.components[cid]
        assert type(twin.component) is type(spec.component)
        assert twin.component is not spec.component
        assert (twin.parallelism, twin.num_tasks, twin.config) == (
            spec.parallelism,
            spec.num_tasks,
            spec.config,
        )
        assert twin.streams == spec.streams
        assert [
            (s.component, s.stream, s.grouping.kind, s.grouping.fields) for s in twin.inputs
        ] == [(s.component, s.stream, s.grouping.kind, s.grouping.fields) for s in spec.inputs]
    [(_, grouping)] = copy.subscribers("words", "counts")
    assert isinstance(grouping.custom, FirstTask)


def test_subscribers() -> None:
    topology = wired()
    assert topology.subscribers("words", "default") == [("split", Grouping(GroupingKind.SHUFFLE))]
    assert topology.subscribers("more", "default") == [("split", Grouping(GroupingKind.ALL))]
    assert topology.subscribers("split", "default") == [
        ("count", Grouping(GroupingKind.FIELDS, Fields("word")))
    ]
    assert topology.subscribers("words", "direct") == [("direct", Grouping(GroupingKind.DIRECT))]
    assert topology.subscribers("count", "default") == []  # declared nothing
    assert topology.subscribers("nope", "default") == []


def test_subscribers_in_declaration_order() -> None:
    builder = with_words()
    for bolt in ["zeta", "alpha", "mid"]:
        builder.set_bolt(bolt, SinkBolt()).shuffle_grouping("words")
    assert [b for b, _ in builder.create_topology().subscribers("words", "default")] == [
        "zeta",
        "alpha",
        "mid",
    ]


def test_empty_builder_makes_an_empty_topology() -> None:
    topology = TopologyBuilder().create_topology()
    assert (dict(topology.spouts), dict(topology.bolts), dict(topology.components)) == ({}, {}, {})


def test_every_build_error_is_a_topology_error() -> None:
    # Catching ValueError is enough for code that does not know the engine.
    builder = with_words()
    builder.set_bolt("count", PassBolt()).shuffle_grouping("nope")
    with pytest.raises(ValueError) as info:
        builder.create_topology()
    assert isinstance(info.value, TopologyError)
