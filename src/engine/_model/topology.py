"""The topology model: ``TopologyBuilder`` and the validated ``StormTopology`` it creates.

A ``StormTopology`` is plain declarative data (component specs, subscriptions, declared
streams) plus component objects, copied per task in-process (``copy.deepcopy``); a
topology whose components pickle can be shipped as a whole.
Everything that can be checked without running is checked in ``create_topology``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .batch_component import BasicBatchBolt, BatchBolt
from .component import BasicBolt, Bolt, Component, OutputFieldsDeclarer, Spout, StreamInfo
from .config import QUEUED_PROTECTION_TIMEOUTS, check_component_config
from .copying import check_copyable, serialize_component
from .errors import (
    InvalidComponentError,
    InvalidConfigError,
    InvalidDeclarationError,
    InvalidGroupingError,
)
from .fields import Fields
from .grouping import CustomStreamGrouping, Grouping, GroupingKind

__all__ = [
    "BoltDeclarer",
    "ComponentSpec",
    "SpoutDeclarer",
    "StormTopology",
    "Subscription",
    "TopologyBuilder",
]

#: The kinds of bolt ``set_bolt`` takes: per tuple or per batch, acked by the engine (basic)
#: or by the bolt (rich).
BOLT_KINDS = (Bolt, BasicBolt, BatchBolt, BasicBatchBolt)

DEFAULT = "default"

_log = logging.getLogger("engine.topology")

#: Rewrites of a builder's declarations that ``create_topology`` runs before validating:
#: each takes a builder and returns the builder to validate (itself when it has nothing to
#: do, a copy otherwise). ``engine.state`` registers the one that wires the checkpoint spout
#: and barrier forwarders in when a stateful bolt is declared; the core never imports it.
BUILDER_REWRITES: list[Callable[[TopologyBuilder], TopologyBuilder]] = []


@dataclass(frozen=True)
class Subscription:
    """A bolt's input: ``grouping`` over ``stream`` of ``component``."""

    component: str
    stream: str
    grouping: Grouping


@dataclass(frozen=True)
class ComponentSpec:
    """One spout or bolt as declared: the object, its parallelism, inputs and outputs."""

    id: str
    component: Component
    parallelism: int
    num_tasks: int
    inputs: tuple[Subscription, ...]
    streams: Mapping[str, StreamInfo]
    config: Mapping[str, Any]
    #: ``(component, its pickle)`` made when the topology was created, what the tasks'
    #: copies of that object are made from (None: it copies by deepcopy); a spec made by
    #: ``dataclasses.replace`` with another object copies that one
    serialized: tuple[Component, bytes] | None = field(default=None, repr=False, compare=False)

    @property
    def is_spout(self) -> bool:
        """True for a spout (it emits the roots of tuple trees), False for a bolt."""
        return isinstance(self.component, Spout)

    @property
    def num_executors(self) -> int:
        """How many executors run the component's tasks: the parallelism hint, but never
        more than there are tasks (an executor with no task would have nothing to do)."""
        return min(self.parallelism, self.num_tasks)


@dataclass(frozen=True)
class StormTopology:
    """A validated topology: spouts and bolts by id. Create it with ``TopologyBuilder``."""

    spouts: Mapping[str, ComponentSpec]
    bolts: Mapping[str, ComponentSpec]
    components: Mapping[str, ComponentSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "components", {**self.spouts, **self.bolts})

    def __getstate__(self) -> dict[str, Any]:
        return {"spouts": self.spouts, "bolts": self.bolts}

    def __setstate__(self, state: dict[str, Any]) -> None:
        object.__setattr__(self, "spouts", state["spouts"])
        object.__setattr__(self, "bolts", state["bolts"])
        self.__post_init__()

    def subscribers(self, component: str, stream: str) -> list[tuple[str, Grouping]]:
        """``(bolt id, grouping)`` for every bolt subscribed to ``component``'s ``stream``."""
        return [
            (bolt.id, sub.grouping)
            for bolt in self.bolts.values()
            for sub in bolt.inputs
            if sub.component == component and sub.stream == stream
        ]


