"""Fixtures shared by the engine's tests."""

from __future__ import annotations

import pytest


@pytest.fixture(params=[1, 3], ids=["p1", "p3"])
def parallelism(request: pytest.FixtureRequest) -> int:
    """Run the test once with every component at parallelism 1 and once at 3 (bytewax's
    habit: every flow is re-run at parallelism 1 and N)."""
    return int(request.param)
