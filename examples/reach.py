"""Reach: how many distinct people a URL was shown to. Storm's classic DRPC topology.

    reach(url)
      bolt0 get-tweeters     the users who tweeted the URL        (enveloped: no id field)
      bolt1 get-followers    each tweeter's followers             (enveloped, shuffled)
      bolt2 partial-uniquer  distinct followers, per task         (batch bolt; fields
                                                                   grouping on id+follower)
      bolt3 count-aggregator the sum of the partial counts        (batch bolt; by id)

Every stage runs in parallel and many requests are in flight at once; the coordinated
bolts know when a request is complete at each stage, so the batch bolts answer exactly
once per request, with every follower counted. The social graph is bundled in
``examples/data/reach/`` (40 URLs, 300 users).

Run it: ``python examples/reach.py`` computes the reach of every bundled URL through the
topology, checks each against a direct computation, and prints the top ones. With
``--serve 8080`` it serves the function over HTTP instead::

    curl -d 'https://storm.apache.org/posts/00' http://127.0.0.1:8080/drpc/reach
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import uvloop

from engine import BasicBolt, LocalCluster
from engine.coordination import BatchBolt
from engine.drpc import LinearDRPCTopologyBuilder, LocalDRPC

DATA = Path(__file__).with_name("data") / "reach"


def load(name: str) -> dict[str, list[str]]:
    with (DATA / f"{name}.json").open() as f:
        data: dict[str, list[str]] = json.load(f)
    return data


class GetTweeters(BasicBolt):
    """``(url,) -> (tweeter,)`` for everyone who tweeted the URL."""

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        self.tweeters = load("tweeters")

    def execute(self, tuple: Any, collector: Any) -> None:
        for tweeter in self.tweeters.get(tuple["args"], ()):
            collector.emit([tweeter])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["tweeter"])


class GetFollowers(BasicBolt):
    """``(tweeter,) -> (follower,)`` for each of the tweeter's followers."""

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        self.followers = load("followers")

    def execute(self, tuple: Any, collector: Any) -> None:
        for follower in self.followers.get(tuple["tweeter"], ()):
            collector.emit([follower])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["follower"])


class PartialUniquer(BatchBolt):
    """The distinct followers this task saw for one request (each follower reaches exactly
    one task, by fields grouping), counted when the request is complete here."""

    def prepare(self, conf: Any, context: Any, collector: Any, id: Any) -> None:
        self.collector, self.id = collector, id
        self.followers: set[str] = set()

    def execute(self, tuple: Any) -> None:
        self.followers.add(tuple["follower"])

    def finish_batch(self) -> None:
        self.collector.emit([self.id, len(self.followers)])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "partial-count"])


class CountAggregator(BatchBolt):
    """Adds the partial counts of one request: its reach."""

    def prepare(self, conf: Any, context: Any, collector: Any, id: Any) -> None:
        self.collector, self.id = collector, id
        self.count = 0

    def execute(self, tuple: Any) -> None:
        self.count += tuple["partial-count"]

    def finish_batch(self) -> None:
        self.collector.emit([self.id, self.count])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "reach"])


def build(drpc: LocalDRPC, parallelism: int = 2) -> Any:
    builder = LinearDRPCTopologyBuilder("reach")
    builder.add_bolt(GetTweeters(), parallelism, envelope=True)
    builder.add_bolt(GetFollowers(), 2 * parallelism, envelope=True).shuffle_grouping()
    builder.add_bolt(PartialUniquer(), 2 * parallelism).fields_grouping(["id", "follower"])
    builder.add_bolt(CountAggregator(), parallelism).fields_grouping(["id"])
    return builder.create_local_topology(drpc)


def reference_reach(url: str) -> int:
    """The same answer, computed directly."""
    tweeters, followers = load("tweeters"), load("followers")
    return len({f for t in tweeters.get(url, ()) for f in followers.get(t, ())})


def compute_all(parallelism: int) -> dict[str, int]:
    """The reach of every bundled URL, through the topology (blocking calls)."""
    urls = sorted(load("tweeters"))
    with LocalDRPC() as drpc, LocalCluster() as cluster:
        cluster.submit_topology("reach", {}, build(drpc, parallelism))
        return {url: int(drpc.execute("reach", url)) for url in urls}


async def serve(port: int, parallelism: int) -> None:
    from engine import run_topology
    from engine.drpc import DRPCHttpServer

    with LocalDRPC() as drpc:
        async with (
            run_topology(build(drpc, parallelism)),
            DRPCHttpServer(drpc, "127.0.0.1", port) as server,
        ):
            print(f"serving reach at {server.url}/drpc/reach (Ctrl-C to stop)", flush=True)
            await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--serve", type=int, metavar="PORT", help="serve over HTTP on PORT")
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args(argv)
    if args.serve is not None:
        with contextlib.suppress(KeyboardInterrupt):
            uvloop.run(serve(args.serve, args.parallelism))
        return 0
    start = time.perf_counter()
    reach = compute_all(args.parallelism)
    secs = time.perf_counter() - start
    wrong = {
        url: (n, reference_reach(url)) for url, n in reach.items() if n != reference_reach(url)
    }
    for url, n in sorted(reach.items(), key=lambda kv: (-kv[1], kv[0]))[: args.top]:
        print(f"{n:5d}  {url}")
    print(f"{len(reach)} URLs in {secs:.2f} s, all equal to the direct computation: {not wrong}")
    for url, (got, expected) in wrong.items():
        print(f"WRONG {url}: {got}, expected {expected}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