class _Declarer:
    # What spout and bolt declarers share: tasks and per-component configuration.
    def __init__(self, builder: TopologyBuilder, component_id: str) -> None:
        self._builder = builder
        self._id = component_id

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._id!r})"

    def set_num_tasks(self, num_tasks: int) -> _Declarer:
        """Tasks for the component (fixed for the topology's life); defaults to the hint."""
        _check_positive(self._id, "num_tasks", num_tasks)
        self._builder._num_tasks[self._id] = num_tasks
        return self

    def add_configuration(self, key: str, value: Any) -> _Declarer:
        """Set one config key for this component only; it wins over the topology's config
        and over the component's own ``component_configuration``. Checked, like every
        component key, in ``create_topology``."""
        self._builder._configs[self._id][key] = value
        return self

    def add_configurations(self, conf: Mapping[str, Any]) -> _Declarer:
        """``add_configuration`` for every key of ``conf``."""
        if not isinstance(conf, Mapping):
            raise InvalidConfigError(
                f"component {self._id!r}: add_configurations needs a mapping of config keys "
                f"to values, got {type(conf).__name__}"
            )
        self._builder._configs[self._id].update(conf)
        return self

    def set_max_spout_pending(self, n: int | None) -> _Declarer:
        """``topology.max.spout.pending`` for this component: how many of a spout task's
        messages may be in flight (emitted, not yet acked or failed) before ``next_tuple``
        stops being called. The knob that bounds memory and latency; ``None``: no bound."""
        return self.add_configuration("topology.max.spout.pending", n)

    def set_debug(self, debug: bool) -> _Declarer:
        """``topology.debug`` for this component: log the tuples it sends, at DEBUG level, to
        ``engine.component.<id>``."""
        return self.add_configuration("topology.debug", debug)


class SpoutDeclarer(_Declarer):
    """Returned by ``set_spout``: tasks and configuration (a spout takes no inputs)."""

    def _no_inputs(self, name: str) -> InvalidGroupingError:
        return InvalidGroupingError(
            f"spout {self._id!r} cannot subscribe to streams ({name}): spouts take no "
            f"inputs; declare the component with set_bolt instead"
        )


def _refuse_grouping(name: str) -> Any:
    # A spout declarer has every grouping method, so that the mistake gets a message that
    # says what to do rather than an AttributeError.
    def refuse(self: SpoutDeclarer, *args: Any, **kwargs: Any) -> None:
        raise self._no_inputs(name)

    refuse.__name__ = name
    refuse.__doc__ = f"Refused: spouts take no inputs ({name} is for a bolt's declarer)."
    return refuse


for _name in (
    "shuffle_grouping",
    "local_or_shuffle_grouping",
    "fields_grouping",
    "partial_key_grouping",
    "all_grouping",
    "global_grouping",
    "none_grouping",
    "direct_grouping",
    "custom_grouping",
):
    setattr(SpoutDeclarer, _name, _refuse_grouping(_name))


