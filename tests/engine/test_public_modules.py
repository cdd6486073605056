"""Public objects report their package as their module (``engine.Grouping``, not
``engine._model.grouping.Grouping``), so pickles name only public modules and survive moving a
class between private modules."""

from __future__ import annotations

import io
import pickle
import types
from collections.abc import Sequence
from typing import Any

import pytest

import engine
import engine.coordination
import engine.drpc
import engine.kafka
import engine.patterns
import engine.redis
import engine.state
import engine.testing
import engine.transactional
import engine.ui
import engine.windowing
from engine import (
    BasicBolt,
    Bolt,
    CustomStreamGrouping,
    Fields,
    Grouping,
    GroupingKind,
    Spout,
    StormTopology,
    TopologyBuilder,
)
from engine._model.public import is_private_module, publish

PUBLIC_PACKAGES = [
    engine,
    engine.coordination,
    engine.drpc,
    engine.kafka,
    engine.patterns,
    engine.redis,
    engine.state,
    engine.testing,
    engine.transactional,
    engine.ui,
    engine.windowing,
]


def public_objects(package: types.ModuleType) -> list[tuple[str, Any]]:
    """The classes and functions a package face exports."""
    return [
        (name, getattr(package, name))
        for name in package.__all__
        if isinstance(getattr(package, name), (type, types.FunctionType))
    ]


@pytest.mark.parametrize("package", PUBLIC_PACKAGES, ids=lambda p: p.__name__)
def test_every_public_class_and_function_reports_its_package(package: types.ModuleType) -> None:
    objects = public_objects(package)
    assert objects
    wrong = {name: obj.__module__ for name, obj in objects if obj.__module__ != package.__name__}
    assert wrong == {}


@pytest.mark.parametrize("package", PUBLIC_PACKAGES, ids=lambda p: p.__name__)
def test_every_public_object_is_found_by_its_reported_name(package: types.ModuleType) -> None:
    # What pickle does: import obj.__module__ and look up obj.__qualname__ there.
    for name, obj in public_objects(package):
        assert getattr(package, obj.__qualname__) is obj, name


class Words(Spout):
    def next_tuple(self) -> None:
        pass

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])
        declarer.declare_stream("a", ["word"])
        declarer.declare_stream("b", ["word"])
        declarer.declare_stream("direct", ["word"], direct=True)


class Split(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        collector.emit([tuple[0]])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])


class Count(Bolt):
    def execute(self, tuple: Any) -> None:
        pass


class First(CustomStreamGrouping):
    def choose_tasks(self, task_id: int, values: Sequence[Any]) -> Sequence[int]:
        return [task_id]


def every_grouping_topology() -> StormTopology:
    builder = TopologyBuilder()
    builder.set_spout("words", Words(), 2).set_num_tasks(3).add_configuration("my.key", 1)
    builder.set_bolt("split", Split(), 2).shuffle_grouping("words").all_grouping("words", "a")
    count = builder.set_bolt("count", Count(), 3).fields_grouping("split", Fields("word"))
    count.partial_key_grouping("words", Fields("word")).global_grouping("words", "a")
    count.local_or_shuffle_grouping("words", "b")
    builder.set_bolt("first", Count()).custom_grouping("words", First()).none_grouping("split")
    builder.set_bolt("direct", Count()).direct_grouping("words", "direct")
    return builder.create_topology()


class RecordingUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self.modules: set[str] = set()

    def find_class(self, module: str, name: str) -> Any:
        self.modules.add(module)
        return super().find_class(module, name)


def test_a_pickled_topology_names_only_public_modules() -> None:
    data = pickle.dumps(every_grouping_topology())
    unpickler = RecordingUnpickler(data)
    copy = unpickler.load()
    # The user's own classes (here: this test module's) keep their module, as they must.
    assert unpickler.modules == {"engine", __name__}
    assert b"engine._" not in data
    assert isinstance(copy, StormTopology)
    assert copy.components.keys() == every_grouping_topology().components.keys()
    assert {s.grouping.kind for s in copy.bolts["count"].inputs} == {
        GroupingKind.FIELDS,
        GroupingKind.PARTIAL_KEY,
        GroupingKind.GLOBAL,
        GroupingKind.LOCAL_OR_SHUFFLE,
    }
    assert {s.grouping.kind for s in copy.bolts["first"].inputs} == {
        GroupingKind.CUSTOM,
        GroupingKind.NONE,
    }
    assert isinstance(copy.bolts["first"].inputs[0].grouping.custom, First)


def test_pickled_model_objects_round_trip_by_their_public_names() -> None:
    for obj in (Grouping(GroupingKind.FIELDS, Fields("a", "b")), GroupingKind.ALL, Fields("x")):
        data = pickle.dumps(obj)
        assert b"engine._" not in data
        assert pickle.loads(data) == obj


def test_user_classes_keep_their_own_module() -> None:
    assert Words.__module__ == __name__
    assert First.__module__ == __name__
    assert issubclass(First, engine.CustomStreamGrouping)


# --- publish ----------------------------------------------------------------------------------


def test_publish_claims_private_definitions_of_the_same_package_only() -> None:
    def private_function() -> None:
        pass

    private_function.__module__ = "pkg._impl"
    namespace: dict[str, Any] = {
        "Impl": type("Impl", (), {"__module__": "pkg._impl"}),
        "Deep": type("Deep", (), {"__module__": "pkg.sub._deep"}),
        "Core": type("Core", (), {"__module__": "pkg._core"}),
        "Strategy": type("Strategy", (), {"__module__": "pkg.sub.strategies"}),
        "Already": type("Already", (), {"__module__": "pkg"}),
        "Foreign": type("Foreign", (), {"__module__": "other._impl"}),
        "User": type("User", (), {"__module__": "pkgextra._impl"}),
        "CONSTANT": "a string is not touched",
        "private_function": private_function,
    }
    publish("pkg.sub", namespace, sorted(namespace))
    modules = {
        name: getattr(obj, "__module__", None)
        for name, obj in namespace.items()
        if name != "CONSTANT"
    }
    assert modules == {
        "Impl": "pkg.sub",  # the core's private module, re-exported by the subpackage
        "Deep": "pkg.sub",
        "Core": "pkg.sub",
        "Strategy": "pkg.sub.strategies",  # a public module already
        "Already": "pkg",  # already published by the package face
        "Foreign": "other._impl",
        "User": "pkgextra._impl",
        "private_function": "pkg.sub",
    }
    assert namespace["CONSTANT"] == "a string is not touched"


@pytest.mark.parametrize(
    ("module", "private"),
    [
        ("engine", False),
        ("engine.drpc", False),
        ("engine.testing.strategies", False),
        ("engine._model.grouping", True),
        ("engine.drpc._server", True),
        ("engine._x.y", True),
    ],
)
def test_is_private_module(module: str, private: bool) -> None:
    assert is_private_module(module) is private
