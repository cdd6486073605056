"""``examples/site_stats.py`` runs as written (Spark -> event-time windows -> Redis) and its
Redis output matches a direct computation over the parquet file it generated."""

from __future__ import annotations

import collections
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.redis import LocalRedisServer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import site_stats  # noqa: E402  (the example, imported for its constants and redis helper)


def expected_latest_windows(rows: dict[str, list[Any]]) -> dict[str, tuple[int, int]]:
    """Per page: (views, unique visitors) in the latest window holding it, by brute force.

    Windows are ``(E - 60, E]`` for ``E`` on the 10 s grid. The views two minutes behind are
    left out (counted late or not, none of them is in a page's latest window: checked)."""
    window, slide = site_stats.WINDOW_SECS, site_stats.SLIDE_SECS
    by_page: dict[str, list[tuple[float, str, bool]]] = collections.defaultdict(list)
    for i, (ts, page, visitor) in enumerate(
        zip(rows["ts"], rows["page"], rows["visitor"], strict=True)
    ):
        if page in site_stats.END_PAGES:
            continue
        behind = ts < i * 600 / site_stats.EVENTS - 1
        by_page[page].append((ts, visitor, behind))
    out = {}
    for page, views in by_page.items():
        last = max(ts for ts, _, behind in views if not behind)
        end = math.floor((last + window) / slide) * slide  # the latest grid end holding it
        if end - window >= last:
            end -= slide
        inside = [(ts, v, behind) for ts, v, behind in views if end - window < ts <= end]
        assert not any(behind for _, _, behind in inside), page
        out[page] = (len(inside), len({v for _, v, _ in inside}))
    return out


@pytest.mark.slow
@pytest.mark.spark
def test_site_stats_runs_and_redis_holds_the_direct_computation(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    redis = pytest.importorskip("redis")
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    import pyarrow.parquet as pq

    server = LocalRedisServer(tmp_path)
    server.start()
    url = server.url
    try:
        done = subprocess.run(
            [
                sys.executable,
                str(ROOT / "examples" / "site_stats.py"),
                "--redis-url",
                url,
                "--out",
                str(tmp_path / "out"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        with redis.Redis.from_url(url, decode_responses=True) as r:
            top = dict(r.zrange("site:top_pages", 0, -1, withscores=True))
            views = r.hgetall("site:views")
            visitors = r.hgetall("site:visitors")
            late = int(r.get("site:late_views") or 0)
    finally:
        server.kill()
    rows = pq.read_table(tmp_path / "out" / "views.parquet").to_pydict()
    want = expected_latest_windows(rows)
    assert {page: int(n) for page, n in top.items()} == {p: v for p, (v, _) in want.items()}
    assert {page: int(n) for page, n in views.items()} == {p: v for p, (v, _) in want.items()}
    assert {page: int(n) for page, n in visitors.items()} == {p: u for p, (_, u) in want.items()}
    behind = sum(ts < i * 600 / site_stats.EVENTS - 1 for i, ts in enumerate(rows["ts"]))
    assert behind == 320
    # which views are late depends on when the watermark moved; each one counted is one of
    # those behind, and the example checked Redis against the windows' own count
    assert 0 < late <= behind
    assert f"late views counted in Redis: {late:,} (the windows saw {late:,} late" in done.stdout
    top10 = sorted(want.items(), key=lambda kv: -kv[1][0])[:3]
    for page, (n, _) in top10:
        assert f"{page:<12}{n:>8,}" in done.stdout