class BoltDeclarer(_Declarer):
    """Returned by ``set_bolt``: subscribe the bolt to streams, one grouping each.

    The grouping decides which of the bolt's tasks gets each tuple of a stream, so it is
    where correctness lives: a count must see every tuple of its key in one task (fields
    grouping), a total must see all of them (global grouping). Every method returns the
    declarer, so subscriptions chain; a bolt may subscribe to several streams, each once.

    >>> from engine import Fields, TopologyBuilder
    >>> from engine.testing import BasicPassBolt, FixedTupleSpout
    >>> builder = TopologyBuilder()
    >>> builder.set_spout("words", FixedTupleSpout([["a", 1]], fields=["id", "key"]))
    SpoutDeclarer('words')
    >>> builder.set_bolt("count", BasicPassBolt(), 4).fields_grouping("words", Fields("key"))
    BoltDeclarer('count')
    """

    def _subscribe(self, component: str, stream: str, grouping: Grouping) -> BoltDeclarer:
        if not isinstance(component, str):
            raise InvalidGroupingError(
                f"bolt {self._id!r}: {grouping!r} needs a component id string, got {component!r}"
            )
        if not isinstance(stream, str):
            raise InvalidGroupingError(
                f"bolt {self._id!r}: stream ids are strings, got {stream!r} "
                f"(pass the stream as stream=...)"
            )
        inputs = self._builder._inputs[self._id]
        for sub in inputs:
            if sub.component == component and sub.stream == stream:
                raise InvalidGroupingError(
                    f"bolt {self._id!r} subscribes to stream {stream!r} of {component!r} twice "
                    f"({sub.grouping!r} and {grouping!r}); keep one"
                )
        inputs.append(Subscription(component, stream, grouping))
        return self

    def shuffle_grouping(self, component_id: str, stream: str = DEFAULT) -> BoltDeclarer:
        """Each tuple to one task, spread evenly (each sending task deals round a shuffled
        order of the tasks): for work whose tasks are interchangeable."""
        return self._subscribe(component_id, stream, Grouping(GroupingKind.SHUFFLE))

    def local_or_shuffle_grouping(self, component_id: str, stream: str = DEFAULT) -> BoltDeclarer:
        """Storm prefers tasks in the sender's own worker process, to save a network hop.
        Here every task shares the process, so this is ``shuffle_grouping``; it is kept so
        that Storm topologies read the same."""
        return self._subscribe(component_id, stream, Grouping(GroupingKind.LOCAL_OR_SHUFFLE))

    def fields_grouping(
        self, component_id: str, fields: Fields | Iterable[str] | str, stream: str = DEFAULT
    ) -> BoltDeclarer:
        """Tuples with equal values in ``fields`` go to the same task (a stable hash of
        the values, the same in every process): how a count or a join keeps all of one key
        in one place. ``fields`` is a ``Fields``, a list of names or one name; every name
        must be a field of the stream (checked in ``create_topology``)."""
        return self._subscribe(
            component_id, stream, Grouping(GroupingKind.FIELDS, _as_fields(self._id, fields))
        )

    def partial_key_grouping(
        self, component_id: str, fields: Fields | Iterable[str] | str, stream: str = DEFAULT
    ) -> BoltDeclarer:
        """Each key may go to two tasks, whichever the sending task has sent fewer tuples
        to (Storm's ``PartialKeyGrouping``): a hot key no longer overloads one task, at the
        price of a key's results being split in two, to be merged downstream."""
        return self._subscribe(
            component_id, stream, Grouping(GroupingKind.PARTIAL_KEY, _as_fields(self._id, fields))
        )

    def all_grouping(self, component_id: str, stream: str = DEFAULT) -> BoltDeclarer:
        """Every task gets a copy of every tuple: for what all tasks must see (a new rule,
        a signal to flush). Each copy is a child in the tuple tree, acked on its own."""
        return self._subscribe(component_id, stream, Grouping(GroupingKind.ALL))

    def global_grouping(self, component_id: str, stream: str = DEFAULT) -> BoltDeclarer:
        """Every tuple to one task (the lowest task id): for a result over everything, such
        as a total or a final ranking."""
        return self._subscribe(component_id, stream, Grouping(GroupingKind.GLOBAL))

    def none_grouping(self, component_id: str, stream: str = DEFAULT) -> BoltDeclarer:
        """Where each tuple goes does not matter: a random task per tuple (Storm leaves
        itself free to do better later; so does this engine)."""
        return self._subscribe(component_id, stream, Grouping(GroupingKind.NONE))

    def direct_grouping(self, component_id: str, stream: str = DEFAULT) -> BoltDeclarer:
        """The emitter picks the task, with ``emit_direct``: the stream must be declared
        ``direct=True``, and a direct stream takes no other grouping."""
        return self._subscribe(component_id, stream, Grouping(GroupingKind.DIRECT))

    def custom_grouping(
        self, component_id: str, grouping: CustomStreamGrouping, stream: str = DEFAULT
    ) -> BoltDeclarer:
        """Your ``CustomStreamGrouping`` chooses the tasks of each tuple. It is copied for
        each sending task (so it must pickle), and ``choose_tasks`` must be implemented:
        both are checked now, not when the topology runs."""
        if not isinstance(grouping, CustomStreamGrouping):
            raise InvalidGroupingError(
                f"bolt {self._id!r}: custom_grouping needs a CustomStreamGrouping instance, "
                f"got {type(grouping).__name__}"
            )
        if type(grouping).choose_tasks is CustomStreamGrouping.choose_tasks:
            raise InvalidGroupingError(
                f"bolt {self._id!r}: custom grouping {type(grouping).__name__} does not "
                f"implement choose_tasks(task_id, values)"
            )
        return self._subscribe(component_id, stream, Grouping(GroupingKind.CUSTOM, None, grouping))


