"""The public faces of ``engine.windowing`` and ``engine.patterns``: sorted ``__all__``,
every name importable and reporting its package (pickles name public modules only)."""

from __future__ import annotations

import pickle
import types

import pytest

import engine.patterns
import engine.windowing
from engine import TopologyBuilder
from engine.windowing import Count

PACKAGES = [engine.windowing, engine.patterns]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_all_is_sorted_and_public(package: types.ModuleType) -> None:
    assert package.__all__ == sorted(package.__all__, key=lambda n: (not n.isupper(), n))
    for name in package.__all__:
        obj = getattr(package, name)
        if isinstance(obj, (type, types.FunctionType)):
            assert obj.__module__ == package.__name__, name


def test_a_topology_with_a_windowed_bolt_pickles_by_public_names() -> None:
    from .components import EventSpout, RecordingWindow

    b = TopologyBuilder()
    b.set_spout("events", EventSpout([]))
    b.set_bolt("win", RecordingWindow().with_window(Count(3))).shuffle_grouping("events")
    data = pickle.dumps(b.create_topology())
    assert b"engine.windowing._" not in data and b"engine.windowing" in data
