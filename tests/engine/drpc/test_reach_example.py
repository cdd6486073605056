"""examples/reach.py: Storm's reach topology answers every bundled URL exactly."""

from __future__ import annotations

import asyncio

import pytest
from examples import reach

from engine import run_topology
from engine.drpc import LocalDRPC

from ..topologies import run


def test_every_url_through_the_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert reach.main(["--parallelism", "1", "--top", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "  177  https://docs.example.io/posts/39"
    assert lines[-1].startswith("40 URLs in ")
    assert lines[-1].endswith(" s, all equal to the direct computation: True")


@pytest.mark.parametrize("parallelism", [1, 3])
def test_concurrent_requests_each_get_their_own_reach(parallelism: int) -> None:
    urls = [*sorted(reach.load("tweeters")), "https://unknown.example/"]

    async def main() -> list[str]:
        with LocalDRPC() as drpc:
            async with run_topology(reach.build(drpc, parallelism), {"topology.seed": 1}):
                return await asyncio.gather(*(drpc.execute_async("reach", url) for url in urls * 3))

    assert run(main()) == [str(reach.reference_reach(url)) for url in urls * 3]
    assert reach.reference_reach("https://unknown.example/") == 0