def _find_cycles(inputs: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One cycle per group of components that feed each other, as the path from the
    group's first id (sorted) round and back to it, shortest first: ``["a", "b", "a"]``.

    ``inputs`` maps each component to the components it subscribes to.
    """
    feeds: dict[str, set[str]] = {}
    for cid, sources in inputs.items():
        for source in sources:
            feeds.setdefault(source, set()).add(cid)

    def shortest_way_back(start: str) -> list[str] | None:
        # Breadth-first from ``start``, neighbours in sorted order: deterministic.
        came_from: dict[str, str] = {}
        frontier = [start]
        while frontier:
            following: list[str] = []
            for node in frontier:
                for nxt in sorted(feeds.get(node, ())):
                    if nxt == start:
                        path = [node]
                        while path[-1] != start:
                            path.append(came_from[path[-1]])
                        return [*reversed(path), start]
                    if nxt not in came_from:
                        came_from[nxt] = node
                        following.append(nxt)
            frontier = following
        return None

    cycles: list[list[str]] = []
    covered: set[str] = set()
    for cid in sorted(feeds):
        if cid in covered:
            continue
        cycle = shortest_way_back(cid)
        if cycle is not None:
            cycles.append(cycle)
            covered.update(_reachable_both_ways(cid, feeds))
    return cycles


def _reachable_both_ways(start: str, feeds: Mapping[str, set[str]]) -> set[str]:
    """The components ``start`` feeds, directly or not, that also feed it back."""

    def reach(edges: Mapping[str, Iterable[str]]) -> set[str]:
        seen, stack = {start}, [start]
        while stack:
            for nxt in edges.get(stack.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    fed_by: dict[str, set[str]] = {}
    for source, targets in feeds.items():
        for target in targets:
            fed_by.setdefault(target, set()).add(source)
    return reach(feeds) & reach(fed_by)


def _as_fields(component_id: str, fields: Fields | Iterable[str] | str) -> Fields:
    if isinstance(fields, Fields):
        return fields
    if isinstance(fields, str):
        return Fields(fields)
    try:
        names = list(fields)
    except TypeError:
        raise InvalidGroupingError(
            f"bolt {component_id!r}: grouping fields must be Fields or a list of names, "
            f"got {fields!r}"
        ) from None
    try:
        return Fields(names)
    except InvalidDeclarationError as exc:
        raise InvalidGroupingError(f"bolt {component_id!r}: grouping fields: {exc}") from None


def _check_not_a_class(component_id: str, kind: str, component: Any) -> None:
    if isinstance(component, type):
        raise InvalidComponentError(
            f"{kind} {component_id!r}: got the class {component.__name__}, not an instance; "
            f"pass {component.__name__}(...)"
        )


def _check_positive(component_id: str, what: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise InvalidComponentError(
            f"component {component_id!r}: {what} must be a positive int, got {value!r}"
        )


class TopologyBuilder:
    """Declares spouts and bolts and wires them into a ``StormTopology``.

    Declaring is cheap and checks only what each call can see (ids, parallelism, that a
    component is an instance of the right base class); ``create_topology`` then checks the
    whole graph (streams, fields, groupings, configuration, that every component pickles),
    so a misdeclared topology fails before anything runs, with the component named.

    >>> from engine import BasicBolt, TopologyBuilder
    >>> from engine.testing import FixedTupleSpout, complete_topology
    >>> class Split(BasicBolt):
    ...     def execute(self, tuple, collector):
    ...         for word in tuple[0].split():
    ...             collector.emit([word])
    ...     def declare_output_fields(self, declarer):
    ...         declarer.declare(["word"])
    >>> builder = TopologyBuilder()
    >>> builder.set_spout("sentences", FixedTupleSpout([["the cat"], ["a dog"]], fields=["s"]))
    SpoutDeclarer('sentences')
    >>> builder.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    BoltDeclarer('split')
    >>> result = complete_topology(builder.create_topology())
    >>> sorted(result.emitted("split")), result.acked("sentences")
    ([['a'], ['cat'], ['dog'], ['the']], [0, 1])
    """

    def __init__(self) -> None:
        self._components: dict[str, Component] = {}
        self._parallelism: dict[str, int] = {}
        self._num_tasks: dict[str, int] = {}
        self._inputs: dict[str, list[Subscription]] = {}
        self._configs: dict[str, dict[str, Any]] = {}

    def _add(self, component_id: str, component: Component, parallelism_hint: int) -> None:
        if not isinstance(component_id, str) or not component_id:
            raise InvalidComponentError(
                f"component ids must be non-empty strings, got {component_id!r}"
            )
        if component_id.startswith("__"):
            raise InvalidComponentError(
                f"component id {component_id!r} is reserved (ids starting with '__' belong to "
                f"the system, like '__acker'); rename the component"
            )
        if component_id in self._components:
            raise InvalidComponentError(
                f"component id {component_id!r} is used twice; every spout and bolt needs "
                f"its own id"
            )
        _check_positive(component_id, "parallelism_hint", parallelism_hint)
        self._components[component_id] = component
        self._parallelism[component_id] = parallelism_hint
        self._inputs[component_id] = []
        self._configs[component_id] = {}

    def set_spout(self, id: str, spout: Spout, parallelism_hint: int = 1) -> SpoutDeclarer:
        """Declare a spout under ``id`` with ``parallelism_hint`` executors (and as many
        tasks, unless ``set_num_tasks`` says otherwise). Each task gets its own copy of
        ``spout``, so open connections in ``open``, not in ``__init__``."""
        _check_not_a_class(id, "spout", spout)
        if not isinstance(spout, Spout):
            raise InvalidComponentError(
                f"spout {id!r} must be an instance of engine.Spout, got "
                f"{type(spout).__name__}"
                + (" (a bolt: use set_bolt)" if isinstance(spout, BOLT_KINDS) else "")
            )
        if type(spout).next_tuple is Spout.next_tuple:
            raise InvalidComponentError(
                f"spout {id!r} ({type(spout).__name__}) does not implement next_tuple"
            )
        self._add(id, spout, parallelism_hint)
        return SpoutDeclarer(self, id)

    def set_bolt(
        self,
        id: str,
        bolt: Bolt | BasicBolt | BatchBolt | BasicBatchBolt | Component,
        parallelism_hint: int = 1,
    ) -> BoltDeclarer:
        """Declare a bolt (a ``Bolt``, a ``BasicBolt``, a batch bolt, or a component that
        runs inside one, such as a windowed bolt) under ``id``; subscribe it to streams on
        the declarer this returns. Each task gets its own copy of ``bolt``."""
        _check_not_a_class(id, "bolt", bolt)
        as_bolt = getattr(bolt, "as_bolt", None)
        if not isinstance(bolt, BOLT_KINDS) and callable(as_bolt):
            bolt = as_bolt()  # a windowed bolt runs inside its executor bolt, as in Storm
        if not isinstance(bolt, BOLT_KINDS):
            raise InvalidComponentError(
                f"bolt {id!r} must be an instance of engine.Bolt, engine.BasicBolt, "
                f"engine.BatchBolt or engine.BasicBatchBolt, got {type(bolt).__name__}"
                + (" (a spout: use set_spout)" if isinstance(bolt, Spout) else "")
            )
        base = next(kind for kind in BOLT_KINDS if isinstance(bolt, kind))
        method = "execute" if base in (Bolt, BasicBolt) else "execute_batch"
        if getattr(type(bolt), method) is getattr(base, method):
            raise InvalidComponentError(
                f"bolt {id!r} ({type(bolt).__name__}) does not implement {method}"
            )
        self._add(id, bolt, parallelism_hint)
        return BoltDeclarer(self, id)

    def create_topology(self) -> StormTopology:
        """Validate every declaration and return the topology (raises ``TopologyError``)."""
        builder = self
        for rewrite in BUILDER_REWRITES:
            builder = rewrite(builder)
        return builder._create_topology()

    def _create_topology(self) -> StormTopology:
        streams: dict[str, dict[str, StreamInfo]] = {}
        for cid, component in self._components.items():
            declarer = OutputFieldsDeclarer(cid)
            try:
                component.declare_output_fields(declarer)
            except InvalidDeclarationError as exc:
                if str(exc).startswith(f"component {cid!r}"):
                    raise
                raise InvalidDeclarationError(f"component {cid!r}: {exc}") from exc
            except Exception as exc:
                raise InvalidDeclarationError(
                    f"component {cid!r}: declare_output_fields raised {exc!r}"
                ) from exc
            streams[cid] = declarer.streams
        for cid, subs in self._inputs.items():
            for sub in subs:
                self._check_subscription(cid, sub, streams)
                if sub.grouping.custom is not None:
                    # copied per sending task: refused now, naming the attribute at fault
                    check_copyable(
                        sub.grouping.custom, f"bolt {cid!r}: custom grouping on {sub.component!r}"
                    )
        specs: dict[str, ComponentSpec] = {}
        for cid, component in self._components.items():
            own = component.component_configuration() or {}
            if not isinstance(own, Mapping):
                raise InvalidConfigError(
                    f"component {cid!r}: component_configuration() must return a mapping of "
                    f"config keys to values (or None), got {type(own).__name__}"
                )
            conf = dict(own)
            conf.update(self._configs[cid])
            check_component_config(cid, conf)
            validate = getattr(component, "validate_topology_conf", None)
            if callable(validate):  # e.g. a windowed bolt: its window, against its config
                validate(cid, conf)
            check_inputs = getattr(component, "check_inputs", None)
            if callable(check_inputs):  # e.g. a combiner bolt: its key in every input
                check_inputs(
                    cid,
                    [
                        (f"{s.component!r} stream {s.stream!r}", streams[s.component][s.stream])
                        for s in self._inputs[cid]
                        # system streams (checkpoint barriers) are a wrapper's, not the bolt's
                        if not s.stream.startswith("__")
                    ],
                )
            # refused now, not at start; what runs is the object as it is now
            serialized = serialize_component(component, f"component {cid!r}")
            specs[cid] = ComponentSpec(
                id=cid,
                component=component,
                parallelism=self._parallelism[cid],
                num_tasks=self._num_tasks.get(cid, self._parallelism[cid]),
                inputs=tuple(self._inputs[cid]),
                streams=streams[cid],
                config=conf,
                serialized=serialized,
            )
        inputs = {cid: [sub.component for sub in subs] for cid, subs in self._inputs.items()}
        for cycle in _find_cycles(inputs):
            _log.warning(
                "bolts %s form a cycle (Storm allows it): a tuple tree going round it "
                "completes only once a bolt stops re-emitting, and a tree that does not "
                "complete is failed to its spout within %d message timeouts",
                " -> ".join(cycle),
                QUEUED_PROTECTION_TIMEOUTS + 1,
            )
        return StormTopology(
            spouts={k: v for k, v in specs.items() if v.is_spout},
            bolts={k: v for k, v in specs.items() if not v.is_spout},
        )

    def _check_subscription(
        self, cid: str, sub: Subscription, streams: Mapping[str, Mapping[str, StreamInfo]]
    ) -> None:
        where = f"bolt {cid!r}: {sub.grouping!r} on {sub.component!r}"
        if sub.component not in self._components:
            known = sorted(self._components)
            raise InvalidGroupingError(
                f"{where}: no component {sub.component!r} in the topology (components: {known})"
            )
        declared = streams[sub.component]
        info = declared.get(sub.stream)
        if info is None:
            raise InvalidGroupingError(
                f"{where}: {sub.component!r} declares no stream {sub.stream!r} (its streams: "
                f"{sorted(declared)}); declare it in declare_output_fields or pick one of these"
            )
        kind = sub.grouping.kind
        if kind is GroupingKind.DIRECT and not info.direct:
            raise InvalidGroupingError(
                f"{where}: stream {sub.stream!r} is not direct; declare it with direct=True or "
                f"use another grouping"
            )
        if kind is not GroupingKind.DIRECT and info.direct:
            raise InvalidGroupingError(
                f"{where}: stream {sub.stream!r} is direct (its tuples go where emit_direct "
                f"sends them); subscribe with direct_grouping"
            )
        if sub.grouping.fields is not None:
            for name in sub.grouping.fields:
                if name not in info.fields:
                    raise InvalidGroupingError(
                        f"{where}: stream {sub.stream!r} has no field {name!r} (its fields: "
                        f"{list(info.fields)})"
                    )
