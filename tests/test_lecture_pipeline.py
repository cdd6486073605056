"""``examples/lecture_pipeline.py`` runs as written (log lines -> Kafka -> a sliding
event-time window -> Redis) against a real broker and a real redis-server, and Redis holds
exactly the counts a direct computation over the lines gives."""

from __future__ import annotations

import collections
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import lecture_pipeline as lp  # noqa: E402  (the example, imported for its parts)

pytestmark = [pytest.mark.kafka, pytest.mark.redis]


def direct_counts() -> tuple[dict[str, int], int]:
    """``lecture:views:<end>:<page>`` -> views for every window that closes, by brute force
    over the lines (windows are ``(end - 60, end]``, ends on the 10 s grid), and the number
    of malformed lines."""
    views: list[tuple[int, str]] = []
    malformed = 0
    for _, line in lp.make_lines():
        parsed = lp.parse(line)
        if parsed is None:
            malformed += 1
        elif parsed[1] < lp.END_TS:
            views.append((parsed[1], parsed[0]))
    first = min(ts for ts, _ in views)
    last = max(ts for ts, _ in views)
    counts: dict[str, int] = {}
    end = first - first % lp.SLIDE_SECS
    while end - lp.WINDOW_SECS < last:
        inside = collections.Counter(p for ts, p in views if end - lp.WINDOW_SECS < ts <= end)
        for page, n in inside.items():
            counts[f"lecture:views:{end}:{page}"] = n
        end += lp.SLIDE_SECS
    return counts, malformed


@pytest.mark.timeout(300)
def test_lecture_pipeline_stores_the_direct_computation_in_redis(tmp_path: Path) -> None:
    redis = pytest.importorskip("redis")
    pytest.importorskip("confluent_kafka")
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    from engine.kafka import LocalKafkaBroker
    from engine.redis import LocalRedisServer

    with LocalKafkaBroker() as broker, LocalRedisServer(tmp_path) as server:
        assert (
            lp.main(["--bootstrap-servers", broker.bootstrap_servers, "--redis-url", server.url])
            == 0
        )
        client = redis.Redis.from_url(server.url, decode_responses=True)
        stored = {k: int(client.get(k)) for k in client.keys("lecture:views:*")}
        malformed = int(client.get("lecture:malformed"))
        client.close()
    expected, expected_malformed = direct_counts()
    assert malformed == expected_malformed == 20
    assert stored == expected
