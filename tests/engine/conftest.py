from __future__ import annotations

import pytest


@pytest.fixture(params=[1, 3], ids=["p1", "p3"])
def parallelism(request: pytest.FixtureRequest) -> int:
    return request.param  # type: ignore[no-any-return]
