"""Project-wide pytest configuration: Squall's own pytest plugin (the simulation fixture),
one Hypothesis profile: no per-example deadline, since a shared 2-core CI machine stalls
any example now and then (each test still has pytest-timeout's bound), and the files that
hold ``slow`` tests collected first."""

from __future__ import annotations

import pytest
from hypothesis import settings

pytest_plugins = ["engine.testing.pytest_plugin"]

settings.register_profile("squall", deadline=None)
settings.load_profile("squall")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files holding a ``slow`` test (a Spark driver of its own, a local cluster, a kill
    campaign: half a minute to two each) first, the rest in their order: the test command
    hands whole files to two workers in collection order, and files that long at the end
    would leave one worker running them while the other has nothing left."""
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)
